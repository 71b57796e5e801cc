"""The Ray driver process that :mod:`agilerl.cli.ray_guard` starts and watches
(``python -m agilerl.cli.ray_driver PARENT_PID``): it runs the ``train`` command handed
over in its folder, then writes the command's exit status there.

It is killed if its parent dies (``PR_SET_PDEATHSIG``), so killing the parent's process
group still stops the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import sys
from pathlib import Path

from agilerl.cli.ray_guard import ARGS_FILE, INSIDE_ENV, STATUS_FILE
from agilerl.cli.train import run_reported

_PR_SET_PDEATHSIG = 1


def run_driver(parent: int) -> int:
    """Run the command handed over, then write its exit status."""
    with contextlib.suppress(OSError, AttributeError):  # Linux only; elsewhere best effort
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above
        return 1
    folder = Path(os.environ[INSIDE_ENV])
    args = pickle.loads((folder / ARGS_FILE).read_bytes())  # noqa: S301 - our own file
    status = run_reported(args)
    (folder / STATUS_FILE).write_text(str(status))
    return status


if __name__ == "__main__":
    sys.exit(run_driver(int(sys.argv[1])))
