"""manifest.json of an extracted tasks folder: which model the tasks came from (class,
parameter fingerprint, SPEC), the device and measured forward time, the model's inputs,
and per task its region: where each occurrence sits in the model, its share of the
measured time, its call count, and its input / parameter signature."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch.nn as nn

from foundry.extract.errors import UserModelError
from foundry.extract.values import TensorInfo

MANIFEST_FILE = "manifest.json"
FORMAT = 1


def fingerprint(model: nn.Module) -> str:
    """A hash of the model's parameter and buffer names, shapes and dtypes (not values)."""
    items = [f"{n}:{tuple(t.shape)}:{t.dtype}" for n, t in
             sorted(list(model.named_parameters()) + list(model.named_buffers()))]
    return hashlib.sha256("\n".join(items).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Occurrence:
    nodes: tuple  # node names in the captured graph
    modules: tuple  # module paths the nodes sit in ("" for the model itself)
    param_map: tuple  # ((task parameter path, model parameter path), ...)


@dataclass(frozen=True)
class RegionEntry:
    task_id: str
    file: str
    key: str  # structure key (foundry.extract.split)
    label: str
    count: int
    time_ms: float  # one call of the region, measured on the captured inputs
    share: float  # count * time_ms / the model's measured forward time
    spelling: str  # "torch" or "aten" (foundry.extract.taskgen)
    inputs: tuple  # TensorInfo signatures ({"shape", "dtype"}) of the activation inputs
    params: tuple  # ({"name", "shape", "dtype"}) of the task's parameters
    outputs: tuple  # TensorInfo signatures of the outputs
    occurrences: tuple  # Occurrence, in graph order


@dataclass(frozen=True)
class Manifest:
    model_class: str
    fingerprint: str
    spec: str | None
    device: str
    forward_ms: float
    capture_method: str
    export_error: str
    dynamic: bool
    inputs: tuple  # TensorInfo of the model's example inputs
    regions: tuple  # RegionEntry, in graph order of first occurrence
    skipped: tuple = ()  # ({"label", "nodes", "reason"}) regions no task file could be written for

    @property
    def regions_share(self) -> float:
        return sum(r.share for r in self.regions)

    def region(self, task_id: str) -> RegionEntry:
        for r in self.regions:
            if r.task_id == task_id:
                return r
        raise KeyError(task_id)

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "model": {"class": self.model_class, "fingerprint": self.fingerprint, "spec": self.spec},
            "device": self.device, "forward_ms": self.forward_ms, "regions_share": self.regions_share,
            "capture": {"method": self.capture_method, "export_error": self.export_error, "dynamic": self.dynamic},
            "inputs": [i.to_json() for i in self.inputs],
            "regions": [{
                "task_id": r.task_id, "file": r.file, "key": r.key, "label": r.label, "count": r.count,
                "time_ms": r.time_ms, "share": r.share, "spelling": r.spelling, "inputs": list(r.inputs),
                "params": list(r.params), "outputs": list(r.outputs),
                "occurrences": [{"nodes": list(o.nodes), "modules": list(o.modules),
                                 "params": {t: m for t, m in o.param_map}} for o in r.occurrences],
            } for r in self.regions],
            "skipped": list(self.skipped),
        }

    @staticmethod
    def from_json(d: dict) -> "Manifest":
        m = d["model"]
        cap = d.get("capture", {})
        regions = tuple(RegionEntry(
            task_id=r["task_id"], file=r["file"], key=r["key"], label=r["label"], count=int(r["count"]),
            time_ms=float(r["time_ms"]), share=float(r["share"]), spelling=r.get("spelling", "torch"),
            inputs=tuple(r["inputs"]), params=tuple(r["params"]), outputs=tuple(r["outputs"]),
            occurrences=tuple(Occurrence(tuple(o["nodes"]), tuple(o["modules"]), tuple(o["params"].items()))
                              for o in r["occurrences"])) for r in d["regions"])
        return Manifest(model_class=m["class"], fingerprint=m["fingerprint"], spec=m.get("spec"),
                        device=d["device"], forward_ms=float(d["forward_ms"]),
                        capture_method=cap.get("method", "export"), export_error=cap.get("export_error", ""),
                        dynamic=bool(cap.get("dynamic", True)),
                        inputs=tuple(TensorInfo.from_json(i) for i in d["inputs"]), regions=regions,
                        skipped=tuple(d.get("skipped", ())))


def write_manifest(folder: Path, manifest: Manifest) -> Path:
    path = Path(folder) / MANIFEST_FILE
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2) + "\n")
    tmp.replace(path)
    return path


def read_manifest(folder: str | Path) -> Manifest:
    path = Path(folder) / MANIFEST_FILE
    try:
        data = json.loads(path.read_text())
    except OSError:
        raise UserModelError(f"{path} not found: {folder} is not a folder written by foundry.extract") from None
    except ValueError as e:
        raise UserModelError(f"{path} is not valid JSON ({e})") from None
    if data.get("format") != FORMAT:
        raise UserModelError(f"{path}: manifest format {data.get('format')!r}, expected {FORMAT}")
    return Manifest.from_json(data)
