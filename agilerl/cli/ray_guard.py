"""``agilerl train --backend ray`` runs its Ray driver in a child process and reports when
Ray ends that driver without a word.

Ray ends a driver at once (exit 1, nothing on stderr, no Python cleanup) when the raylet of
the driver's own node goes: killed, out of memory, or taken down with that node's dashboard
agent. No code in the driver runs after that, so the run is watched from outside: this
process starts the driver (:mod:`agilerl.cli.ray_driver`: the same ``train`` command, its
parsed options handed over in a file), forwards SIGINT and SIGTERM to it, and passes its
exit status on. A driver that ends without having written its status was ended that way:
this process then names the cause and the checkpoint to resume from, and exits 4 (the
environment/worker failure status).

The child has its own process group (a terminal's Ctrl-C reaches it once, through this
process), so killing this process's group still stops the run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from agilerl.cli.failure_context import resume_command
from agilerl.cli.train_exit import EXIT_ENV_FAILED, report_error

#: Set in the child: it runs the command itself (in the folder this variable names).
INSIDE_ENV = "AGILERL_RAY_DRIVER_DIR"
#: In that folder: the parsed options (pickled) and the exit status the child writes.
ARGS_FILE = "args.pickle"
STATUS_FILE = "status"


def wanted(args: argparse.Namespace) -> bool:
    """Whether this ``train`` command should run its Ray driver in a child process."""
    return getattr(args, "backend", None) == "ray" and not os.environ.get(INSIDE_ENV)


def run_guarded(args: argparse.Namespace) -> int:
    """Run the command in a child process; its exit status, or 4 after reporting a driver
    that Ray ended without a word."""
    with tempfile.TemporaryDirectory(prefix="agilerl-driver-") as folder:
        (Path(folder) / ARGS_FILE).write_bytes(pickle.dumps(args))
        proc = subprocess.Popen(
            [sys.executable, "-m", "agilerl.cli.ray_driver", str(os.getpid())],
            env={**os.environ, INSIDE_ENV: folder}, process_group=0)
        code = _wait_forwarding(proc)
        status = Path(folder) / STATUS_FILE
        if status.is_file() and status.read_text().strip().lstrip("-").isdigit():
            return int(status.read_text())
    return _report_abrupt_end(args, code)


def _wait_forwarding(proc: subprocess.Popen[bytes]) -> int:
    """Wait for ``proc``, passing SIGINT and SIGTERM on to it."""
    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            with contextlib.suppress(InterruptedError):
                return proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _report_abrupt_end(args: argparse.Namespace, code: int) -> int:
    from agilerl.checkpoint.folder import list_checkpoints  # torch: only when needed

    cause = (f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}")
    root = (Path(args.checkpoint_path) if args.checkpoint_path else
            Path(args.run_dir) / "checkpoints" if args.run_dir else None)
    found = list_checkpoints(root) if root is not None and root.is_dir() else []
    if found:
        saved = (f"the last checkpoint, {found[-1].path}, is intact; resume with: "
                 f"{resume_command(args, None, found[-1].path)}")
    else:
        saved = ("the checkpoints written so far (in the run folder's checkpoints/) are "
                 "intact; resume from the last one with --resume-from-checkpoint")
    report_error(f"training stopped: the Ray driver ended without a report ({cause}): Ray "
                 "ends a driver whose own node fails (that node's raylet or object store "
                 f"died, or its dashboard agent, which the raylet goes down with)\n  {saved}")
    return EXIT_ENV_FAILED
