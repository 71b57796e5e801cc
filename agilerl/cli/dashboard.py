"""``agilerl dashboard [RUNS_DIR ...]``: serve a read-only web UI over local run folders."""

from __future__ import annotations

import argparse
import sys

NAME = "dashboard"
HELP = ("serve a read-only web page over run folders (runs list, learning curves, "
        "hyperparameters, lineage, checkpoints), updated live while runs train")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from agilerl.dashboard.server import DEFAULT_HOST, DEFAULT_PORT

    parser.add_argument(
        "runs_dirs", nargs="*", metavar="RUNS_DIR",
        help="folders holding run folders, or run folders themselves (default: "
             "$AGILERL_RUNS_DIR or runs/)")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to listen on (default {DEFAULT_HOST}: this machine "
                             "only; the dashboard has no login)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--verbose", action="store_true", help="log every request")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agilerl.dashboard.server import DashboardServer, is_loopback
    from agilerl.run_folder import runs_root

    folders = [Path(d) for d in args.runs_dirs] or [runs_root()]
    for folder in folders:
        if not folder.is_dir():
            told = "RUNS_DIR" if args.runs_dirs else "the default runs folder"
            print(f"agilerl dashboard: {told} {folder} is not a folder", file=sys.stderr)
            return 1
    if not 0 <= args.port <= 65535:
        print(f"agilerl dashboard: --port {args.port}: a port is 0 to 65535", file=sys.stderr)
        return 2
    try:
        server = DashboardServer(folders, host=args.host, port=args.port, verbose=args.verbose)
    except OSError as exc:
        print(f"agilerl dashboard: cannot listen on {args.host}:{args.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    if not is_loopback(args.host):
        print(f"warning: --host {args.host}: anyone who can reach this address can read "
              "these runs (the dashboard has no login)", file=sys.stderr)
    shown = ", ".join(str(folder) for folder in folders)
    print(f"agilerl dashboard: {shown} at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
