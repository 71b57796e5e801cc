"""The checkpoint folder format and its atomic writer / validating reader.

Layout of one checkpoint folder::

    member_0.pt ... member_{N-1}.pt   one file per population member (weights, optimiser,
                                      hyperparameters, architecture, counters)
    trainer.pt                        loop state: RNG states, generation and step counters,
                                      epsilon schedule, fitness history, logger step
    replay_buffer.pt                  only when the buffer is saved
    manifest.json                     the resolved manifest the run was started from
    index.json                        written LAST: format, version, the file list with sizes
                                      and SHA-256 digests, and a summary (generation, steps)

Every file is written to a temporary name, flushed and fsync'ed, then moved into place with
``os.replace``; ``index.json`` follows the same route after all other files exist. A folder
without ``index.json`` is therefore exactly "a checkpoint that was never finished".

Checkpoint files are pickles (``torch.save``): load only checkpoints you trust, as with any
torch checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

FORMAT = "agilerl-checkpoint"
VERSION = 1
INDEX_NAME = "index.json"
TRAINER_FILE = "trainer.pt"
BUFFER_FILE = "replay_buffer.pt"
MANIFEST_FILE = "manifest.json"


class CheckpointError(ValueError):
    """A path that is not a usable checkpoint (missing, unfinished, corrupted, incompatible)."""


def _member_file(index: int) -> str:
    return f"member_{index}.pt"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _atomic_write(path: Path, write: Any) -> dict[str, Any]:
    """Write through ``write(file_object)`` to a temp name, fsync, rename; return size/digest."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return {"size": path.stat().st_size, "sha256": _digest(path)}


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _torch_writer(obj: Any) -> Any:
    return lambda fh: torch.save(obj, fh)


def _json_writer(obj: Any) -> Any:
    return lambda fh: fh.write(json.dumps(obj, indent=2, sort_keys=True, default=str).encode())


def write_checkpoint(
    path: str | os.PathLike[str],
    *,
    members: Sequence[Any],
    trainer_state: dict[str, Any],
    summary: dict[str, Any],
    replay_buffer: Any | None = None,
    manifest: dict[str, Any] | None = None,
) -> Path:
    """Write one checkpoint folder atomically and return its path.

    An existing checkpoint at ``path`` is first invalidated (its index removed) and then
    rewritten; callers that must never lose the previous checkpoint write a new folder and
    delete the old one afterwards (see :func:`prune_checkpoints`).
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    index_path = folder / INDEX_NAME
    if index_path.exists():
        index_path.unlink()
        _fsync_dir(folder)
    files: dict[str, dict[str, Any]] = {}
    for i, state in enumerate(members):
        files[_member_file(i)] = _atomic_write(folder / _member_file(i), _torch_writer(state))
    files[TRAINER_FILE] = _atomic_write(folder / TRAINER_FILE, _torch_writer(trainer_state))
    if replay_buffer is not None:
        files[BUFFER_FILE] = _atomic_write(folder / BUFFER_FILE, _torch_writer(replay_buffer))
    if manifest is not None:
        files[MANIFEST_FILE] = _atomic_write(folder / MANIFEST_FILE, _json_writer(manifest))
    _fsync_dir(folder)
    index = {
        "format": FORMAT,
        "version": VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pop_size": len(members),
        "files": files,
        "summary": summary,
    }
    _atomic_write(index_path, _json_writer(index))
    _fsync_dir(folder)
    return folder


@dataclass
class Checkpoint:
    """A validated checkpoint folder; file contents are loaded on demand."""

    path: Path
    index: dict[str, Any]

    @property
    def pop_size(self) -> int:
        return int(self.index["pop_size"])

    @property
    def summary(self) -> dict[str, Any]:
        return dict(self.index.get("summary", {}))

    @property
    def has_replay_buffer(self) -> bool:
        return BUFFER_FILE in self.index["files"]

    def _load(self, name: str) -> Any:
        self._verify(name)
        if _digest(self.path / name) != self.index["files"][name]["sha256"]:
            raise CheckpointError(
                f"checkpoint {self.path}: {name!r} does not match its SHA-256 in {INDEX_NAME} "
                "(the file is corrupted or was modified)"
            )
        return torch.load(self.path / name, map_location="cpu", weights_only=False)

    def _verify(self, name: str) -> None:
        meta = self.index["files"].get(name)
        file = self.path / name
        if meta is None or not file.is_file():
            raise CheckpointError(f"checkpoint {self.path}: file {name!r} is missing")
        if file.stat().st_size != meta["size"]:
            raise CheckpointError(
                f"checkpoint {self.path}: {name!r} has {file.stat().st_size} bytes, "
                f"index.json says {meta['size']} (the file was modified or truncated)"
            )

    def member_state(self, i: int) -> Any:
        """The saved state of member ``i``."""
        return self._load(_member_file(i))

    def member_states(self) -> list[Any]:
        return [self.member_state(i) for i in range(self.pop_size)]

    def trainer_state(self) -> dict[str, Any]:
        return dict(self._load(TRAINER_FILE))

    def replay_buffer(self) -> Any | None:
        return self._load(BUFFER_FILE) if self.has_replay_buffer else None

    def manifest(self) -> dict[str, Any] | None:
        if MANIFEST_FILE not in self.index["files"]:
            return None
        self._verify(MANIFEST_FILE)
        return dict(json.loads((self.path / MANIFEST_FILE).read_text()))


def read_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Open and validate the checkpoint folder ``path`` (not a parent of checkpoints)."""
    folder = Path(path)
    if not folder.exists():
        raise CheckpointError(f"checkpoint {folder} does not exist")
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint {folder} is not a folder")
    index_path = folder / INDEX_NAME
    if not index_path.is_file():
        raise CheckpointError(
            f"{folder} is not a checkpoint: it has no {INDEX_NAME} (a checkpoint whose "
            "writing was interrupted has none; resume from an earlier checkpoint)"
        )
    try:
        index = json.loads(index_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"checkpoint {folder}: unreadable {INDEX_NAME}: {exc}") from exc
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {folder}: {INDEX_NAME} is not an agilerl index")
    if int(index.get("version", 0)) > VERSION:
        raise CheckpointError(
            f"checkpoint {folder} has format version {index['version']}; this agilerl "
            f"reads up to version {VERSION}"
        )
    checkpoint = Checkpoint(folder, index)
    for name in index.get("files", {}):
        checkpoint._verify(name)
    return checkpoint


def list_checkpoints(root: str | os.PathLike[str]) -> list[Checkpoint]:
    """Complete checkpoints directly under ``root``, oldest first (by global step)."""
    found = []
    for child in sorted(Path(root).iterdir()) if Path(root).is_dir() else []:
        if child.is_dir() and (child / INDEX_NAME).is_file():
            try:
                found.append(read_checkpoint(child))
            except CheckpointError:
                continue
    return sorted(found, key=lambda c: (c.summary.get("global_step", 0), c.path.name))


def find_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Resolve ``path`` to a checkpoint: the folder itself, or the latest one inside it."""
    folder = Path(path)
    if (folder / INDEX_NAME).exists() or not folder.is_dir():
        return read_checkpoint(folder)
    found = list_checkpoints(folder)
    if not found:
        raise CheckpointError(
            f"{folder} is not a checkpoint: it has no {INDEX_NAME} and holds no complete "
            "checkpoint folder (a checkpoint whose writing was interrupted has no index)"
        )
    return found[-1]


def prune_checkpoints(root: str | os.PathLike[str], keep: Path) -> None:
    """Delete every checkpoint folder under ``root`` except ``keep`` (overwrite mode)."""
    for checkpoint in list_checkpoints(root):
        if checkpoint.path.resolve() != keep.resolve():
            # Remove the index first so a crash mid-delete leaves a non-checkpoint, not a
            # half-deleted checkpoint.
            (checkpoint.path / INDEX_NAME).unlink(missing_ok=True)
            shutil.rmtree(checkpoint.path, ignore_errors=True)
