"""``python -m agilerl.train MANIFEST [PATH=VALUE ...] [options]``: train locally.

The same command as ``agilerl train``; see :mod:`agilerl.cli.train` for options and exit
status. As in the reference library, :func:`parse_args` reads the command line
(``sys.argv`` unless given a list) and :func:`main` runs it; unlike the reference,
:func:`main` reports problems as messages and returns the exit status instead of raising.
"""

from __future__ import annotations

import sys

from agilerl.cli.train import main, parse_args

__all__ = ["main", "parse_args"]

if __name__ == "__main__":
    sys.exit(main())
