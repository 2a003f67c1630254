"""The judge: sandboxed, exploit-resistant evaluation of one candidate on one task.

    from foundry.evaluate import Evaluator, EvalConfig
    ev = Evaluator(config=EvalConfig.from_config({"device": "cpu", "trials": 5}))
    result = ev.evaluate(task=task, candidate=candidate)   # an EvalResult; never raises
    eager_ms, compile_ms = ev.baselines(task=task)
    ev.close()

How a verdict is reached (details in README.md beside this file):
1. static checks of the source (foundry.evaluate.static_checks);
2. a fresh child forked from a warm, pre-imported worker process with a clean environment
   runs the candidate: inputs are built from seeds before its code loads, then trials,
   a repeat of the first trial, an idle probe, the timing protocol, another idle probe;
   outputs come back as JSON + raw bytes (never pickles): small ones on a pipe, large ones
   through a sealed shared-memory file (CPU) or CUDA IPC (GPU), copied by the judge on arrival;
3. after the child's process group is killed, the judge computes the reference outputs
   from the same seeds in its own process and compares, applies the guards, cross-checks
   the reported timings against its own clock, and times baselines (cached).
This package never imports the LLM, islands or actors packages.
"""

from foundry.bytecode import keep_bytecode

keep_bytecode()  # before torch: the judge, its warm workers and the CLI all import through here

import importlib

# imported on first use, so that a torch-free part (the warm worker's handle, the config)
# can be imported, and the warm worker started, before torch
_EXPORTS = {"BackendSpec": "foundry.evaluate.backends", "backends": "foundry.evaluate.backends",
            "get_backend": "foundry.evaluate.backends", "register": "foundry.evaluate.backends",
            "EvalConfig": "foundry.evaluate.config", "Evaluator": "foundry.evaluate.evaluator"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'foundry.evaluate' has no attribute {name!r}")
