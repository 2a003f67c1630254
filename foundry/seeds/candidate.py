"""Assemble a seed candidate file from translated Inductor wrappers.

The file holds the task's own Model (renamed `_ReferenceModel`, forward dropped) so that
`ModelNew(*init)` builds the same submodules and parameters; the kernels as plain source
(the backend's part); one run method per specialisation (the sizes torch.compile was run
at: Inductor's code is specialised on them); and a forward that picks the run method by
the init inputs and the forward inputs' sizes, strides and dtypes, and names the sizes it
has when it is called with others.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from foundry.seeds.result import SeedError
from foundry.seeds.wrapper import HELPERS
from foundry.templates.candidate import REFERENCE_NAME, reference_source

INPUT_KEY = '''
def _input_key(inputs):
    """What a run method was generated for: sizes, strides and dtypes (values of non-tensors)."""
    return tuple((tuple(x.shape), tuple(x.stride()), str(x.dtype).replace("torch.", ""))
                 if isinstance(x, torch.Tensor) else repr(x) for x in inputs)
'''


class SignatureError(SeedError):
    """The task's forward has a signature a seed cannot reproduce."""


@dataclass(frozen=True)
class RunMethod:
    """One specialisation: its keys and the translated body (lines)."""

    init_key: str
    input_key: tuple
    body: tuple


@dataclass(frozen=True)
class BackendPart:
    """What the backend adds: imports, the kernels' source block, lines of __init__."""

    header: str
    kernels: str
    init_lines: tuple


def forward_parameters(task_source: str) -> tuple[str, ...]:
    """The positional parameter names of the task's Model.forward."""
    tree = ast.parse(task_source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    a = fn.args
                    if a.vararg or a.kwarg or a.kwonlyargs:
                        raise SignatureError("Model.forward takes *args, **kwargs or keyword-only arguments")
                    return tuple(x.arg for x in a.posonlyargs + a.args)[1:]
    raise SignatureError("the task defines no Model.forward")


def assemble(*, task_source: str, note: str, part: BackendPart, runs: list[RunMethod]) -> str:
    params = forward_parameters(task_source)
    args = ", ".join(params)
    tup = f"({args}{',' if len(params) == 1 else ''})"
    methods = []
    table = []
    for i, run in enumerate(runs):
        body = textwrap.indent("\n".join(run.body), " " * 8)
        methods.append(f"    def _run_{i}(self{', ' if params else ''}{args}):\n{body}\n")
        table.append(f"    ({run.init_key!r}, {run.input_key!r}): ModelNew._run_{i},")
    init = textwrap.indent("\n".join(part.init_lines), " " * 8)
    return f'''"""{note}"""
{part.header}


# ---- the reference module (its constructor builds the same submodules and parameters)
{reference_source(task_source, used_by=part.kernels + chr(10).join(methods) + init)}

# ---- Inductor's kernels
{part.kernels}

# ---- Inductor's wrapper helpers
{HELPERS}
{INPUT_KEY}

class ModelNew({REFERENCE_NAME}):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
{init}
        init = repr(list(args)) if not kwargs else repr((list(args), kwargs))
        self._runs = {{key: run for (init_key, key), run in _SPECIALIZATIONS.items() if init_key == init}}
        if not self._runs:
            raise ValueError(f"this seed was generated for init inputs "
                             f"{{sorted({{k[0] for k in _SPECIALIZATIONS}})}}, not {{init}}")

    def forward(self{', ' if params else ''}{args}):
        key = _input_key({tup})
        run = self._runs.get(key)
        if run is None:
            raise ValueError(f"this seed has kernels for inputs {{list(self._runs)}}, not {{key}}")
        return run(self{', ' if params else ''}{args})

{chr(10).join(methods)}

# (init inputs, forward inputs) -> the run method generated for them
_SPECIALIZATIONS = {{
{chr(10).join(table)}
}}
'''
