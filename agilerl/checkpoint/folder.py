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

Checkpoint files are ``torch.save`` files of plain data (tensors, numpy arrays of numbers,
numbers, strings, lists and dicts; see :mod:`agilerl.checkpoint.plain`) and are loaded with
``weights_only=True``: a crafted file is refused, it cannot run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import torch

from agilerl.checkpoint.layout import (
    BUFFER_FILE,
    FORMAT,
    INDEX_NAME,
    MANIFEST_FILE,
    RUN_CHECKPOINTS,
    TEMP_MARK,
    TRAINER_FILE,
    VERSION,
    CheckpointIndex,
    CheckpointSummary,
    FileEntry,
    index_problem,
    is_checkpoint_file,
    is_count,
    is_temp_file,
    member_file,
)
from agilerl.checkpoint.plain import from_plain, numpy_safe_globals, to_plain
from agilerl.core.errors import storage_exhausted
from agilerl.core.value_types import JsonObject, JsonValue

__all__ = [
    "BUFFER_FILE", "FORMAT", "INDEX_NAME", "MANIFEST_FILE", "RUN_CHECKPOINTS", "TRAINER_FILE",
    "VERSION", "Checkpoint", "CheckpointError", "CheckpointFallbackWarning",
    "ResumeMismatchError", "find_checkpoint", "list_checkpoints", "load_state_file",
    "prune_checkpoints", "read_checkpoint", "remove_torn_writes", "save_torch_atomically",
    "write_checkpoint",
]


class CheckpointError(ValueError):
    """A path that is not a usable checkpoint (missing, unfinished, corrupted, incompatible)."""


class ResumeMismatchError(CheckpointError):
    """A valid checkpoint that does not fit the manifest it is resumed into (another
    environment, algorithm, network or population size); the message lists what differs."""


class CheckpointFallbackWarning(UserWarning):
    """Resuming from a folder of checkpoints skipped the newest one, which was never
    finished; the warning names both checkpoints."""


_STEP_IN_NAME = re.compile(r"step(\d+)")


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


def _atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> FileEntry:
    """Write through ``write(file_object)`` to a temp name, fsync, rename; return size/digest.

    A failed write (disk full, an object that cannot be pickled) removes its temp file; a
    full disk (or quota, or file-size limit) is an ``OSError`` naming ``path``, whatever
    layer (torch's writer reports it as a ``RuntimeError``) met it.
    """
    tmp = path.with_name(f".{path.name}{TEMP_MARK}{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        full = storage_exhausted(exc)
        if full is not None:
            raise OSError(full.errno, full.strerror, str(path)) from None
        raise
    return {"size": path.stat().st_size, "sha256": _digest(path)}


def save_torch_atomically(obj: object, path: str | os.PathLike[str]) -> None:
    """``torch.save(obj)`` to ``path`` through a temp file and a rename (folders made as
    needed): a crash leaves the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, _torch_writer(obj))


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _torch_writer(obj: object) -> Callable[[IO[bytes]], None]:
    plain = to_plain(obj)  # before the file is opened: a state that cannot be saved writes none
    return lambda fh: torch.save(plain, fh)


def load_state_file(path: str | os.PathLike[str], what: str | None = None) -> Any:
    """A state written by :func:`save_torch_atomically` or :func:`write_checkpoint`.

    Whatever plain data the file holds: nothing about its shape is known until its user
    reads it, and each user turns a wrong shape into its own error.

    Only plain data is rebuilt (``weights_only=True``); a file holding anything else (a
    crafted pickle, or an older file that pickled Python objects) is refused with a
    :class:`CheckpointError` naming the file (``what``, default its path) and the callables
    it names, and none of it is run.
    """
    what = what or str(path)
    try:
        with torch.serialization.safe_globals([*numpy_safe_globals()]):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a foreign file can fail in any way; none of it ran
        names = _unsafe_globals(path)
        if names:
            raise CheckpointError(
                f"{what} is refused: it holds Python objects other than plain data (it "
                f"names {names}), and loading them could run code from the file. agilerl "
                "writes tensors, arrays, numbers and strings only; this file was not written "
                "by this version of agilerl, or was modified") from None
        raise CheckpointError(f"{what} cannot be loaded ({_load_problem(exc)})") from None
    try:
        return from_plain(state)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{what} holds a saved space or random generator agilerl "
                              f"cannot rebuild ({type(exc).__name__}: {exc})") from None


def _unsafe_globals(path: str | os.PathLike[str]) -> str:
    """The callables beyond plain data that a file names (read without running any), or ''."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # noqa: BLE001 - not a torch file at all: nothing to name
        return ""
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in numpy_safe_globals()}
    shown = sorted(set(names) - allowed)
    more = f" and {len(shown) - 4} more" if len(shown) > 4 else ""
    return ", ".join(shown[:4]) + more


def _load_problem(exc: Exception) -> str:
    """What went wrong loading a file, without torch's advice to load it unsafely."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = next((line.partition("WeightsUnpickler error:")[2].strip() for line in lines
                   if "WeightsUnpickler error:" in line), None)
    detail = reason or (lines[0] if lines else "the file is empty or truncated")
    return f"{type(exc).__name__}: {detail}"


def _json_writer(obj: object) -> Callable[[IO[bytes]], int]:
    return lambda fh: fh.write(json.dumps(obj, indent=2, sort_keys=True, default=str).encode())


def write_checkpoint(
    path: str | os.PathLike[str],
    *,
    members: Sequence[Mapping[str, object]],
    trainer_state: Mapping[str, object],
    summary: CheckpointSummary,
    replay_buffer: Mapping[str, object] | None = None,
    manifest: Mapping[str, object] | None = None,
) -> Path:
    """Write one checkpoint folder atomically and return its path.

    An existing checkpoint at ``path`` is first invalidated (its index removed) and then
    rewritten; callers that must never lose the previous checkpoint write a new folder and
    delete the old one afterwards (see :func:`prune_checkpoints`).
    """
    folder = Path(path)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return _write_files(folder, members, trainer_state, summary, replay_buffer, manifest)
    except BaseException:
        if created:  # e.g. the disk filled up: give back what the unfinished folder took
            shutil.rmtree(folder, ignore_errors=True)
        raise


def _write_files(folder: Path, members: Sequence[Mapping[str, object]],
                 trainer_state: Mapping[str, object], summary: CheckpointSummary,
                 replay_buffer: Mapping[str, object] | None,
                 manifest: Mapping[str, object] | None) -> Path:
    for stale in folder.iterdir():  # left by a write that was killed half-way
        if is_temp_file(stale) and stale.is_file():
            stale.unlink(missing_ok=True)
    index_path = folder / INDEX_NAME
    if index_path.exists():
        index_path.unlink()
        _fsync_dir(folder)
    files: dict[str, FileEntry] = {}
    for i, state in enumerate(members):
        files[member_file(i)] = _atomic_write(folder / member_file(i), _torch_writer(state))
    files[TRAINER_FILE] = _atomic_write(folder / TRAINER_FILE, _torch_writer(trainer_state))
    if replay_buffer is not None:
        files[BUFFER_FILE] = _atomic_write(folder / BUFFER_FILE, _torch_writer(replay_buffer))
    if manifest is not None:
        files[MANIFEST_FILE] = _atomic_write(folder / MANIFEST_FILE, _json_writer(manifest))
    _fsync_dir(folder)
    index: CheckpointIndex = {
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
    index: CheckpointIndex

    @property
    def pop_size(self) -> int:
        return int(self.index["pop_size"])

    @property
    def summary(self) -> CheckpointSummary:
        return self.index.get("summary", {}).copy()

    @property
    def has_replay_buffer(self) -> bool:
        return BUFFER_FILE in self.index["files"]

    def _load(self, name: str) -> dict[str, object]:
        # A file whose digest is the index's: written by write_checkpoint from a mapping.
        self._verify(name)
        if _digest(self.path / name) != self.index["files"][name]["sha256"]:
            raise CheckpointError(
                f"checkpoint {self.path}: {name!r} does not match its SHA-256 in {INDEX_NAME} "
                "(the file is corrupted or was modified)"
            )
        return load_state_file(self.path / name, f"checkpoint {self.path}: {name!r}")

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

    def member_state(self, i: int) -> dict[str, object]:
        """The saved state of member ``i``."""
        return self._load(member_file(i))

    def member_states(self) -> list[dict[str, object]]:
        return [self.member_state(i) for i in range(self.pop_size)]

    def trainer_state(self) -> dict[str, Any]:
        # The loop's record: its values are the training package's own state dicts (loop,
        # evolution, RNG), which resume reads without narrowing.
        return dict(self._load(TRAINER_FILE))

    def replay_buffer(self) -> dict[str, Any] | None:
        # ReplayBuffer.state_dict()'s record, handed back to ReplayBuffer.load_state_dict.
        return self._load(BUFFER_FILE) if self.has_replay_buffer else None

    def manifest(self) -> JsonObject | None:
        """The manifest the run was started from (None when the checkpoint has none)."""
        if MANIFEST_FILE not in self.index["files"]:
            return None
        self._verify(MANIFEST_FILE)
        try:
            saved = json.loads((self.path / MANIFEST_FILE).read_bytes())
        except (OSError, ValueError, RecursionError) as exc:
            raise CheckpointError(f"checkpoint {self.path}: {MANIFEST_FILE!r} is not "
                                  f"readable JSON ({exc})") from None
        if not isinstance(saved, dict):
            raise CheckpointError(f"checkpoint {self.path}: {MANIFEST_FILE!r} is not an object")
        return saved


_MAX_INDEX_BYTES = 16 << 20


def _read_index(folder: Path) -> JsonValue:
    index_path = folder / INDEX_NAME
    try:
        if index_path.stat().st_size > _MAX_INDEX_BYTES:
            raise CheckpointError(f"checkpoint {folder}: {INDEX_NAME} is larger than "
                                  f"{_MAX_INDEX_BYTES >> 20} MiB; it is not an agilerl index")
        return json.loads(index_path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise CheckpointError(
            f"checkpoint {folder}: {INDEX_NAME} is not readable JSON ({exc}); the checkpoint "
            "is damaged") from None


def read_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Open and validate the checkpoint folder ``path`` (not a parent of checkpoints).

    The index must be well formed (every field of the right type, every member and the
    trainer state listed) and every file it lists present with the recorded size; digests
    are checked when a file is loaded.
    """
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
    index = _read_index(folder)
    problem = index_problem(index)
    if problem is not None:
        raise CheckpointError(f"checkpoint {folder}: {INDEX_NAME} {problem}; the checkpoint "
                              "is damaged or was not written by agilerl")
    checkpoint = Checkpoint(folder, cast(CheckpointIndex, index))  # index_problem checked it
    for name in checkpoint.index["files"]:
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


def _looks_like_checkpoint(folder: Path) -> bool:
    """A folder holding an index or any file a checkpoint writer leaves (finished or not)."""
    try:
        return folder.is_dir() and any(is_checkpoint_file(f) for f in folder.iterdir())
    except OSError:
        return False


def _age(folder: Path) -> tuple[int, str]:
    """Sort key, newest last: the global step in the index, else in the folder's name."""
    try:
        summary = json.loads((folder / INDEX_NAME).read_bytes()).get("summary", {})
        step = summary.get("global_step")
        if is_count(step):
            return int(step), folder.name
    except (OSError, ValueError, AttributeError, RecursionError):
        pass
    match = _STEP_IN_NAME.search(folder.name)
    return (int(match.group(1)) if match else -1), folder.name


def find_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Resolve ``path`` to a checkpoint: the folder itself, or the newest one inside it (or
    inside its ``checkpoints/`` folder, for a run folder).

    Resuming never rolls back silently: when the newest checkpoint in a folder was never
    finished (no index: its writing was killed), the previous one is used with a
    :class:`CheckpointFallbackWarning` naming both; when the newest is damaged (a bad index,
    a missing or modified file) it is refused, naming the previous one to pass instead.
    """
    folder = Path(path)
    if (folder / INDEX_NAME).exists() or not folder.is_dir():
        return read_checkpoint(folder)
    candidates = sorted((c for c in folder.iterdir() if _looks_like_checkpoint(c)), key=_age)
    if not candidates and (folder / RUN_CHECKPOINTS).is_dir():  # a run folder
        return find_checkpoint(folder / RUN_CHECKPOINTS)
    if not candidates:
        raise CheckpointError(
            f"{folder} is not a checkpoint: it has no {INDEX_NAME} and holds no complete "
            "checkpoint folder (a checkpoint whose writing was interrupted has no index)"
        )
    newest = candidates[-1]
    try:
        return read_checkpoint(newest)
    except CheckpointError as exc:
        problem = exc
    previous = None
    if len(candidates) > 1:
        try:
            previous = read_checkpoint(candidates[-2])
        except CheckpointError:
            previous = None
    unfinished = not (newest / INDEX_NAME).exists()
    if unfinished and previous is not None:
        warnings.warn(
            f"the newest checkpoint {newest} was never finished (it has no {INDEX_NAME}: its "
            f"writing was interrupted); resuming from the previous complete checkpoint "
            f"{previous.path} instead", CheckpointFallbackWarning, stacklevel=2)
        return previous
    detail = (f"; the previous complete checkpoint is {previous.path}: resume from it "
              "explicitly if that is what you want" if previous is not None else
              "; no earlier complete checkpoint was found")
    raise CheckpointError(
        f"the newest checkpoint in {folder} cannot be used, and resuming from an older one "
        f"would silently roll the run back: {problem}{detail}") from None


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process is not writing anything else right now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _stale_temp(path: Path) -> bool:
    """A temp file of a write whose process is gone (or is this one, between writes)."""
    return is_temp_file(path) and not _pid_alive(int(path.name.rpartition(TEMP_MARK)[2]))


def remove_torn_writes(root: str | os.PathLike[str]) -> list[Path]:
    """Clean up after checkpoint writes that were killed half-way, under ``root``.

    Removes stale temp files, and folders that hold only checkpoint files, no index and at
    least one stale temp file (a write killed mid-file; never a checkpoint another live
    process is writing). Returns the folders removed.
    """
    removed: list[Path] = []
    for child in sorted(Path(root).iterdir()) if Path(root).is_dir() else []:
        if not _looks_like_checkpoint(child):
            continue
        entries = list(child.iterdir())
        stale = [e for e in entries if _stale_temp(e)]
        torn = (not (child / INDEX_NAME).exists() and bool(stale)
                and all(is_checkpoint_file(e) and e.is_file() for e in entries)
                and not any(is_temp_file(e) and e not in stale for e in entries))
        if torn:
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child)
            continue
        for temp in stale:
            temp.unlink(missing_ok=True)
    return removed


def prune_checkpoints(root: str | os.PathLike[str], keep: Path) -> None:
    """Delete every checkpoint folder under ``root`` except ``keep`` (overwrite mode)."""
    for checkpoint in list_checkpoints(root):
        if checkpoint.path.resolve() != keep.resolve():
            # Remove the index first so a crash mid-delete leaves a non-checkpoint, not a
            # half-deleted checkpoint.
            (checkpoint.path / INDEX_NAME).unlink(missing_ok=True)
            shutil.rmtree(checkpoint.path, ignore_errors=True)
