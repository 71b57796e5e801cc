"""The data-only format between an environment host and the checker (env_wire)."""

from __future__ import annotations

import io
import json
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.arena.server.env_wire import (
    MAX_DOC_BYTES,
    MAX_FRAME_BYTES,
    Decoder,
    Encoder,
    HostGone,
    Opaque,
    PipeReader,
    Stopped,
    UnsupportedSpace,
    WireError,
    pack,
    read_frame,
)


def round_trip(value: Any) -> Any:
    encoder = Encoder()
    tree = encoder.encode(value)
    frame = pack({"value": tree}, encoder.blobs)
    got = read_frame(io.BytesIO(frame))
    assert got is not None
    message, blobs = got
    return Decoder(blobs).decode(message["value"])


def test_values_keep_their_types() -> None:
    obs = np.arange(6, dtype=np.float32).reshape(2, 3)
    value: dict[Any, Any] = {"obs": obs, "n": np.int64(3), "r": np.float64(0.5),
             "flag": np.bool_(True), "t": (1, 2.5, "x", None, False), "l": [np.float32(1)],
             3: {"nested": np.zeros((0,), dtype=np.uint8)}, "nan": float("nan")}
    back = round_trip(value)
    assert back.keys() == value.keys()
    assert back["obs"].dtype == np.float32 and np.array_equal(back["obs"], obs)
    assert type(back["n"]) is np.int64 and back["n"] == 3 and type(back["r"]) is np.float64
    assert type(back["flag"]) is np.bool_ and back["t"] == (1, 2.5, "x", None, False)
    assert type(back["l"]) is list and type(back["l"][0]) is np.float32
    assert back[3]["nested"].shape == (0,) and np.isnan(back["nan"])


def test_other_objects_arrive_as_their_name_only() -> None:
    class Weird:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    back = round_trip({"a": object(), "b": Weird(), "c": np.array([object()], dtype=object)})
    assert isinstance(back["a"], Opaque) and back["a"].type_name == "object"
    assert back["b"].type_name == "Weird" and back["c"].type_name == "ndarray"


@pytest.mark.parametrize("space", [
    spaces.Box(-1.0, 1.0, shape=(2, 3), dtype=np.float32),
    spaces.Box(low=np.array([0, -5]), high=np.array([3, 5]), dtype=np.int64),
    spaces.Discrete(4, start=-1), spaces.MultiDiscrete([3, 4]), spaces.MultiBinary(5),
    spaces.Dict({"pos": spaces.Box(0, 1, shape=(1,)), "k": spaces.Discrete(2)}),
    spaces.Tuple((spaces.Discrete(2), spaces.MultiBinary([2, 2]))),
])
def test_spaces_are_rebuilt_by_the_reader(space: spaces.Space[Any]) -> None:
    back = round_trip(space)
    assert back == space and type(back) is type(space)


def test_a_space_the_checker_cannot_rebuild_is_named() -> None:
    back = round_trip(spaces.Text(5))
    assert isinstance(back, UnsupportedSpace) and "Text" in back.text


class _Payload:
    """Unpickling this runs code: it writes a file."""

    path = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path(self.path).write_text, ("owned",))


def test_a_pickle_in_an_array_is_refused_not_run(tmp_path: Path) -> None:
    _Payload.path = str(tmp_path / "owned")
    buf = io.BytesIO()
    np.save(buf, np.array([_Payload()], dtype=object), allow_pickle=True)
    with pytest.raises(WireError, match="without objects"):
        Decoder([buf.getvalue()]).decode({"$": "nd", "blob": 0})
    assert not (tmp_path / "owned").exists()


def test_an_array_larger_than_its_bytes_is_refused_before_numpy_allocates_it() -> None:
    from numpy.lib import format as npy

    blob = io.BytesIO()
    npy.write_array_header_1_0(blob, {"descr": "<f8", "fortran_order": False,
                                      "shape": (10**12,)})
    blob.write(b"\0" * 32)
    with pytest.raises(WireError, match="more than its bytes"):
        Decoder([blob.getvalue()]).decode({"$": "nd", "blob": 0})


@pytest.mark.parametrize("tree, words", [
    ({"$": "nd", "blob": 3}, "no blob"),
    ({"$": "code", "src": "print(1)"}, "unknown tag"),
    ({"plain": "dict"}, "unknown tag"),
    ({"$": "dict", "items": [[{"$": "list", "items": []}, 1]]}, "not hashable"),
    ({"$": "list"}, "no item list"),
])
def test_malformed_values_are_refused(tree: Any, words: str) -> None:
    with pytest.raises(WireError, match=words):
        Decoder([]).decode(tree)


def _frame(doc: bytes, extra: bytes = b"") -> io.BytesIO:
    return io.BytesIO(struct.pack(">I", len(doc)) + doc + extra)


def test_malformed_frames_are_refused() -> None:
    deep = b"[" * 5000 + b"]" * 5000
    with pytest.raises(WireError, match="too deep"):
        read_frame(_frame(b'{"blobs": [], "v": ' + deep + b"}"))
    with pytest.raises(WireError, match="not JSON"):
        read_frame(_frame(b"{'single': 'quotes'}"))
    with pytest.raises(WireError, match="array sizes"):
        read_frame(_frame(json.dumps({"blobs": [-1]}).encode()))
    with pytest.raises(WireError, match="over the limit"):
        read_frame(_frame(json.dumps({"blobs": [MAX_FRAME_BYTES]}).encode()))
    with pytest.raises(WireError, match="over the limit"):
        read_frame(io.BytesIO(struct.pack(">I", MAX_DOC_BYTES + 1)))
    with pytest.raises(WireError, match="over the limit"):
        pack({"value": [1] * MAX_DOC_BYTES})
    with pytest.raises(WireError, match="over the limit"):
        pack({"value": None}, [b"x" * MAX_FRAME_BYTES])
    with pytest.raises(HostGone):  # cut short
        read_frame(_frame(json.dumps({"blobs": [10]}).encode(), b"abc"))
    assert read_frame(io.BytesIO(b"")) is None


def test_the_pipe_reader_stops_when_told_or_when_the_writer_is_gone() -> None:
    import os

    r, w = os.pipe()
    try:
        stop = threading.Event()
        stop.set()
        with pytest.raises(Stopped):
            PipeReader(r, stop).read()
        with pytest.raises(HostGone):  # the writer died, yet a child holds the pipe open
            PipeReader(r, threading.Event(), alive=lambda: False).read()
        os.write(w, pack({"value": 1}))
        message, _ = PipeReader(r, threading.Event(), alive=lambda: False).read()
        assert message["value"] == 1
    finally:
        os.close(r)
        os.close(w)


def test_a_subclassed_space_is_checked_as_the_space_it_derives_from() -> None:
    class Unit(spaces.Box):
        def __init__(self) -> None:
            super().__init__(0.0, 1.0, shape=(2,), dtype=np.float32)

    back = round_trip(Unit())
    assert type(back) is spaces.Box and back == spaces.Box(0.0, 1.0, (2,), np.float32)
