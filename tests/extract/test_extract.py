"""Extraction: capture, region splitting and merging, manifest contents, task files that
the project's loader reads and whose Model reproduces the region."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import small_models
from foundry.extract import UserModelError, extract, read_manifest
from foundry.extract.__main__ import main as extract_main
from foundry.extract.capture import capture
from foundry.extract.manifest import fingerprint
from foundry.extract.observe import observe, with_values
from foundry.extract.split import param_tensor, split
from foundry.extract.taskcheck import load_task_model
from foundry.tasks.inputs import InputSpec, make_inputs
from foundry.tasks.loader import build_module, load_task
from foundry.tasks.suite import load_suite

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def mlp_tasks(tmp_path_factory):
    model, inputs = small_models.build_mlp()
    out = tmp_path_factory.mktemp("mlp_tasks")
    manifest = extract(model, inputs, out, spec="small_models:build_mlp")
    return model, inputs, out, manifest


def test_repeated_regions_become_one_task_with_a_count(mlp_tasks):
    _, _, out, manifest = mlp_tasks
    got = {r.label: r.count for r in manifest.regions}
    assert got == {"layer_norm": 3, "linear_gelu": 2, "linear_add": 2}
    assert sorted(p.name for p in out.glob("*.py")) == sorted(r.file for r in manifest.regions)
    norms = manifest.region(next(r.task_id for r in manifest.regions if r.label == "layer_norm"))
    assert [o.modules for o in norms.occurrences] == [("blocks.0.norm",), ("blocks.1.norm",), ("norm",)]
    assert [dict(o.param_map)["norm0.weight"] for o in norms.occurrences] == \
        ["blocks.0.norm.weight", "blocks.1.norm.weight", "norm.weight"]


def test_manifest_records_model_device_time_and_signatures(mlp_tasks):
    model, inputs, out, manifest = mlp_tasks
    data = json.loads((out / "manifest.json").read_text())
    assert data["model"] == {"class": "SmallMLP", "fingerprint": fingerprint(model), "spec": "small_models:build_mlp"}
    assert data["device"] == "cpu" and data["forward_ms"] > 0
    assert data["capture"]["method"] == "export" and data["capture"]["dynamic"] is True
    assert data["inputs"][0]["shape"] == [8, 16] and data["inputs"][0]["dtype"] == "float32"
    gelu = next(r for r in data["regions"] if r["label"] == "linear_gelu")
    assert gelu["inputs"] == [{"shape": [8, 16], "dtype": "float32"}]
    assert gelu["outputs"] == [{"shape": [8, 32], "dtype": "float32"}]
    assert {p["name"]: p["shape"] for p in gelu["params"]} == {"linear0.weight": [32, 16], "linear0.bias": [32]}
    assert gelu["occurrences"][1]["nodes"] and gelu["occurrences"][1]["modules"][0] == "blocks.1.fc1"
    for r in data["regions"]:
        assert r["time_ms"] > 0 and r["share"] == pytest.approx(r["count"] * r["time_ms"] / data["forward_ms"])
    assert read_manifest(out).regions_share == pytest.approx(sum(r["share"] for r in data["regions"]))


def test_task_files_load_and_reproduce_every_occurrence(mlp_tasks):
    model, inputs, out, manifest = mlp_tasks
    assert [t.task_id for t in load_suite(path=out, profile="auto")] == [r.task_id for r in manifest.regions]
    gm = capture(model, inputs).graph_module
    described = observe(gm, inputs)
    found = split(gm, described)
    regions = {r.nodes: r for r in found}
    obs = with_values(gm, inputs, {n for r in found for n in (*r.inputs, *r.outputs)}, described)
    for entry in manifest.regions:
        task = load_task(out / entry.file)
        drawn = make_inputs(build_module(task), InputSpec(seed=1))
        assert [{"shape": list(x.shape), "dtype": str(x.dtype)[6:]} for x in drawn] == list(entry.inputs)
        for occ in entry.occurrences:
            region = regions[occ.nodes]
            task_model = load_task_model(out / entry.file, {t: param_tensor(gm, m) for t, m in occ.param_map})
            with torch.no_grad():
                got = task_model(*[obs.values[n] for n in region.inputs])
            got = got if isinstance(got, tuple) else (got,)
            for g, name in zip(got, region.outputs):
                torch.testing.assert_close(g, obs.values[name])


def test_task_parameters_are_not_constant(mlp_tasks):
    """A fresh LayerNorm's weight is all ones; the task draws it with a spread, so a kernel
    that ignores it cannot pass the judge."""
    _, _, out, manifest = mlp_tasks
    norm = next(r for r in manifest.regions if r.label == "layer_norm")
    torch.manual_seed(0)
    task_model = load_task_model(out / norm.file)
    assert float(task_model.norm0.weight.detach().std()) > 0.01


def test_integer_index_inputs_stay_in_range(tmp_path):
    model, inputs = small_models.build_embed()
    manifest = extract(model, inputs, tmp_path)
    entry = next(r for r in manifest.regions if r.label.startswith("embedding"))
    assert entry.inputs[0] == {"shape": [4, 6], "dtype": "int64"}
    module = build_module(load_task(tmp_path / entry.file))
    for seed in range(5):
        ids = make_inputs(module, InputSpec(seed=seed))[0]
        assert ids.dtype == torch.int64 and int(ids.min()) >= 0 and int(ids.max()) <= 49


def test_convolution_norm_and_attention_regions(tmp_path):
    model, inputs = small_models.build_conv_attention()
    manifest = extract(model, inputs, tmp_path)
    labels = [r.label for r in manifest.regions]
    # batch norm in eval mode is a per-channel affine map: it joins the convolution before it
    assert labels == ["conv2d_batch_norm_relu", "scaled_dot_product_attention_softmax"]
    assert "nn.Conv2d(3, 8, (3, 3)" in (tmp_path / manifest.regions[0].file).read_text()


def test_export_failure_falls_back_to_fx_and_says_why(tmp_path):
    model, inputs = small_models.build_host_step()
    manifest = extract(model, inputs, tmp_path)
    assert manifest.capture_method == "fx"
    assert "numpy" in manifest.export_error.lower() or "data" in manifest.export_error.lower()
    assert [r.label for r in manifest.regions] == ["linear_tanh"]
    assert json.loads((tmp_path / "manifest.json").read_text())["capture"]["export_error"]


def test_cli_writes_tasks_and_names_a_bad_spec(tmp_path, capsys):
    spec = f"{HERE / 'small_models.py'}:build_mlp"
    assert extract_main([spec, "--out", str(tmp_path)]) == 0
    assert "3 task(s)" in capsys.readouterr().out and (tmp_path / "manifest.json").is_file()
    assert extract_main(["no_such_module_here:build", "--out", str(tmp_path)]) == 2
    assert "no module named 'no_such_module_here'" in capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_here:build", "no module named 'no_such_module_here'"),
    ("small_models:no_such_function", "has no attribute 'no_such_function'"),
    ("small_models:NOT_CALLABLE", "is a int, not a callable"),
    ("small_models", "not of the form module.path:function"),
    ("small_models:build_broken", "does not run on its example inputs ((4, 7) float32)"),
])
def test_bad_specs_raise_one_error_naming_the_input(spec, message, tmp_path):
    from foundry.extract.spec import load_spec
    with pytest.raises(UserModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model, inputs = load_spec(spec)
        extract(model, inputs, tmp_path, spec=spec)


def test_extracting_again_replaces_the_previous_tasks(tmp_path):
    """A second extraction into the same folder leaves no task file of the first behind
    (the main job takes every task file in the folder as a task)."""
    model, inputs = small_models.build_conv_attention()
    first = extract(model, inputs, tmp_path)
    stale = tmp_path / "99_stale.py"
    (tmp_path / first.regions[0].file).rename(stale)  # a file the first manifest lists under another name
    data = json.loads((tmp_path / "manifest.json").read_text())
    data["regions"][0]["file"] = stale.name
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    second = extract(model, inputs, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.py")) == sorted(r.file for r in second.regions)


def test_a_folder_with_other_python_files_is_refused(tmp_path):
    model, inputs = small_models.build_conv_attention()
    first = extract(model, inputs, tmp_path / "tasks")
    (tmp_path / "tasks" / "mine.py").write_text("x = 1\n")
    with pytest.raises(UserModelError, match="mine.py"):
        extract(model, inputs, tmp_path / "tasks")
    assert (tmp_path / "tasks" / "mine.py").read_text() == "x = 1\n"
    assert read_manifest(tmp_path / "tasks") == first  # nothing removed before the refusal
    assert all((tmp_path / "tasks" / r.file).is_file() for r in first.regions)


def test_regions_below_min_share_get_no_task(tmp_path, monkeypatch):
    import foundry.extract.api as api
    # measured times made fixed: the forward 1 ms, the conv region 0.6 ms, the attention region 0.002 ms
    monkeypatch.setattr(api, "interleaved_median_ms", lambda fns, device, **_: [1.0, 0.6, 0.002][:len(fns)])
    model, inputs = small_models.build_conv_attention()
    kept = extract(model, inputs, tmp_path / "all")
    assert len(kept.regions) == 2 and not kept.skipped
    some = extract(model, inputs, tmp_path / "some", min_share=0.01)
    assert [r.label for r in some.regions] == [kept.regions[0].label]
    assert sorted(p.name for p in (tmp_path / "some").glob("*.py")) == [some.regions[0].file]
    assert [s["label"] for s in some.skipped] == [kept.regions[1].label]
    assert "0.20% of the forward time, below min_share=0.01" in some.skipped[0]["reason"]
    with pytest.raises(UserModelError, match="min_share"):
        extract(model, inputs, tmp_path / "bad", min_share=1.5)


@pytest.mark.parametrize("method", ["export", "fx"])
def test_batch_norm_tasks_compute_the_inference_form_in_either_mode(tmp_path, method):
    """A task's Model is built in training mode unless someone calls .eval(); its batch norm
    must still use the running statistics, as the region in the model does."""
    model, inputs = small_models.build_conv_attention()
    manifest = extract(model, inputs, tmp_path, method=method)
    entry = manifest.regions[0]
    assert entry.label == "conv2d_batch_norm_relu"
    text = (tmp_path / entry.file).read_text()
    assert "F.batch_norm(" in text and "training=False" in text
    task = build_module(load_task(tmp_path / entry.file)).Model()  # training mode
    assert task.training
    with torch.no_grad():
        for t, m in entry.occurrences[0].param_map:
            param_tensor(task, t).copy_(param_tensor(model, m))
        want = torch.relu(model.bn(model.conv(inputs[0])))
        torch.testing.assert_close(task(inputs[0]), want)


def test_a_bfloat16_models_tasks_have_its_parameter_dtypes(tmp_path):
    model, inputs = small_models.build_mlp_bf16()
    manifest = extract(model, inputs, tmp_path)
    assert {r.label for r in manifest.regions} >= {"layer_norm", "linear_gelu"}
    for entry in manifest.regions:
        task = load_task_model(tmp_path / entry.file)
        for name, t in list(task.named_parameters()) + list(task.named_buffers()):
            if t.is_floating_point():
                assert t.dtype == torch.bfloat16, (entry.task_id, name)
        assert all(p["dtype"] == "bfloat16" for p in entry.params)


def test_a_spec_whose_file_or_function_fails_is_named_with_the_reason(tmp_path):
    from foundry.extract.spec import load_spec
    broken = tmp_path / "broken_model.py"
    broken.write_text("def build(:\n")
    with pytest.raises(UserModelError, match=r"running .*broken_model.py failed: SyntaxError"):
        load_spec(f"{broken}:build")
    raising = tmp_path / "raising_model.py"
    raising.write_text("def build():\n    raise RuntimeError('no weights here')\n")
    with pytest.raises(UserModelError, match=r"build\(\) raised RuntimeError: no weights here"):
        load_spec(f"{raising}:build")


def test_observing_keeps_no_tensor_until_asked_and_then_only_those(mlp_tasks):
    """The first run keeps every tensor's description but no tensor (extraction would
    otherwise hold every intermediate of the forward at once); the second keeps the named."""
    model, inputs, _, _ = mlp_tasks
    gm = capture(model, inputs).graph_module
    described = observe(gm, inputs)
    assert described.infos and not any(isinstance(v, torch.Tensor) for v in described.values.values())
    some = sorted(described.infos)[:2]
    kept = with_values(gm, inputs, some, described)
    assert sorted(k for k, v in kept.values.items() if isinstance(v, torch.Tensor)) == some
    assert kept.infos == described.infos
    for name in some:  # the kept tensors are the described ones
        assert list(kept.values[name].shape) == list(described.infos[name].shape)


def test_tensor_statistics_over_slabs_match_the_whole_tensors(monkeypatch):
    """The statistics are taken slab by slab (a multi-GB activation gets no full-size
    copies); merged, they are the whole tensor's, non-finite values left out."""
    import foundry.extract.values as values
    monkeypatch.setattr(values, "STATS_CHUNK", 7)
    t = torch.randn(13, 5, 3) * 3 + 1
    t[2, 1, 0], t[11, 4, 2] = float("inf"), float("nan")
    finite = t[torch.isfinite(t)].double()
    info = values.TensorInfo.of(t.transpose(0, 2))  # non-contiguous: each slab copied on its own
    assert info.mean == pytest.approx(float(finite.mean())) and info.std == pytest.approx(float(finite.std()))
    assert (info.lo, info.hi) == (float(finite.min()), float(finite.max()))
    assert values.TensorInfo.of(torch.tensor(2.5)).mean == 2.5
    assert values.TensorInfo.of(torch.full((4,), float("nan"))).std == 0.0


def test_the_summary_warns_when_the_regions_add_up_to_far_more_than_the_forward(mlp_tasks):
    from dataclasses import replace

    from foundry.extract.__main__ import summary
    _, _, out, manifest = mlp_tasks
    assert "warning" not in summary(manifest, str(out))
    skewed = replace(manifest, regions=tuple(replace(r, share=r.share * 20) for r in manifest.regions))
    assert "warning: the regions' timed calls add up to" in summary(skewed, str(out))
