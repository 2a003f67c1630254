"""`foundry.extract` over KernelBench level-3 files, one model per process, resumable: per
model, extract its tasks, then load every task the way the judge loads one, and record
the outcome as one JSON line.

    python benchmarks/kernelbench_extract.py [FILES ...] --out runs/kb_extract [--published]
        [--device cpu|cuda] [--jobs N]

FILES default to every file of `<kernelbench>/level3`. Per model, under OUT/<file stem>/:
the task files and manifest.json (`python -m foundry.extract FILE --out OUT/<stem>
--device DEVICE --set ...`), `extract.log`, and `check.json`. `--device cuda` extracts on
the GPU and runs the check's references there; `--jobs N` runs N models at once (their
processes share the device). A model whose manifest.json and
check.json are there is not run again (delete its folder to redo it). OUT/results.jsonl
gets one line per model (model, ok or failed, seconds, task count, region labels, or the
error's last line); a table of all of them is printed at the end.

The check of a written task (its own process, `--check-one DIR`) does what the judge does
before and during a task's first job: the folder is read by the main job's task loader
(`foundry.tasks.suite.load_suite`), each task is sized on the meta device
(`foundry.evaluate.task_size.meta_size`), and its reference is built and run once by the
judge's own `ReferenceRunner` on seeded inputs (`get_inputs()` at the task's sizes); its
outputs must have the shapes and dtypes manifest.json gives and be finite.

Sizes. At their published sizes many of these models take minutes per forward on a small
CPU (and 1_MLP, 2_ShallowWideMLP and 33_VanillaRNN hold 2.7-8.6 GB of fp32 weights), so by
default each runs shrunk with the `--set` values of SETTINGS below: batch 1-2, smaller
images where the architecture allows it (a model whose classifier or final pooling needs
224 x 224, or that fixes 224 in get_inputs(), keeps it), short sequences, and for those
three models narrower layers. `--published` runs the files as published instead."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEVEL3 = ROOT.parent / "shared" / "kernelbench" / "level3"
RESULTS = "results.jsonl"
CHECK = "check.json"

# Per model (file stem): the module constants set with --set. The architecture is kept:
# layer counts, channel counts, kernel sizes, strides and heads are the file's own.
SETTINGS: dict[str, list[str]] = {
    # 2.7 GB / 8.6 GB of fp32 weights at 16384-32768 wide: layers 16x narrower
    "1_MLP": ["batch_size=2", "input_size=1024", "layer_sizes=[1024, 1024]", "output_size=512"],
    "2_ShallowWideMLP": ["batch_size=2", "input_size=1024", "hidden_layer_sizes=[2048, 2048]",
                         "output_size=1024"],
    "3_DeepNarrowMLP": ["batch_size=2"],
    "4_LeNet5": ["batch_size=2"],
    "5_AlexNet": ["batch_size=1"],  # 224 x 224 fixed in get_inputs(), and the classifier needs it
    "6_GoogleNetInceptionModule": ["batch_size=1", "height=32", "width=32"],
    "7_GoogleNetInceptionV1": ["batch_size=1", "height=64", "width=64"],  # /32, then adaptive pooling
    "8_ResNetBasicBlock": ["batch_size=1"],  # 224 x 224 fixed in get_inputs()
    "9_ResNet18": ["batch_size=1", "input_shape=(1, 3, 64, 64)"],  # input_shape is computed from batch_size
    "10_ResNet101": ["batch_size=1", "height=64", "width=64"],
    "11_VGG16": ["batch_size=1"],  # the classifier takes 512 x 7 x 7: 224 x 224
    "12_VGG19": ["batch_size=1"],
    "13_DenseNet121TransitionLayer": ["batch_size=2", "height=32", "width=32"],
    "14_DenseNet121DenseBlock": ["batch_size=1", "height=32", "width=32"],
    "15_DenseNet121": ["batch_size=1", "height=64", "width=64"],  # /32, then adaptive pooling
    "16_DenseNet201": ["batch_size=1", "height=64", "width=64"],
    "17_SqueezeNetFireModule": ["batch_size=2", "height=32", "width=32"],
    "18_SqueezeNet": ["batch_size=1", "height=64", "width=64"],
    "19_MobileNetV1": ["batch_size=1"],  # AvgPool2d(7) before the classifier: 224 x 224
    "20_MobileNetV2": ["batch_size=1"],  # 224 x 224 fixed in get_inputs()
    "21_EfficientNetMBConv": ["batch_size=1"],  # 224 x 224 fixed in get_inputs()
    "22_EfficientNetB0": ["batch_size=1"],  # 224 x 224 fixed in get_inputs()
    "23_EfficientNetB1": ["batch_size=1", "input_shape=(3, 64, 64)"],  # adaptive pooling at the end
    "24_EfficientNetB2": ["batch_size=1"],  # 224 x 224 fixed in get_inputs()
    "25_ShuffleNetUnit": ["batch_size=1", "height=32", "width=32"],
    "26_ShuffleNet": ["batch_size=1", "height=64", "width=64"],
    "27_RegNet": ["batch_size=1", "image_height=64", "image_width=64"],
    "28_VisionTransformer": ["image_size=64"],  # batch 2 fixed in get_inputs(); 16 patches of 16 x 16
    "29_SwinMLP": ["batch_size=1"],  # Model() builds for 224 x 224 (windows of 7 at every stage)
    "30_SwinTransformerV2": ["batch_size=1"],
    "31_VisionAttention": ["batch_size=1", "image_height=16", "image_width=16"],
    "32_ConvolutionalVisionTransformer": ["batch_size=1"],  # 32 x 32 already
    # i2h is Linear(32768, 16384): 2 GB of weights; 16x narrower
    "33_VanillaRNN": ["batch_size=2", "input_size=1024", "hidden_size=1024", "output_size=512"],
    "34_VanillaRNNHidden": ["batch_size=2", "sequence_length=16"],
    "35_LSTM": ["batch_size=2", "sequence_length=16"],
    "36_LSTMHn": ["batch_size=2", "sequence_length=16"],
    "37_LSTMCn": ["batch_size=2", "sequence_length=16"],
    "38_LSTMBidirectional": ["batch_size=2", "sequence_length=16"],
    "39_GRU": ["batch_size=2", "seq_len=16"],
    "40_GRUHidden": ["batch_size=2", "seq_len=16"],
    "41_GRUBidirectional": ["batch_size=2", "seq_len=16"],
    "42_GRUBidirectionalHidden": ["batch_size=2", "seq_len=16"],
    "43_MinGPTCausalAttention": ["batch_size=1", "seq_len=64"],
    "44_MiniGPTBlock": ["batch_size=1", "seq_len=64"],
    "45_UNetSoftmax": ["batch_size=1", "height=32", "width=64"],  # four 2 x 2 poolings: multiples of 16
    "46_NetVladWithGhostClusters": ["batch_size=2"],
    "47_NetVladNoGhostClusters": ["batch_size=2"],
    "48_Mamba2ReturnY": ["batch_size=2"],  # seq_length 128: two blocks of block_len 64
    "49_Mamba2ReturnFinalState": ["batch_size=2"],
    "50_ReLUSelfAttention": ["batch_size=1", "max_seqlen=64"],
}


def _number(path: Path) -> tuple:
    m = re.match(r"(\d+)_", path.name)
    return (int(m.group(1)) if m else math.inf, path.name)


def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", env["OMP_NUM_THREADS"])
    return env


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


# ---------------------------------------------------------------- the judge's load of a task folder
def check_folder(folder: Path, device: str = "cpu") -> dict:
    """In this process: load the extracted tasks of `folder` as the judge does (module
    docstring), their references run on `device`; {"ok": bool, "tasks": [...], "error": str}."""
    import torch

    from foundry.evaluate.device import get_device
    from foundry.evaluate.reference import ReferenceRunner
    from foundry.evaluate.task_size import meta_size
    from foundry.tasks.inputs import InputSpec
    from foundry.tasks.suite import load_suite

    manifest = json.loads((folder / "manifest.json").read_text())
    tasks = {Path(t.path).name: t for t in load_suite(path=folder, profile="full")}
    want = {r["file"]: r for r in manifest["regions"]}
    if set(tasks) != set(want):
        return {"ok": False, "tasks": [], "error": f"the task loader found {sorted(tasks)}, manifest.json lists "
                                                   f"{sorted(want)}"}
    runner = ReferenceRunner(get_device(device))
    seen = []
    for name, region in want.items():
        task = tasks[name]
        t0 = time.monotonic()
        try:
            sized = meta_size(task) is not None
            model = runner.model(task, {}, 1234)
            out = runner.outputs(model, task, {}, InputSpec(5678))
        except Exception as e:  # noqa: BLE001 - what the judge would meet: say which task and why
            return {"ok": False, "tasks": seen, "error": f"{name}: {type(e).__name__}: {str(e)[:300]}"}
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        got = [{"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")}
               if isinstance(o, torch.Tensor) else type(o).__name__ for o in outs]
        if got != list(region["outputs"]):
            return {"ok": False, "tasks": seen, "error": f"{name}: outputs {got}, manifest.json says "
                                                        f"{region['outputs']}"}
        finite = all(bool(torch.isfinite(o).all()) for o in outs if o.is_floating_point())
        if not finite:
            return {"ok": False, "tasks": seen, "error": f"{name}: its reference output is not finite"}
        seen.append({"file": name, "meta_sized": sized, "reference_s": round(time.monotonic() - t0, 3)})
    return {"ok": True, "tasks": seen, "error": ""}


# ---------------------------------------------------------------- one model
def run_model(file: Path, out: Path, *, published: bool, timeout_s: float, device: str = "cpu") -> dict:
    stem = file.stem
    folder = out / stem
    folder.mkdir(parents=True, exist_ok=True)
    sets = [] if published else SETTINGS.get(stem, [])
    cmd = [sys.executable, "-m", "foundry.extract", str(file), "--out", str(folder), "--device", device,
           *[x for s in sets for x in ("--set", s)]]
    record = {"model": stem, "device": device, "settings": sets, "status": "failed", "extract_s": None, "check_s": None,
              "tasks": 0, "labels": [], "skipped": 0, "capture": None, "error": ""}
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        t0 = time.monotonic()
        try:
            with (folder / "extract.log").open("w") as log:
                p = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, env=_env())
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = None
        record["extract_s"] = round(time.monotonic() - t0, 1)
        if rc is None:
            record["error"] = f"timed out after {timeout_s:.0f} s"
            return record
        if rc != 0 or not manifest.is_file():
            record["error"] = f"exit {rc}: " + _last_line((folder / "extract.log").read_text())
            return record
    m = json.loads(manifest.read_text())
    record.update(tasks=len(m["regions"]), labels=[r["label"] for r in m["regions"]], skipped=len(m["skipped"]),
                  capture=m["capture"]["method"] + ("" if m["capture"]["dynamic"] else " (static)"),
                  skipped_reasons=sorted({s["reason"] for s in m["skipped"] if "below min_share" not in s["reason"]}))
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, __file__, "--check-one", str(folder), "--device", device], cwd=ROOT, capture_output=True,
                           text=True, timeout=timeout_s, env=_env())
        check = json.loads((folder / CHECK).read_text()) if p.returncode == 0 and (folder / CHECK).is_file() \
            else {"ok": False, "error": f"the check exited {p.returncode}: {_last_line(p.stderr + p.stdout)}"}
    except subprocess.TimeoutExpired:
        check = {"ok": False, "error": f"the check timed out after {timeout_s:.0f} s"}
    record["check_s"] = round(time.monotonic() - t0, 1)
    record["status"] = "ok" if check["ok"] else "failed"
    record["error"] = "" if check["ok"] else "judge load: " + check["error"]
    return record


def table(records: list[dict]) -> str:
    lines = ["| model | result | extract s | tasks | regions / error |", "| --- | --- | ---: | ---: | --- |"]
    for r in records:
        what = ", ".join(dict.fromkeys(r["labels"])) if r["status"] == "ok" else r["error"]
        secs = "" if r["extract_s"] is None else f"{r['extract_s']:.0f}"
        lines.append(f"| {r['model']} | {r['status']} | {secs} | {r['tasks']} | {what.replace('|', '/')} |")
    ok = sum(r["status"] == "ok" for r in records)
    lines.append(f"\n{ok} of {len(records)} ok")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help=f"KernelBench task files (default: every file of {LEVEL3})")
    ap.add_argument("--out", default="runs/kb_extract")
    ap.add_argument("--published", action="store_true", help="the files' own sizes, no --set")
    ap.add_argument("--timeout-s", type=float, default=900, help="per model, for extraction and for the check")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="where models are extracted and the check's references run")
    ap.add_argument("--jobs", type=int, default=1, help="models extracted at once")
    ap.add_argument("--check-one", metavar="DIR", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.check_one:
        folder = Path(a.check_one)
        (folder / CHECK).write_text(json.dumps(check_folder(folder, a.device), indent=1) + "\n")
        return 0
    files = sorted((Path(f) for f in a.files), key=_number) if a.files else sorted(LEVEL3.glob("*.py"), key=_number)
    if not files:
        raise SystemExit(f"no task files given and none in {LEVEL3}")
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    done = {}
    if (out / RESULTS).is_file():
        for line in (out / RESULTS).read_text().splitlines():
            r = json.loads(line)
            done[r["model"]] = r
    if a.jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {a.jobs}")
    records = {}
    todo = []
    for file in files:
        stem = file.stem
        prev = done.get(stem)
        if prev and (out / stem / "manifest.json").is_file() and (out / stem / CHECK).is_file():
            records[stem] = prev
        else:
            todo.append(file)
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        running = {pool.submit(run_model, file.resolve(), out, published=a.published, timeout_s=a.timeout_s,
                               device=a.device): file.stem for file in todo}
        for future in concurrent.futures.as_completed(running):
            r = future.result()
            stem = running[future]
            records[stem] = r
            with (out / RESULTS).open("a") as f:  # written here, one thread: a crash loses no finished model
                f.write(json.dumps(r) + "\n")
            print(f"{stem}: {r['status']} ({r['extract_s']} s extract, {r['check_s']} s check), {r['tasks']} task(s)"
                  + (f": {r['error']}" if r["error"] else ""), flush=True)
    records = [records[file.stem] for file in files]
    print(table(records))
    return 0 if all(r["status"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
