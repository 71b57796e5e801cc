"""Checkpoints: a folder per checkpoint, one file per member, an ``index.json`` written last.

A folder without its ``index.json`` is not a checkpoint (it is what an interrupted write leaves
behind) and is refused with :class:`CheckpointError`.
"""

from agilerl.checkpoint.folder import (
    INDEX_NAME,
    Checkpoint,
    CheckpointError,
    CheckpointFallbackWarning,
    ResumeMismatchError,
    find_checkpoint,
    read_checkpoint,
    remove_torn_writes,
    write_checkpoint,
)
from agilerl.checkpoint.rng import capture_rng_state, restore_rng_state

__all__ = [
    "INDEX_NAME",
    "Checkpoint",
    "CheckpointError",
    "CheckpointFallbackWarning",
    "ResumeMismatchError",
    "capture_rng_state",
    "find_checkpoint",
    "read_checkpoint",
    "remove_torn_writes",
    "restore_rng_state",
    "write_checkpoint",
]
