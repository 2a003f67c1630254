"""The names a task file defines (`Model`, `get_inputs`, `get_init_inputs`) and the one a
candidate defines (`ModelNew`) trip no static check where they are only text: in a
docstring, a comment or a string. Calling the reference still does."""

import pytest

from foundry.evaluate.backends import get_backend
from foundry.evaluate.static_checks import check_source

HONEST = '''
import torch
import torch.nn as nn
from foundry.kernels import c
SRC = r"""
#include <stdint.h>
void relu(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0; }
"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lib = c.build(SRC)
    def forward(self, x):
        y = torch.empty_like(x.contiguous())
        self.lib.relu(x, y, x.numel())
        return y.view(x.shape)
'''

NAMES = ("Model", "ModelNew", "get_inputs", "get_init_inputs")


def _reasons(src, backend="c"):
    return check_source(src, backend=get_backend(backend)).reasons


def _mentions(name):
    return f"{name}(x), {name} (1 occurrence(s)), {name}()"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("where", ["module docstring", "class docstring", "function docstring"])
def test_a_name_in_a_docstring_trips_nothing(name, where):
    text = f'"""Region linear_relu of {_mentions(name)}, captured on cpu."""'
    if where == "module docstring":
        src = text + "\n" + HONEST
    elif where == "class docstring":
        src = HONEST.replace("class ModelNew(nn.Module):\n", f"class ModelNew(nn.Module):\n    {text}\n")
    else:
        src = HONEST.replace("    def forward(self, x):\n", f"    def forward(self, x):\n        {text}\n")
    assert _reasons(src) == {}


@pytest.mark.parametrize("name", NAMES)
def test_a_name_in_a_comment_trips_nothing(name):
    src = HONEST.replace("        return y.view(x.shape)",
                         f"        # same as {_mentions(name)}\n        return y.view(x.shape)  # {name}(x)")
    assert _reasons(src) == {}


@pytest.mark.parametrize("name", NAMES)
def test_a_name_in_a_string_trips_nothing(name):
    src = HONEST + f'\nNOTE = "{_mentions(name)}"\nLABEL = f"of {{NOTE}}: {name} (" + \'{name}()\'\n'
    assert _reasons(src) == {}


@pytest.mark.parametrize("name", NAMES)
def test_a_name_in_c_source_trips_nothing(name):
    src = HONEST.replace('#include <stdint.h>\n', f'#include <stdint.h>\n/* {name}(x) */ static int {name}(void) {{ return 0; }}\n')
    assert _reasons(src) == {}


@pytest.mark.parametrize("call", [
    "Model()(x)", "Model(4, 8)", "ref.Model()", "get_inputs()", "task.get_inputs()", "get_init_inputs()",
    "Model (\n        )"])
def test_calling_the_reference_is_flagged_with_its_line(call):
    src = HONEST + f"\ndef f(x):\n    return {call}\n"
    line = src.count("\n", 0, src.index("def f(x):")) + 2
    hit = _reasons(src)["reference_call"]
    assert hit.startswith(f"line {line}: ") and call.split("(")[0].strip() in hit


@pytest.mark.parametrize("forward", ["super().forward(x)", "super(ModelNew, self).forward(x)",
                                     "Model.forward(self, x)", "super().forward"])
def test_the_references_forward_is_flagged(forward):
    src = HONEST.replace("        y = torch.empty_like(x.contiguous())\n", f"        y = {forward}\n")
    assert "reference_call" in _reasons(src)


def test_a_reference_call_inside_a_triton_kernel_body_is_flagged():
    # the Triton interpreter runs a kernel body as Python
    src = ('import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n'
           '@triton.jit\ndef k(x_ptr, n, B: tl.constexpr):\n    m = Model()\n    tl.store(x_ptr, tl.load(x_ptr))\n'
           'class ModelNew(nn.Module):\n    def forward(self, x):\n        k[(1,)](x, 1, B=16)\n        return x\n')
    assert set(_reasons(src, backend="triton")) == {"reference_call"}


def test_a_class_named_model_new_only_in_a_docstring_is_no_model_new():
    src = HONEST.replace("class ModelNew(", "class Fast(") + '\n"""class ModelNew(nn.Module): ..."""\n'
    assert "no_model_new" in _reasons(src)
