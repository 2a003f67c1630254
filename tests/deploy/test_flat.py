"""The deployed graph reads its parameters by flat names (foundry.deploy.flat): same
outputs, the same tensors, the original state_dict names, and it still compiles."""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

from foundry.deploy.flat import FLAT_PREFIX, flatten_attributes
from foundry.extract.capture import capture


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.fc = nn.BatchNorm1d(8), nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.blocks(x)


def _graph():
    torch.manual_seed(0)
    model = Net().eval()
    with torch.no_grad():
        for block in model.blocks:
            block.norm.running_mean.uniform_(-1, 1)
            block.norm.running_var.uniform_(0.5, 2)
    x = torch.randn(4, 8)
    return model, x, capture(model, (x,)).graph_module


def test_the_graph_reads_each_tensor_by_one_flat_name_and_gives_the_same_outputs():
    model, x, gm = _graph()
    assert "getattr(self.blocks" in gm.code  # what export makes: a walk down the tree per read
    before = gm(x)
    assert flatten_attributes(gm) == 14  # per block: weight, bias; the norm's weight, bias, mean, var, count
    assert "getattr(self.blocks" not in gm.code and f"self.{FLAT_PREFIX}blocks__0__fc__weight" in gm.code
    torch.testing.assert_close(gm(x), before, rtol=0, atol=0)
    torch.testing.assert_close(gm(x), model(x))
    # the same tensors, not copies
    assert getattr(gm, FLAT_PREFIX + "blocks__1__fc__weight") is getattr(gm.blocks, "1").fc.weight
    assert getattr(gm, FLAT_PREFIX + "blocks__0__norm__running_var") is getattr(gm.blocks, "0").norm.running_var
    assert len(list(gm.parameters())) == len(list(model.parameters()))
    assert flatten_attributes(gm) == 14 and gm.code.count(FLAT_PREFIX + "blocks__0__fc__weight") >= 1  # again: no-op


def test_state_dict_keeps_the_original_names_and_a_checkpoint_of_the_original_loads():
    model, x, gm = _graph()
    keys = list(gm.state_dict())
    flatten_attributes(gm)
    assert list(gm.state_dict()) == keys and not any(FLAT_PREFIX in k for k in keys)
    other = Net().eval()  # other weights: loading the model's checkpoint must change what the graph reads
    gm.load_state_dict(other.state_dict(), strict=True)
    torch.testing.assert_close(gm(x), other(x))
    assert getattr(gm, FLAT_PREFIX + "blocks__0__fc__weight") is getattr(gm.blocks, "0").fc.weight


def test_a_copy_a_dtype_change_and_torch_compile_keep_working():
    model, x, gm = _graph()
    flatten_attributes(gm)
    twin = copy.deepcopy(gm)
    torch.testing.assert_close(twin(x), model(x))
    assert getattr(twin, FLAT_PREFIX + "blocks__0__fc__weight") is getattr(twin.blocks, "0").fc.weight
    wide = copy.deepcopy(gm).to(torch.float64)
    assert getattr(wide, FLAT_PREFIX + "blocks__0__fc__weight") is getattr(wide.blocks, "0").fc.weight
    torch.testing.assert_close(wide(x.double()), model.double()(x.double()))
    compiled = torch.compile(twin, backend="eager")
    torch.testing.assert_close(compiled(x), twin(x))
