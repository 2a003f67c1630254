"""Which regions are exactly one submodule's forward, and the copy of a model they go into."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch
import torch.nn as nn

from foundry.deploy.module_swap import exact_module, module_calls, module_site, share_clone
from foundry.extract.capture import capture
from foundry.extract.observe import observe, with_values
from foundry.extract.split import split
from foundry.extract.subgraph import region_arguments, region_module


def _small_models():
    name = "module_swap_test_small_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "extract" / "small_models.py")
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def Net(twice: bool = False) -> nn.Module:
    return _small_models().GeluNet(twice=twice)


def _regions(model):
    inputs = (torch.randn(8, 16),)
    gm = capture(model.eval(), inputs, method="export").graph_module
    described = observe(gm, inputs)
    found = split(gm, described)
    obs = with_values(gm, inputs, {n for r in found for n in r.inputs}, described)
    return gm, obs, inputs, {r.label: r for r in found}


def test_a_region_is_exactly_a_submodule_only_when_nothing_else_computes_in_it():
    gm, _, _, regions = _regions(Net())
    assert exact_module(gm, regions["linear"]) == "fc"
    assert exact_module(gm, regions["mul_pow_add_tanh"]) == "act"
    assert exact_module(gm, regions["add_layer_norm"]) is None  # the add sits in the model itself


def test_a_site_takes_the_regions_activations_and_gives_its_outputs():
    model = Net()
    gm, obs, inputs, regions = _regions(model)
    region = regions["mul_pow_add_tanh"]
    args = region_arguments(gm, region, obs.values)
    calls = module_calls(model, {"act", "fc"}, inputs)
    assert len(calls["act"]) == 1 and len(calls["fc"]) == 1
    site = module_site("act", calls["act"], region, list(args), region_module(gm, region))
    assert site is not None and site.single_output and site.param_names == ()
    linear = regions["linear"]
    fc = module_site("fc", calls["fc"], linear, list(region_arguments(gm, linear, obs.values)),
                     region_module(gm, linear))
    assert fc is not None and sorted(fc.param_names) == ["bias", "weight"]
    # called with other values than the region's (another forward's): not this region's site
    other = module_calls(model, {"act"}, (torch.randn(8, 16),))
    assert module_site("act", other["act"], region, list(args), region_module(gm, region)) is None


def test_a_submodule_called_twice_is_no_site():
    model = Net(twice=True)
    gm, obs, inputs, regions = _regions(model)
    region = regions["mul_pow_add_tanh"]  # both calls' chains, one region inside `act`
    assert exact_module(gm, region) == "act"
    calls = module_calls(model, {"act"}, inputs)
    assert len(calls["act"]) == 2
    assert module_site("act", calls["act"], region, list(region_arguments(gm, region, obs.values)),
                       region_module(gm, region)) is None


def test_the_copy_shares_tensors_and_nothing_done_to_it_reaches_the_original():
    model = Net()
    copy = share_clone(model)
    assert copy is not model and copy.fc is not model.fc
    assert copy.fc.weight is model.fc.weight and copy.norm.bias is model.norm.bias
    copy.act = nn.Identity()
    copy.fc.register_forward_hook(lambda *a: None)
    assert type(model.act).__name__ == "TanhGelu" and not model.fc._forward_hooks
    x = torch.randn(8, 16)
    with torch.no_grad():
        assert torch.equal(share_clone(model)(x), model(x))
