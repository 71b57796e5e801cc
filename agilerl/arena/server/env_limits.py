"""Start a command under resource limits and, where the kernel allows, Landlock.

    python -m agilerl.arena.server.env_limits [--cpu-seconds N] [--memory-bytes N]
        [--file-bytes N] [--wall-seconds N] [--landlock --hide D --read D --write D ...]
        -- COMMAND [ARG ...]

Used for everything the server runs from an uploaded environment (pip installs,
validation, profiling). The limits are set in this short-lived launcher, just before it
``exec``s the command, rather than in a ``preexec_fn`` of the threaded server, and they
carry over to the command and whatever it starts:

* ``RLIMIT_CPU``: past the limit the kernel sends SIGXCPU (then SIGKILL a second later);
* ``RLIMIT_AS``: allocations past the limit fail (Python raises ``MemoryError``);
* ``RLIMIT_FSIZE``: no file written may grow past the limit;
* ``RLIMIT_CORE`` 0: no core dumps;
* ``alarm(N)``: SIGALRM ends the command after N seconds of wall-clock time (the timer
  survives ``exec``), a backstop to the server's own wall-clock limit that holds even if
  the server is gone.
"""

from __future__ import annotations

import argparse
import resource
import signal
import sys
from pathlib import Path

from agilerl.arena.server.sandbox import confine_and_exec


def _limit(kind: int, value: int | None, hard_extra: int = 0) -> None:
    if value is None:
        return
    _, hard = resource.getrlimit(kind)
    soft = value if hard == resource.RLIM_INFINITY else min(value, hard)
    top = soft + hard_extra
    resource.setrlimit(kind, (soft, top if hard == resource.RLIM_INFINITY else min(top, hard)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agilerl.arena.server.env_limits")
    parser.add_argument("--cpu-seconds", type=int)
    parser.add_argument("--memory-bytes", type=int)
    parser.add_argument("--file-bytes", type=int)
    parser.add_argument("--wall-seconds", type=int)
    parser.add_argument("--landlock", action="store_true")
    parser.add_argument("--hide", type=Path, action="append", default=[])
    parser.add_argument("--read", type=Path, action="append", default=[])
    parser.add_argument("--write", type=Path, action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    _limit(resource.RLIMIT_CPU, args.cpu_seconds, hard_extra=1)
    _limit(resource.RLIMIT_AS, args.memory_bytes)
    _limit(resource.RLIMIT_FSIZE, args.file_bytes)
    _limit(resource.RLIMIT_CORE, 0)
    if args.wall_seconds:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(args.wall_seconds)
    return confine_and_exec("arena sandbox", args.hide, args.write, args.read, command,
                            landlock=args.landlock)


if __name__ == "__main__":
    sys.exit(main())
