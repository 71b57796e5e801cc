"""What is wrong with a path the user gave where a file is expected (a manifest, a dataset).

One answer for every reader, so the CLI, the manifest loader and the dataset readers say the
same thing about the same path: a missing path, a folder and a device or pipe are different
mistakes with different fixes.
"""

from __future__ import annotations

import os
import stat


def file_problem(path: str | os.PathLike[str]) -> str | None:
    """``"does not exist"``, ``"is a folder, expected a file"`` or ``"is not a regular file
    (a device, pipe or socket)"`` for ``path``; None when it is a regular file (links are
    followed)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except NotADirectoryError:
        return "does not exist (a part of the path is a file, not a folder)"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "is a folder, expected a file"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a device, pipe or socket), expected a file"
    return None
