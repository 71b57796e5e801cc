"""The job's log cites the user's manifest file, not the server's copy of it.

A job reads ``<experiment>/manifest.json``, a JSON copy the server writes; the trainer's
messages ("Validating ...", a manifest error's ``file:line:col``, the resume command)
name that path. The user submitted another file (usually YAML), so each log line names
that file instead: the server's folder stays private, and a line/column of the JSON copy,
which would point at the wrong line of the user's file, is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

#: what the log says when the client sent no file name (a manifest given as a dict).
UNNAMED = "the submitted manifest"


def manifest_citer(copy: Path, user_file: str | None) -> Callable[[str], str]:
    """A function that rewrites one log line to cite ``user_file`` instead of ``copy``."""
    pattern = re.compile(re.escape(str(copy)) + r"(?::\d+(?::\d+)?)?")
    label = user_file or UNNAMED

    def cite(line: str) -> str:
        return pattern.sub(lambda _: label, line) if str(copy) in line else line

    return cite
