"""Whether a model's forward rebinds its tensor attributes (`self.hidden = torch.tanh(...)`:
a recurrent cell keeping its state between calls), which the captured graph cannot do.

torch.export and torch.fx record what a forward computes and its in-place writes (to
parameters, buffers and plain tensor attributes alike: the captured graph writes into the
model's own tensors), but an attribute assignment is Python, not an op: the captured
graph drops it. A deployed graph would then hand back the right outputs while the model's
state stayed where capture left it; the next call that reads that state (a recurrent
cell called without its hidden state) would differ from the user's model. The user's own
forward, with submodules swapped, still makes the assignment, as torch.compile does."""

from __future__ import annotations

import torch
import torch.nn as nn


def tensor_attributes(model: nn.Module) -> dict:
    """{(module path, attribute name): value} for every parameter, buffer and plain tensor
    attribute of `model` and its submodules (a `None` parameter or buffer included)."""
    out = {}
    for path, module in model.named_modules():
        for name, value in list(module._parameters.items()) + list(module._buffers.items()):
            out[(path, name)] = value
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor):
                out[(path, name)] = value
    return out


def rebound_by_forward(model: nn.Module, inputs: tuple) -> tuple[str, ...]:
    """The tensor attributes (dotted names) that one forward of `model` on `inputs` (no
    gradient) sets, rebinds or removes; () for a forward that leaves them all in place.
    The forward runs on the model itself: its state moves on as the user's call would."""
    before = tensor_attributes(model)
    with torch.no_grad():
        model(*inputs)
    after = tensor_attributes(model)
    changed = [key for key in before.keys() | after.keys() if before.get(key) is not after.get(key)]
    return tuple(sorted(".".join(p for p in key if p) for key in changed))
