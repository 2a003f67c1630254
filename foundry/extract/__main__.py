"""`python -m foundry.extract SPEC --out DIR`: write the tasks of the model SPEC returns.

SPEC is `module.path:function` (or `path/to/file.py:function`); the function returns
`(model, example_inputs)`. Or SPEC is a KernelBench task file `path/to/task.py` (`Model`,
`get_inputs`, `get_init_inputs`): the model is `Model(*get_init_inputs())` at the file's
sizes (`--sizes small`: its SMALL_SIZES; `--set batch_size=2`: one constant), on `--device`.

Exit 0 when the tasks were written, 2 for a bad SPEC or a model
that cannot be captured (the message names it)."""

from __future__ import annotations

import argparse
import sys

from foundry.extract.api import MIN_SHARE, extract
from foundry.extract.errors import UserModelError
from foundry.extract.manifest import Manifest
from foundry.extract.spec import load_spec, size_overrides

# regions timed apart add up to about the forward (fused ops, allocation differ a little);
# far past it, the timings were skewed: seven extractions sharing an H100 gave GoogleNet 12.6
SKEWED_SHARE = 1.5


def summary(manifest: Manifest, out: str) -> str:
    lines = [f"{manifest.model_class}: captured with torch.{manifest.capture_method}"
             + (f" (torch.export failed: {manifest.export_error})" if manifest.capture_method == "fx" else "")
             + f"; forward {manifest.forward_ms:.4g} ms on {manifest.device}",
             f"{len(manifest.regions)} task(s) in {out} covering {manifest.regions_share:.0%} of the measured time:",
             f"  {'task':<32} {'calls':>5} {'ms/call':>9} {'share':>6}  where"]
    for r in sorted(manifest.regions, key=lambda r: -r.share):
        where = ", ".join(o.modules[0] if o.modules and o.modules[0] else "(model)" for o in r.occurrences[:3])
        more = ", ..." if len(r.occurrences) > 3 else ""
        lines.append(f"  {r.task_id:<32} {r.count:>5} {r.time_ms:>9.4g} {r.share:>6.1%}  {where}{more}")
    for s in manifest.skipped:
        lines.append(f"  skipped {s['label']} ({s['count']} call(s)): {s['reason']}")
    if manifest.regions_share > SKEWED_SHARE:
        lines.append(f"warning: the regions' timed calls add up to {manifest.regions_share:.3g} times the forward's: "
                     f"other work on {manifest.device} slowed each short call (another process on the same GPU?). "
                     "The shares order the search: extract again with the device to itself.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m foundry.extract", description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", help="module.path:function returning (model, example_inputs), or a KernelBench "
                                 "task file path/to/task.py")
    ap.add_argument("--out", required=True, help="folder to write the task files and manifest.json into")
    ap.add_argument("--method", choices=("export", "fx"), default=None,
                    help="force the capture (default: torch.export, then torch.fx)")
    ap.add_argument("--min-share", type=float, default=MIN_SHARE,
                    help=f"skip regions below this share of the forward time (default {MIN_SHARE})")
    ap.add_argument("--device", default=None,
                    help="run the model there (cpu, cuda, cuda:1; default: a task file on cpu, a function's "
                         "model where it put it)")
    ap.add_argument("--sizes", choices=("full", "small"), default="full",
                    help="a task file's sizes: its own (full) or its SMALL_SIZES (small)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a task file's module constant set to a Python literal (batch_size=2); repeatable")
    args = ap.parse_args(argv)
    try:
        model, inputs = load_spec(args.spec, device=args.device, sizes=args.sizes,
                                  overrides=size_overrides(args.set))
        manifest = extract(model, inputs, args.out, spec=args.spec, method=args.method,
                           min_share=args.min_share)
    except UserModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(summary(manifest, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
