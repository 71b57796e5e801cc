"""``agilerl plot RUN_DIR [-o OUT]``: PNG charts of a run folder (learning curves,
hyperparameters of each member over generations, lineage), drawn from its ``metrics.csv``
and ``events.jsonl`` without a browser. Needs matplotlib (the ``plot`` extra)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "plot"
HELP = ("draw PNG charts of a run folder: learning curves, each member's hyperparameters, "
        "the population's lineage (needs matplotlib: the plot extra)")

DEFAULT_OUT = "plots"
"""Where the charts go unless ``-o`` says: ``RUN_DIR/plots``."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR",
                        help="a run folder (holds metrics.csv, and events.jsonl for the "
                             "hyperparameter and lineage charts)")
    parser.add_argument("-o", "--out", metavar="OUT", default=None,
                        help=f"folder for the PNG files (default RUN_DIR/{DEFAULT_OUT})")


def run(args: argparse.Namespace) -> int:
    from agilerl.logging.run_history import RunFolderError, load_run
    from agilerl.logging.run_plots import MissingPlotDependency, draw_run

    try:
        history = load_run(args.run_dir)
    except RunFolderError as exc:
        print(f"agilerl plot: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else Path(args.run_dir) / DEFAULT_OUT
    if out.exists() and not out.is_dir():
        print(f"agilerl plot: -o {out} is a file, not a folder", file=sys.stderr)
        return 2
    try:
        written = draw_run(history, out)
    except MissingPlotDependency as exc:
        print(f"agilerl plot: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"agilerl plot: cannot write into {out}: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    if not history.has_events:
        print(f"note: {Path(args.run_dir) / 'events.jsonl'} not found (a run from before run "
              "events): learning curves only", file=sys.stderr)
    return 0
