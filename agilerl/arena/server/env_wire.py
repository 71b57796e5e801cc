"""The data-only format between an environment host and the checker that drives it.

An uploaded environment runs in :mod:`.env_host`, a sandboxed process that only answers
requests; :mod:`.env_checker` runs no upload code, sends requests and judges the answers.
Nothing that crosses the pipe can carry code: a frame is a JSON document plus numpy arrays
in the ``.npy`` format, read back with ``allow_pickle=False``.

Frame: 4-byte big-endian length of the JSON document, the document (UTF-8), then the
arrays it lists under ``"blobs"`` (their byte lengths), back to back. Values are JSON where
JSON can say them; everything else is a tagged object ``{"$": TAG, ...}``:

* ``dict`` / ``list`` / ``tuple``: ``{"$": "dict", "items": [[key, value], ...]}``, ...;
* numpy arrays and numpy scalars: ``{"$": "nd" | "sc", "blob": INDEX}``;
* Gymnasium spaces: ``{"$": "space", "kind": "Box", ...}`` (Box, Discrete, MultiDiscrete,
  MultiBinary, Dict, Tuple), rebuilt by the checker; other spaces are ``unsupported``;
* anything else: ``{"$": "opaque", "type": NAME, "repr": TEXT}``, which the checker sees
  as an :class:`Opaque` (never as the object itself).

The reader refuses frames over :data:`MAX_FRAME_BYTES` (documents over
:data:`MAX_DOC_BYTES`) before reading them, documents nested deeper than
:data:`MAX_DEPTH` and arrays of object dtype; a refused frame is a :class:`WireError`.
"""

from __future__ import annotations

import io
import json
import math
import os
import select
import struct
import threading
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import numpy as np

    from agilerl.core.value_types import JsonObject, JsonValue, Space

#: largest frame either side accepts (an observation, an info dict, a space's bounds).
MAX_FRAME_BYTES = 64 << 20
#: largest JSON document of a frame: arrays travel beside it, so it only holds structure
#: (and bounds what parsing it may cost the checker's memory: ~8 bytes per item).
MAX_DOC_BYTES = 4 << 20
#: deepest nesting of values (and of their JSON) either side writes or reads.
MAX_DEPTH = 24
MAX_BLOBS = 1 << 16
_REPR_CHARS = 200
_POLL_S = 0.25


class WireError(Exception):
    """A frame that breaks the format (too big, too deep, not JSON, unknown tag)."""


class HostGone(Exception):
    """The host closed its end of the pipe (it exited or was killed)."""


class Stopped(Exception):
    """The reader was told to stop (the wall-clock limit passed, or the client left)."""


class Opaque:
    """A value the host could not send as data: only its type name and ``repr`` arrive."""

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name, self.text = type_name, text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Opaque) and type(other) is type(self)
                and (other.type_name, other.text) == (self.type_name, self.text))

    def __hash__(self) -> int:
        return hash((self.type_name, self.text))


class UnsupportedSpace(Opaque):
    """A Gymnasium space the checker cannot rebuild (Text, Sequence, Graph, a custom one)."""


def type_name(value: object) -> str:
    """The type name of ``value`` as the host saw it."""
    return value.type_name if isinstance(value, Opaque) else type(value).__name__


# ---- encoding (either side) ------------------------------------------------------------


def _npy(array: np.ndarray) -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _opaque(value: object) -> JsonObject:
    try:
        text = repr(value)[:_REPR_CHARS]
    except Exception:  # noqa: BLE001 - a repr of upload code may raise anything
        text = f"<{type(value).__name__}>"
    return {"$": "opaque", "type": type(value).__name__[:_REPR_CHARS], "repr": text}


class Encoder:
    """Turns one value into a JSON tree; its arrays collect in :attr:`blobs`."""

    def __init__(self) -> None:
        self.blobs: list[bytes] = []

    def _blob(self, tag: str, array: np.ndarray) -> JsonObject:
        self.blobs.append(_npy(array))
        return {"$": tag, "blob": len(self.blobs) - 1}

    def encode(self, value: object, depth: int = 0) -> JsonValue:
        if value is None or (isinstance(value, bool | int | float | str)
                             and type(value) in (bool, int, float, str)):
            return value
        import numpy as np

        try:  # before int and float: numpy's float64 is a float, and must stay numpy's
            if isinstance(value, np.ndarray) and value.dtype != object:
                return self._blob("nd", value)
            if isinstance(value, np.generic) and not isinstance(value, np.object_):
                return self._blob("sc", np.asarray(value))
        except ValueError:  # a dtype npy cannot write without pickle
            return _opaque(value)
        if isinstance(value, bool | int | float | str):  # subclasses, as their base
            return next(t(value) for t in (bool, int, float, str) if isinstance(value, t))
        if depth >= MAX_DEPTH:
            return {"$": "opaque", "type": type(value).__name__, "repr": "<nested too deep>"}
        if isinstance(value, dict):
            return {"$": "dict", "items": [[self.encode(k, depth + 1), self.encode(v, depth + 1)]
                                          for k, v in value.items()]}
        if isinstance(value, list | tuple):
            return {"$": "tuple" if isinstance(value, tuple) else "list",
                    "items": [self.encode(v, depth + 1) for v in value]}
        space = self._space(value, depth)
        return _opaque(value) if space is None else space

    def _space(self, value: object, depth: int) -> JsonObject | None:
        """A Gymnasium space's description, or None when ``value`` is not a space."""
        import sys

        spaces = sys.modules.get("gymnasium.spaces")  # imported if the env uses spaces at all
        if spaces is None or not isinstance(value, spaces.Space):
            return None
        # a subclass is described (and checked) as the Gymnasium space it derives from
        fields: JsonObject
        if isinstance(value, spaces.Box):
            kind, fields = "Box", {"low": self.encode(value.low), "high": self.encode(value.high)}
        elif isinstance(value, spaces.Discrete):
            kind, fields = "Discrete", {"n": int(value.n), "start": int(value.start)}
        elif isinstance(value, spaces.MultiDiscrete):
            kind, fields = "MultiDiscrete", {"nvec": self.encode(value.nvec),
                                             "start": self.encode(value.start)}
        elif isinstance(value, spaces.MultiBinary):
            kind, fields = "MultiBinary", {"n": self.encode(value.n)}
        elif isinstance(value, spaces.Dict | spaces.Tuple):
            kind = "Dict" if isinstance(value, spaces.Dict) else "Tuple"
            items = value.spaces.items() if kind == "Dict" else enumerate(value.spaces)
            fields = {"items": [[self.encode(k), self.encode(s, depth + 1)] for k, s in items]}
        else:
            return {"$": "space", "kind": "unsupported", "type": type(value).__name__}
        dtype = getattr(value, "dtype", None)
        return {"$": "space", "kind": kind, "dtype": None if dtype is None else str(dtype),
                **fields}


# ---- decoding (the checker's side) -----------------------------------------------------


def _load_npy(blob: bytes) -> np.ndarray:
    import numpy as np
    from numpy.lib import format as npy

    try:
        stream = io.BytesIO(blob)
        version = npy.read_magic(stream)
        read_header = npy.read_array_header_1_0 if version == (1, 0) else \
            npy.read_array_header_2_0
        shape, _, dtype = read_header(stream)
        # numpy allocates the declared size before reading: it must be what was sent
        if dtype.hasobject or math.prod(shape) * dtype.itemsize > len(blob) - stream.tell():
            raise ValueError(f"it declares {shape} of {dtype}, more than its bytes")
        return np.load(io.BytesIO(blob), allow_pickle=False)
    except (ValueError, TypeError, OSError, EOFError) as exc:
        raise WireError(f"an array is not a valid .npy without objects: {exc}") from None


class Decoder:
    """Rebuilds values from a JSON tree and the frame's arrays; spaces become real
    ``gymnasium.spaces`` objects built by the checker, never by the host."""

    def __init__(self, blobs: list[bytes]) -> None:
        self.blobs = blobs

    def decode(self, tree: object, depth: int = 0) -> object:
        if tree is None or isinstance(tree, bool | int | float | str):
            return tree
        if depth >= MAX_DEPTH or not isinstance(tree, dict):
            raise WireError("a value is nested too deep or is not tagged")
        tag = tree.get("$")
        if tag in ("dict", "list", "tuple"):
            items = self._items(tree)
            if tag == "dict":
                pairs = [self._pair(p, depth) for p in items]
                try:
                    return dict(pairs)
                except TypeError:
                    raise WireError("a dict key is not hashable") from None
            values = [self.decode(v, depth + 1) for v in items]
            return tuple(values) if tag == "tuple" else values
        if tag in ("nd", "sc"):
            array = _load_npy(self._blob(tree))
            return array[()] if tag == "sc" else array
        if tag == "opaque":
            return Opaque(str(tree.get("type"))[:_REPR_CHARS], str(tree.get("repr"))[:_REPR_CHARS])
        if tag == "space":
            return self._space(tree, depth)
        raise WireError(f"unknown tag {str(tag)[:40]!r}")

    def _items(self, tree: Mapping[str, object]) -> list[object]:
        items = tree.get("items")
        if not isinstance(items, list):
            raise WireError("a container has no item list")
        return items

    def _pair(self, pair: object, depth: int) -> tuple[object, object]:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise WireError("a dict item is not a [key, value] pair")
        return self.decode(pair[0], depth + 1), self.decode(pair[1], depth + 1)

    def _blob(self, tree: Mapping[str, object]) -> bytes:
        index = tree.get("blob")
        if not (isinstance(index, int) and 0 <= index < len(self.blobs)):
            raise WireError("an array refers to no blob of the frame")
        return self.blobs[index]

    def _space(self, tree: Mapping[str, object], depth: int) -> Space | UnsupportedSpace:
        from gymnasium import spaces

        kind = str(tree.get("kind"))
        if kind == "unsupported":
            name = str(tree.get("type"))[:_REPR_CHARS]
            return UnsupportedSpace(name, f"a {name} space, which this server cannot check")
        try:
            if kind in ("Dict", "Tuple"):
                items = [self._pair(p, depth) for p in self._items(tree)]
                if kind == "Dict":
                    # gymnasium refuses members that are not spaces (caught below)
                    return spaces.Dict(cast("dict[str, Space]", dict(items)))
                return spaces.Tuple(cast("list[Space]", [s for _, s in items]))
            return _simple_space(kind, {k: self.decode(v, depth + 1) for k, v in tree.items()
                                        if k not in ("$", "kind")})
        except WireError:
            raise
        except Exception as exc:  # noqa: BLE001 - gymnasium refuses bad bounds in many ways
            text = f"a {kind} space that cannot be rebuilt: {exc}"
            return UnsupportedSpace(kind[:_REPR_CHARS], text[:_REPR_CHARS])


def _dtype(name: object) -> np.dtype:
    import numpy as np

    dtype = np.dtype(str(name))
    if dtype.kind not in "biuf":
        raise ValueError(f"dtype {dtype} is not numeric")
    return dtype


def _simple_space(kind: str, f: Mapping[str, Any]) -> Space:
    """The space ``kind`` from its decoded fields, which are whatever the host sent (so
    untyped): gymnasium's constructors refuse what they cannot use, and the caller turns
    every exception into an :class:`UnsupportedSpace`."""
    from gymnasium import spaces

    if kind == "Box":
        low, high = f["low"], f["high"]
        return spaces.Box(low=low, high=high, shape=low.shape, dtype=_dtype(f["dtype"]))
    if kind == "Discrete":
        return spaces.Discrete(int(f["n"]), start=int(f["start"]))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(f["nvec"], dtype=_dtype(f["dtype"]), start=f["start"])
    if kind == "MultiBinary":
        n = f["n"]
        return spaces.MultiBinary(n.tolist() if hasattr(n, "tolist") else n)
    raise ValueError(f"unknown space kind {kind!r}")


# ---- frames ----------------------------------------------------------------------------


def _check_length(length: int) -> None:
    if length > MAX_DOC_BYTES:
        raise WireError(f"the frame's JSON of {length} bytes is over the limit of"
                        f" {MAX_DOC_BYTES}")


def pack(message: Mapping[str, object], blobs: list[bytes] | None = None) -> bytes:
    """One frame: ``message`` (JSON-able) and its arrays."""
    blobs = blobs or []
    doc = json.dumps({**message, "blobs": [len(b) for b in blobs]},
                     allow_nan=True, separators=(",", ":")).encode()
    size = 4 + len(doc) + sum(map(len, blobs))
    _check_length(len(doc))
    if size > MAX_FRAME_BYTES or len(blobs) > MAX_BLOBS:
        raise WireError(f"a frame of {size} bytes is over the limit of {MAX_FRAME_BYTES}")
    return b"".join([struct.pack(">I", len(doc)), doc, *blobs])


def unpack_header(doc: bytes) -> tuple[dict[str, object], list[int]]:
    """The JSON document of a frame and the byte lengths of its arrays."""
    from agilerl.arena.server.jsondepth import json_depth

    if json_depth(doc) > 2 * MAX_DEPTH + 4:  # each value level is two JSON levels
        raise WireError("the frame's JSON is nested too deep")
    try:
        message = json.loads(doc)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"the frame is not JSON: {str(exc)[:100]}") from None
    sizes = message.get("blobs") if isinstance(message, dict) else None
    if not (isinstance(sizes, list) and len(sizes) <= MAX_BLOBS
            and all(isinstance(s, int) and s >= 0 for s in sizes)):
        raise WireError("the frame's document is not an object with a list of array sizes")
    if len(doc) + sum(sizes) > MAX_FRAME_BYTES:
        raise WireError(f"the frame is over the limit of {MAX_FRAME_BYTES} bytes")
    return message, sizes


def read_frame(stream: IO[bytes]) -> tuple[dict[str, object], list[bytes]] | None:
    """The next frame from a blocking binary ``stream``; None at its end (the host's side)."""

    def exactly(n: int) -> bytes:
        data = stream.read(n)
        if len(data) != n:
            raise HostGone
        return bytes(data)

    try:
        (length,) = struct.unpack(">I", exactly(4))
    except HostGone:
        return None
    _check_length(length)
    message, sizes = unpack_header(exactly(length))
    return message, [exactly(size) for size in sizes]


class PipeReader:
    """Reads frames from a pipe without blocking past ``stop`` (checked every 0.25 s) or
    past the end of the process writing them (``alive``, when given)."""

    def __init__(self, fd: int, stop: threading.Event,
                 alive: Callable[[], bool] | None = None) -> None:
        self.fd, self.stop, self.alive = fd, stop, alive

    def _ready(self, timeout: float) -> bool:
        return bool(select.select([self.fd], [], [], timeout)[0])

    def _exactly(self, n: int) -> bytes:
        parts, left = [], n
        while left:
            if self.stop.is_set():
                raise Stopped
            if not self._ready(_POLL_S):
                # a writer that died, or left a child holding its end of the pipe open
                if self.alive is not None and not self.alive() and not self._ready(0):
                    raise HostGone
                continue
            chunk = os.read(self.fd, min(left, 1 << 20))
            if not chunk:
                raise HostGone
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def read(self) -> tuple[dict[str, object], list[bytes]]:
        (length,) = struct.unpack(">I", self._exactly(4))
        _check_length(length)
        message, sizes = unpack_header(self._exactly(length))
        return message, [self._exactly(size) for size in sizes]


def write_all(fd: int, data: bytes, stop: threading.Event) -> None:
    """Write ``data`` to a non-blocking pipe, giving up when ``stop`` is set."""
    view = memoryview(data)
    while view:
        if stop.is_set():
            raise Stopped
        _, ready, _ = select.select([], [fd], [], _POLL_S)
        if not ready:
            continue
        try:
            view = view[os.write(fd, view):]
        except BrokenPipeError:
            raise HostGone from None
