"""The checkpoint folder's names and the rules a well-formed ``index.json`` follows.

Pure functions of names and parsed JSON (no file access, no torch), shared by the writer and
the validating reader in :mod:`agilerl.checkpoint.folder`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeGuard

from agilerl.run_folder import CHECKPOINTS_DIR

if TYPE_CHECKING:
    from typing import NotRequired

FORMAT = "agilerl-checkpoint"
VERSION = 2
"""Version 2: every file holds plain data only (:mod:`agilerl.checkpoint.plain`)."""
#: Version 1 files pickled gymnasium spaces and numpy generators: they cannot be loaded
#: without letting the file run code, so they are refused.
_PICKLED_OBJECTS_VERSION = 1
INDEX_NAME = "index.json"
TRAINER_FILE = "trainer.pt"
BUFFER_FILE = "replay_buffer.pt"
MANIFEST_FILE = "manifest.json"
RUN_CHECKPOINTS = CHECKPOINTS_DIR
"""The checkpoint folder inside a run folder (``agilerl train --run-dir``)."""
TEMP_MARK = ".tmp-"
"""Temporary files are ``.{name}.tmp-{pid}`` until renamed into place."""



class FileEntry(TypedDict):
    """A file of a checkpoint as ``index.json`` lists it."""

    size: int
    sha256: str


class CheckpointSummary(TypedDict, total=False):
    """``index.json``'s summary of the run at the checkpoint (what the trainer wrote; an
    index from elsewhere may hold other keys or none)."""

    global_step: int
    generation: int
    agent_steps: list[int]
    members_done: int
    reason: str
    algorithm: str
    env: str
    best_fitness: float | None
    elite_member: int | None


class CheckpointIndex(TypedDict):
    """A well-formed ``index.json`` (see :func:`index_problem`)."""

    format: str
    version: int
    created: str
    pop_size: int
    files: dict[str, FileEntry]
    summary: NotRequired[CheckpointSummary]


_MEMBER = re.compile(r"member_(\d+)\.pt")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def member_file(index: int) -> str:
    return f"member_{index}.pt"


def _is_final_name(name: str) -> bool:
    return name in (TRAINER_FILE, BUFFER_FILE, MANIFEST_FILE, INDEX_NAME) \
        or _MEMBER.fullmatch(name) is not None


def is_temp_file(path: Path) -> bool:
    """The temporary file of one of the writer's files (``.member_0.pt.tmp-123``)."""
    name = path.name
    if not name.startswith(".") or TEMP_MARK not in name:
        return False
    final, _, pid = name[1:].rpartition(TEMP_MARK)
    return pid.isdigit() and _is_final_name(final)


def is_checkpoint_file(path: Path) -> bool:
    """A name the writer puts into a checkpoint folder (or its temp file)."""
    return _is_final_name(path.name) or is_temp_file(path)


def is_count(value: object) -> TypeGuard[int]:
    """A JSON whole number >= 0 (``true`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def index_problem(index: object) -> str | None:
    """What is wrong with a parsed ``index.json`` (its structure, not the files), or None."""
    if not isinstance(index, dict):
        return f"is a JSON {type(index).__name__}, not an object"
    if index.get("format") != FORMAT:
        return f"is not an agilerl index (format {index.get('format')!r}, expected {FORMAT!r})"
    version = index.get("version")
    if not is_count(version) or version < 1:
        return f"has an invalid version {version!r} (expected a whole number from 1)"
    if version == _PICKLED_OBJECTS_VERSION:
        return ("has format version 1: it was written by an earlier agilerl whose files "
                "pickle Python objects, which cannot be loaded without letting the file run "
                "code, so it is not loaded (start a new run, or resume it with the agilerl "
                "that wrote it)")
    if version > VERSION:
        return (f"has format version {version}; this agilerl reads up to version {VERSION} "
                "(the checkpoint was written by a newer agilerl)")
    pop_size = index.get("pop_size")
    if not is_count(pop_size) or pop_size < 1:
        return f"has an invalid pop_size {pop_size!r} (expected a whole number from 1)"
    files = index.get("files")
    if not isinstance(files, dict) or not files:
        return "has no 'files' table (expected an object mapping file names to size and sha256)"
    for name, meta in files.items():
        problem = _file_entry_problem(name, meta, pop_size)
        if problem is not None:
            return problem
    for required in [TRAINER_FILE, *(member_file(i) for i in range(pop_size))]:
        if required not in files:
            return f"does not list {required!r} (pop_size is {pop_size})"
    if not isinstance(index.get("summary", {}), dict):
        return "has a 'summary' that is not an object"
    return None


def _file_entry_problem(name: str, meta: object, pop_size: int) -> str | None:
    member = _MEMBER.fullmatch(name)
    if name != Path(name).name or not is_checkpoint_file(Path(name)) or is_temp_file(
            Path(name)):
        return f"lists {name!r}, which is not a checkpoint file"
    if member is not None and int(member.group(1)) >= pop_size:
        return f"lists {name!r} but pop_size is {pop_size}"
    if not isinstance(meta, dict):
        return f"has no size and sha256 for {name!r}"
    if not is_count(meta.get("size")):
        return f"has an invalid size for {name!r}: {meta.get('size')!r}"
    if not isinstance(meta.get("sha256"), str) or not _SHA256.fullmatch(meta["sha256"]):
        return f"has an invalid sha256 for {name!r}: {meta.get('sha256')!r}"
    return None
