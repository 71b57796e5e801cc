"""The checkpoint folder format: index written last, unfinished folders refused."""

from __future__ import annotations

import json

import pytest
import torch

from agilerl.checkpoint import CheckpointError, find_checkpoint, read_checkpoint, write_checkpoint
from agilerl.checkpoint.folder import list_checkpoints, prune_checkpoints


def _write(path, step=10, members=2, buffer=None):
    return write_checkpoint(
        path,
        members=[{"w": torch.full((3,), float(i))} for i in range(members)],
        trainer_state={"generation": 1},
        summary={"global_step": step},
        replay_buffer=buffer,
        manifest={"algorithm": {"name": "DQN"}},
    )


def test_round_trip(tmp_path):
    folder = _write(tmp_path / "ck", buffer={"obs": torch.zeros(4)})
    ck = read_checkpoint(folder)
    assert ck.pop_size == 2
    assert torch.equal(ck.member_state(1)["w"], torch.ones(3))
    assert ck.trainer_state() == {"generation": 1}
    assert torch.equal(ck.replay_buffer()["obs"], torch.zeros(4))
    assert ck.manifest() == {"algorithm": {"name": "DQN"}}
    assert not list(folder.glob(".*tmp*")), "no temporary files left behind"


def test_folder_without_index_is_not_a_checkpoint(tmp_path):
    folder = _write(tmp_path / "ck")
    (folder / "index.json").unlink()
    with pytest.raises(CheckpointError, match="no index.json"):
        read_checkpoint(folder)
    with pytest.raises(CheckpointError, match="no index.json"):
        find_checkpoint(folder)


def test_missing_path_and_corruption(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        find_checkpoint(tmp_path / "nope")
    folder = _write(tmp_path / "ck")
    data = bytearray((folder / "member_0.pt").read_bytes())
    data[-5] ^= 0xFF
    (folder / "member_0.pt").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="SHA-256"):
        read_checkpoint(folder).member_state(0)
    (folder / "member_1.pt").write_bytes(b"short")
    with pytest.raises(CheckpointError, match="member_1.pt"):
        read_checkpoint(folder)


def test_index_from_other_tool_rejected(tmp_path):
    folder = tmp_path / "ck"
    folder.mkdir()
    (folder / "index.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(CheckpointError, match="not an agilerl index"):
        read_checkpoint(folder)


def test_find_latest_and_prune(tmp_path):
    _write(tmp_path / "a", step=10)
    newest = _write(tmp_path / "b", step=30)
    _write(tmp_path / "c", step=20)
    (tmp_path / "d").mkdir()  # unfinished: ignored
    assert find_checkpoint(tmp_path).path == newest
    prune_checkpoints(tmp_path, keep=newest)
    assert [c.path for c in list_checkpoints(tmp_path)] == [newest]
