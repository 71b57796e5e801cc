"""The experiment state machine (spec arena-api §9.5): one table, checked in one place."""

from __future__ import annotations

PENDING = "PENDING"
QUEUED = "QUEUED"
STARTING = "STARTING"
RUNNING = "RUNNING"
STOPPING = "STOPPING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
STOPPED = "STOPPED"

TERMINAL = frozenset({COMPLETED, FAILED, STOPPED})
#: states that hold a user's job quota (waiting for or using a slot).
ACTIVE = frozenset({PENDING, QUEUED, STARTING, RUNNING, STOPPING})
#: states in which a worker process may exist.
LIVE = frozenset({STARTING, RUNNING, STOPPING})

#: every legal (from, to) pair; anything else is an ``INVALID_STATE`` conflict.
TRANSITIONS: frozenset[tuple[str | None, str]] = frozenset(
    {
        (None, PENDING),
        (PENDING, QUEUED),
        (PENDING, FAILED),  # submission interrupted before its files were written
        (QUEUED, STARTING),
        (STARTING, RUNNING),
        (STARTING, COMPLETED),
        (RUNNING, COMPLETED),
        (STARTING, FAILED),
        (RUNNING, FAILED),
        (PENDING, STOPPED),
        (QUEUED, STOPPED),
        (STARTING, STOPPING),
        (RUNNING, STOPPING),
        (STOPPING, STOPPED),
        (STOPPED, QUEUED),
        (COMPLETED, QUEUED),
        (FAILED, QUEUED),
    }
)


def allowed(src: str | None, dst: str) -> bool:
    return (src, dst) in TRANSITIONS


def sources(dst: str) -> tuple[str, ...]:
    """States from which ``dst`` can be reached."""
    return tuple(sorted(s for s, d in TRANSITIONS if d == dst and s is not None))
