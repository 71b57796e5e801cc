"""``arena experiments download`` says which member of the downloaded population is the
elite (read from the archive's ``index.json``, without torch) and how to evaluate it."""

from __future__ import annotations

import argparse
import io
import json
import tarfile
from pathlib import Path

import pytest

from agilerl.arena import commands
from agilerl.arena.download import archive_summary


def _archive(path: Path, index: object, folder: str = "gen00003-step0000015000") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in ((f"{folder}/index.json", json.dumps(index).encode()),
                           (f"{folder}/member_0.pt", b"weights")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_the_archive_names_its_elite(tmp_path) -> None:
    path = _archive(tmp_path / "a.tar.gz", {"pop_size": 4, "summary": {"elite_member": 2}})
    info = archive_summary(path)
    assert info == {"checkpoint": "gen00003-step0000015000", "pop_size": 4, "elite_member": 2}
    message = commands.download_message(path, info)
    assert "the elite is member 2" in message and "(4 members)" in message
    assert f"agilerl evaluate {path}" in message


def test_no_elite_yet_and_foreign_files_are_said_plainly(tmp_path) -> None:
    early = archive_summary(_archive(tmp_path / "e.tar.gz", {"pop_size": 2, "summary": {}}))
    assert early is not None and early["elite_member"] is None
    assert "no elite was chosen yet" in commands.download_message("e.tar.gz", early)
    (tmp_path / "x.ckpt").write_bytes(b"not a tar")
    assert archive_summary(tmp_path / "x.ckpt") is None
    assert commands.download_message("x.ckpt", {}) == "Checkpoint saved to x.ckpt"


@pytest.mark.parametrize("json_out", [False, True])
def test_exp_download_reports_the_elite(tmp_path, monkeypatch, capsys, json_out) -> None:
    path = _archive(tmp_path / "run.tar.gz", {"pop_size": 3, "summary": {"elite_member": 1}})

    class Client:
        def __enter__(self) -> Client:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def download_checkpoint(self, name: str, checkpoint: object, output: object) -> Path:
            return path

    monkeypatch.setattr(commands, "_client", lambda args: Client())
    args = argparse.Namespace(experiment_name="run", checkpoint=None, output=None,
                              json_out=json_out)
    assert commands.exp_download(args) == 0
    out = capsys.readouterr().out
    if json_out:
        data = json.loads(out)["data"]
        assert data["elite_member"] == 1 and data["path"] == str(path)
    else:
        assert "the elite is member 1" in out
