"""Capture a model's forward as a torch.fx graph: torch.export first (batch and other
dimensions left dynamic where the model allows, so the graph also runs on other batch
sizes), torch.fx symbolic tracing where export fails, with the reason export failed.

The same inputs give the same graph, so deployment re-captures a model and finds the
regions extraction found."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn as nn

from foundry.extract.errors import UserModelError

METHODS = ("export", "fx")
ERROR_CHARS = 400


@dataclass(frozen=True)
class CapturedGraph:
    """The forward as a GraphModule; `method` says how it was captured ("export" or "fx"),
    `export_error` why torch.export did not capture it ("" when it did)."""

    graph_module: fx.GraphModule
    method: str
    export_error: str = ""
    dynamic: bool = True  # False: export had to specialise every dimension

    @property
    def graph(self) -> fx.Graph:
        return self.graph_module.graph


def _reason(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:ERROR_CHARS]}"


def _export(model: nn.Module, inputs: tuple, dynamic: bool) -> fx.GraphModule:
    from torch.export import Dim, export
    shapes = tuple({i: Dim.AUTO for i in range(x.dim())} for x in inputs) if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = export(model, inputs, dynamic_shapes=shapes)
    return program.module()


def capture(model: nn.Module, inputs: tuple, *, method: str | None = None) -> CapturedGraph:
    """The model's forward graph (the model is put in eval mode: regions are for inference).
    `method` forces "export" or "fx"; None tries export, then fx."""
    if method is not None and method not in METHODS:
        raise ValueError(f"unknown capture method {method!r} (choose from {', '.join(METHODS)})")
    model.eval()
    errors = []
    if method in (None, "export"):
        for dynamic in (True, False):
            try:
                return CapturedGraph(_export(model, tuple(inputs), dynamic), "export",
                                     "; ".join(errors), dynamic=dynamic)
            except Exception as e:  # noqa: BLE001 - any export failure sends us to the next way
                errors.append(("dynamic shapes: " if dynamic else "static shapes: ") + _reason(e))
        if method == "export":
            raise UserModelError(f"torch.export cannot capture {type(model).__name__}: {errors[-1]}")
    try:
        gm = fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001
        why = f"torch.export failed ({errors[-1]}); " if errors else ""
        raise UserModelError(f"cannot capture the forward of {type(model).__name__}: {why}"
                             f"torch.fx symbolic_trace failed ({_reason(e)})") from None
    return CapturedGraph(gm, "fx", " | ".join(errors[-1:]) or "", dynamic=True)
