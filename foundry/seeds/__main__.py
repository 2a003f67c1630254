"""`python -m foundry.seeds TASK_FILE [--device cpu|cuda] [--out FILE] [--threads N]
[--profile small|full] [--output-code FILE --configs FILE]`: write the compiler seed of one task.

With --output-code and --configs (device cuda) the Triton seed is made from Inductor output
code and the configs its autotuner picked, saved on a GPU; without them the task is
compiled here.

The seed goes to --out (or stdout); a line on stderr says what was captured. Exit 0 when
a seed was written, 1 when the task gets none (the reason on stderr), 2 for bad usage or
an unreadable task file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m foundry.seeds", description="Write a task's compiler seed (Inductor's "
                                                              "kernels and wrapper as a candidate file).")
    p.add_argument("task_file")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--out", default=None, help="where to write the candidate (default: stdout)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads Inductor generates for (the judge's)")
    p.add_argument("--profile", choices=("small", "full"), default=None,
                   help="task size profile (default: small on cpu, full on cuda)")
    p.add_argument("--output-code", default=None,
                   help="cuda: Inductor output code saved on a GPU (made at the profile's sizes), instead of "
                        "compiling here")
    p.add_argument("--configs", default=None,
                   help="with --output-code: JSON {kernel name: chosen config (kwargs, num_warps, num_stages)}")
    args = p.parse_args(argv)
    if bool(args.output_code) != bool(args.configs):
        p.error("--output-code and --configs go together")
    if args.output_code and args.device != "cuda":
        p.error("--output-code is for --device cuda (a Triton seed)")
    if args.threads < 1:
        p.error(f"--threads must be at least 1, got {args.threads}")
    from foundry.tasks.loader import TaskError, load_task
    try:
        task = load_task(args.task_file, profile=args.profile or ("small" if args.device == "cpu" else "full"))
    except TaskError as e:
        p.error(str(e).replace("\n", " "))
    if args.output_code:
        import json
        from foundry.seeds.triton_seed import seed_from_output_code
        try:
            code = Path(args.output_code).read_text()
            configs = json.loads(Path(args.configs).read_text())
        except (OSError, ValueError) as e:
            p.error(f"cannot read --output-code/--configs: {e}")
        small = load_task(args.task_file, profile="small").size_overrides
        seed = seed_from_output_code(task, code, configs, sizes=None, mapping_sizes=small or None,
                                     origin=f"from the output code in {Path(args.output_code).name}")
    else:
        from foundry.seeds import inductor_seed
        seed = inductor_seed(task, device=args.device, threads=args.threads)
    if not seed.ok:
        sys.stderr.write(f"{task.task_id}: {seed.note}\n")
        return 1
    if args.out:
        Path(args.out).write_text(seed.source)
    else:
        sys.stdout.write(seed.source)
    sys.stderr.write(f"{task.task_id}: {seed.backend} seed, {seed.kernels} kernel(s), "
                     f"{seed.specializations} size set(s){' -> ' + args.out if args.out else ''}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
