"""Direct attribute reads for a captured graph.

torch.export's GraphModule keeps the model's module tree and reads every parameter and
buffer through it on every call (`getattr(self.blocks, "0").ln.weight`: three
`nn.Module.__getattr__` calls for one tensor, hundreds a forward). On a host-bound model
that costs a third of its time (benchmarks/graph_overhead.py). `flatten_attributes(gm)`
registers each such tensor a second time on the root, under a flat name, and points the
graph at it: one lookup a read. Parameters stay the same objects in both places, so
`.to()`, optimisers and in-place updates see one tensor. `state_dict()` and
`load_state_dict()` keep the original names only (a checkpoint of the original model
loads as before, and fills the flat names too)."""

from __future__ import annotations

import torch
import torch.fx as fx
import torch.nn as nn

FLAT_PREFIX = "_foundry_flat_"


def _resolve(root: nn.Module, path: str):
    value = root
    for part in path.split("."):
        value = getattr(value, part)
    return value


def flatten_attributes(gm: fx.GraphModule) -> int:
    """Point each nested tensor read of `gm`'s graph at a root-level name (see the module
    doc); returns how many tensors got one. Recompiles `gm`."""
    flat_of: dict[str, str] = dict(getattr(gm, "foundry_flat_paths", {}))  # flat name -> original path
    by_path = {path: flat for flat, path in flat_of.items()}
    for node in gm.graph.nodes:
        if node.op != "get_attr" or "." not in str(node.target) or str(node.target).startswith(FLAT_PREFIX):
            continue
        path = str(node.target)
        value = _resolve(gm, path)
        if not isinstance(value, torch.Tensor):
            continue  # a submodule or another object: read as before
        flat = by_path.get(path)
        if flat is None:
            flat = FLAT_PREFIX + path.replace(".", "__")
            if isinstance(value, nn.Parameter):
                gm.register_parameter(flat, value)
            else:  # never saved under the flat name; loading copies into the same tensor
                gm.register_buffer(flat, value, persistent=False)
            by_path[path], flat_of[flat] = flat, path
        node.target = flat
    gm.foundry_flat_paths = flat_of
    if flat_of and not getattr(gm, "_foundry_flat_hooks", False):
        gm.register_state_dict_post_hook(_drop_flat_names)
        gm.register_load_state_dict_pre_hook(_fill_flat_names)
        gm._foundry_flat_hooks = True
    gm.recompile()
    return len(flat_of)


def _drop_flat_names(module: nn.Module, state_dict: dict, prefix: str, local_metadata) -> None:
    for flat in getattr(module, "foundry_flat_paths", {}):
        state_dict.pop(prefix + flat, None)


def _fill_flat_names(module: nn.Module, state_dict: dict, prefix: str, local_metadata, strict,
                     missing_keys, unexpected_keys, error_msgs) -> None:
    for flat, path in getattr(module, "foundry_flat_paths", {}).items():
        if isinstance(getattr(module, flat, None), nn.Parameter) and prefix + path in state_dict:
            state_dict[prefix + flat] = state_dict[prefix + path]
