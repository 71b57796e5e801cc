"""The exceptions every floor raises, and how an error is told to be a missing extra, a
full disk or exhausted memory.

Users catch these under the names documented in ``docs/training.md``;
``agilerl.training.errors`` re-exports them under their earlier module.
"""

from __future__ import annotations

import errno
import signal
from pathlib import Path

__all__ = [
    "ArgumentError",
    "DeviceUnavailableError",
    "EnvironmentSetupError",
    "InsufficientMemoryError",
    "MissingExtraError",
    "TrainingAborted",
    "TrainingInterrupted",
    "TrainingSetupError",
    "UnsupportedAlgorithmError",
    "UnsupportedSettingError",
    "memory_exhausted",
    "missing_extra",
    "resource_shortage",
    "storage_exhausted",
]

#: Importable module (top-level name) -> the ``agilerl`` extra that installs it.
EXTRAS: dict[str, str] = {
    "Box2D": "box2d",
    "pygame": "box2d",
    "mpe2": "mpe",
    "pymunk": "butterfly",
    "pettingzoo": "mpe",
    "h5py": "offline",
    "minari": "offline",
    "pandas": "bandit",
    "accelerate": "llm",
    "transformers": "llm",
    "peft": "llm",
    "datasets": "llm",
    "ray": "ray",
    "ale_py": "atari",
    "cv2": "atari",
}


class UnsupportedAlgorithmError(NotImplementedError):
    """The manifest is valid but asks for something this version cannot train yet."""


class UnsupportedSettingError(UnsupportedAlgorithmError):
    """A valid setting this version cannot run yet (an encoder architecture, an action
    space): refused when the trainer is built, naming the setting."""


class TrainingSetupError(Exception):
    """The run cannot start as asked, for a reason outside agilerl (a missing package, a
    device that is not there, an environment that cannot be built, logging that cannot
    start). The message says what to do; the CLI exits with ``exit_code``."""

    exit_code = 2


class ArgumentError(TrainingSetupError, TypeError, ValueError):
    """An argument of ``train()`` (or an option of ``agilerl train``) of the wrong type or out
    of range; the message names it. A ``TypeError`` and a ``ValueError``, so either catch
    works; the CLI exits 2 (usage)."""


class MissingExtraError(TrainingSetupError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class DeviceUnavailableError(TrainingSetupError, ValueError):
    """The requested torch device is misspelt or not present on this machine."""


class EnvironmentSetupError(TrainingSetupError, ValueError):
    """The environment (its id, entrypoint, wrappers or config) could not be built."""


def missing_extra(exc: BaseException, what: str) -> MissingExtraError | None:
    """A :class:`MissingExtraError` for an ``ImportError`` of a module an extra installs
    (``exc.name`` or an install hint already in the message), else None."""
    if not isinstance(exc, ImportError):
        return None
    if isinstance(exc, MissingExtraError):
        return exc
    module = (getattr(exc, "name", None) or "").partition(".")[0]
    extra = EXTRAS.get(module)
    if extra is not None:
        return MissingExtraError(
            f"{what} needs the Python package '{module}', which is not installed. "
            f"Install it with: pip install 'agilerl[{extra}]'"
        )
    if "pip install" in str(exc):  # a dependency check that already says how to fix it
        return MissingExtraError(str(exc))
    return None


class InsufficientMemoryError(MemoryError):
    """The machine ran out of memory for what the manifest asks (the message names the
    setting to lower): not a bug, and nothing already saved is affected. CLI exit 5."""

    exit_code = 5


#: ``errno`` values of a write refused for want of space: the disk, a quota, the file-size
#: limit (``RLIMIT_FSIZE``).
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def storage_exhausted(exc: BaseException | None) -> OSError | None:
    """The ``OSError`` saying the disk (or a quota or file-size limit) is full, when it is
    ``exc`` or what ``exc`` was raised from (torch's writer reports a failed write as a
    ``RuntimeError`` raised while handling it), else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def memory_exhausted(exc: BaseException) -> bool:
    """``exc`` says an allocation failed: ``MemoryError``, or torch's allocator (CPU or
    GPU) refusing one."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text
                                              or "out of memory" in text.lower())


def resource_shortage(exc: BaseException) -> str | None:
    """What ran out, in words that say what to do, when ``exc`` says the disk or the memory
    did (else None): the file being written, or the network field to shrink."""
    full = storage_exhausted(exc)
    if full is not None:
        where = f"writing {full.filename}" if full.filename else "writing the run's files"
        return (f"out of disk space {where} ({full.strerror}: the disk, a quota or the "
                "file-size limit is full); free space, or point --run-dir and "
                "--checkpoint-path at another disk")
    if isinstance(exc, InsufficientMemoryError):
        return str(exc)
    if memory_exhausted(exc):
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"out of memory ({detail}); lower the network's sizes, training.pop_size, "
                "replay_buffer.max_size or environment.num_envs")
    return None


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a stop signal after writing a checkpoint (``checkpoint``).

    ``signum`` is the signal that asked for the stop (``SIGINT`` for Ctrl-C, ``SIGTERM``);
    ``resume_hint`` is the Python call that continues the run from the checkpoint. Calling
    ``train()`` again on the same trainer also continues it.
    """

    def __init__(self, checkpoint: Path | None, signum: int = signal.SIGINT,
                 resume_hint: str | None = None) -> None:
        name = signal.Signals(int(signum)).name
        message = f"training interrupted by {name}; checkpoint written to {checkpoint}"
        if resume_hint:
            message += f"; resume with: {resume_hint}"
        super().__init__(message)
        self.checkpoint = checkpoint
        self.signum = int(signum)
        self.resume_hint = resume_hint


class TrainingAborted(KeyboardInterrupt):
    """A second stop signal: training stopped at once, without a new checkpoint (the last
    one written stays valid)."""

    def __init__(self, signum: int) -> None:
        super().__init__("aborted without a new checkpoint (the last one written stays valid)")
        self.signum = int(signum)
