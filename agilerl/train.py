"""``python -m agilerl.train MANIFEST [PATH=VALUE ...] [options]``: train locally.

The same command as ``agilerl train``; see :mod:`agilerl.cli.train` for options and exit
status.
"""

from __future__ import annotations

import sys

from agilerl.cli.train import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
