"""`python -m foundry.report RUN_DIR`: rebuild a run's report.md, plots and best/ files
from its run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m foundry.report", description=__doc__)
    parser.add_argument("run_dir", type=Path, help="a run directory (has evaluations/)")
    args = parser.parse_args(argv)
    if not (args.run_dir / "evaluations").is_dir():
        print(f"error: {args.run_dir} is not a run directory (no evaluations/ in it)", file=sys.stderr)
        return 2
    from foundry.store.report import build_report
    path = build_report(args.run_dir)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
