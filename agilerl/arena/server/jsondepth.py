"""Refuse JSON nested deeper than :data:`MAX_JSON_DEPTH` before it is parsed.

Python's ``json`` recurses once per level, so a body of a few KB (``[[[[...]]]]``) raises
``RecursionError`` in the parser; checking the nesting first turns that into a plain
400 ``INVALID_JSON``. The check is one regular-expression pass (strings are skipped whole,
so brackets inside them do not count).
"""

from __future__ import annotations

import re
from itertools import accumulate, repeat

from agilerl.arena.server.errors import ApiError

#: deepest nesting of objects and arrays accepted in a request body or a submitted manifest.
MAX_JSON_DEPTH = 64
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: every byte but a bracket is deleted; then an opening bracket is 2, a closing one 0.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def json_depth(data: bytes | str) -> int:
    """The deepest nesting of ``[``/``{`` in ``data``, outside strings (valid JSON or not)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    brackets = _STRING.sub(b"", raw).translate(_STEPS, _NOT_BRACKETS)
    # running sum of +1 per opening and -1 per closing bracket (the map runs in C)
    return max(accumulate(map(int.__sub__, brackets, repeat(1))), default=0)


def too_deep(where: str) -> ApiError:
    return ApiError(400, "INVALID_JSON",
                    f"{where} is nested deeper than {MAX_JSON_DEPTH} levels", limit=MAX_JSON_DEPTH)


def check_json_depth(data: bytes | str, where: str = "Request body") -> None:
    """Raise 400 ``INVALID_JSON`` when ``data`` nests deeper than :data:`MAX_JSON_DEPTH`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return  # cannot nest deeper than it has brackets: the common, cheap case
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise too_deep(where)
