"""What ``--version`` prints on the three command lines (light: the Arena wheel ships it)."""

from __future__ import annotations

from agilerl import __version__


def version_line(prog: str) -> str:
    """What ``PROG --version`` prints (``agilerl``, ``arena``, ``arena-server``)."""
    return f"{prog} (agilerl) {__version__}" if prog != "agilerl" else f"agilerl {__version__}"
