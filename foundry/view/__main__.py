"""`python -m foundry.view RUN_DIR`: a live page of a run, served on localhost; with
`--html`, the same page written once as a self-contained file instead."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from foundry.store.evallog import EVAL_DIR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m foundry.view", description=__doc__)
    parser.add_argument("run_dir", type=Path, help="a run directory (it has evaluations/, or will once the run "
                                                    "records its first evaluation)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 exposes the page "
                             "to the network)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one, printed)")
    parser.add_argument("--poll", type=float, default=3.0, help="seconds between the page's refreshes (default 3)")
    parser.add_argument("--html", nargs="?", const="", default=None, metavar="OUT",
                        help="write the page once as a self-contained file (default RUN_DIR/report.html) and exit")
    args = parser.parse_args(argv)
    run_dir = args.run_dir
    if not run_dir.is_dir() or not ((run_dir / EVAL_DIR).is_dir() or (run_dir / "config.yaml").is_file()):
        print(f"error: {run_dir} is not a run directory (no evaluations/ or config.yaml in it)", file=sys.stderr)
        return 2
    if args.html is not None:
        from foundry.view.report_html import write_report_html
        print(write_report_html(run_dir, args.html or None))
        return 0
    if args.poll <= 0:
        print("error: --poll must be a positive number of seconds", file=sys.stderr)
        return 2
    from foundry.view.model import RunReader
    from foundry.view.server import ViewServer
    reader = RunReader(run_dir)
    reader.snapshot()  # read the run once before the first page asks
    try:
        server = ViewServer(reader, host=args.host, port=args.port, poll_s=args.poll)
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"KernelFoundry view of {reader.path}: {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
