"""Importing the model packages the example SPECs use (torchvision, transformers) next to
a CPU build of torch.

The torchvision wheels on the package index are built against CUDA torch: their
compiled ops (`torchvision/_C.so`) do not load beside a CPU build of torch, and
torchvision's import then fails registering fake kernels for `torchvision::nms` and
`torchvision::qnms`, ops that were never defined ("operator torchvision::nms does not
exist"). transformers imports torchvision whenever it is installed, so it fails the same
way. The models used here (ResNet-18, GPT-2, Llama blocks) call none of torchvision's
compiled ops, so where they cannot load, `import_torchvision` defines those two ops'
schemas (without kernels: calling them raises) so that the import goes through. Where
the compiled ops load, nothing is defined."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import torch

_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
            "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_fragment = None


def _compiled_ops_load(package_dir: Path) -> bool:
    libs = sorted(package_dir.glob("_C*.so"))
    if not libs:
        return False
    try:
        torch.ops.load_library(str(libs[0]))
        return True
    except OSError:
        return False


def import_torchvision():
    """`import torchvision`, defining the schemas its import needs where its compiled ops
    cannot load (see the module doc). Raises ImportError naming the package when it is
    not installed (`pip install -e '.[models]'`, see pyproject.toml)."""
    global _fragment
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("torchvision is not installed (see the `models` extra in pyproject.toml)")
    if _fragment is None and not hasattr(torch.ops.torchvision, "nms"):
        if not _compiled_ops_load(Path(list(spec.submodule_search_locations)[0])):
            _fragment = torch.library.Library("torchvision", "FRAGMENT")
            for schema in _SCHEMAS:
                _fragment.define(schema)
    return importlib.import_module("torchvision")


def import_transformers():
    """`import transformers` (which imports torchvision when that is installed)."""
    if importlib.util.find_spec("torchvision") is not None:
        import_torchvision()
    if importlib.util.find_spec("transformers") is None:
        raise ImportError("transformers is not installed (see the `models` extra in pyproject.toml)")
    return importlib.import_module("transformers")
