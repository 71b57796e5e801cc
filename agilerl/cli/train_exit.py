"""How ``agilerl train`` ends: its exit statuses (what each means is listed in
:mod:`agilerl.cli.train`) and its one-line problem report on stderr.

Shared by the command and by :mod:`agilerl.cli.ray_guard`, which reports in the command's
name a Ray driver that ended without a word.
"""

from __future__ import annotations

import sys

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_ENV_FAILED = 4
EXIT_NO_RESOURCES = 5
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


def report_error(message: str) -> None:
    """Print ``agilerl train: <message>`` on stderr."""
    print(f"agilerl train: {message}", file=sys.stderr)
