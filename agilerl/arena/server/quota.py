"""One user's disk quota: their experiments, uploaded environments (sources, venvs and
scratch) and datasets together may take at most ``user_disk_quota_bytes``.

* Uploads, submits, resumes and copies are refused while the user is over the quota
  (403 ``DISK_QUOTA_EXCEEDED``, saying how much is used and how to free it).
* A running job that takes its user over the quota is stopped, its error saying so
  (:class:`QuotaWatch`, one call per scheduler tick, measuring every
  ``quota_check_interval_s``).
* Scratch folders are emptied after each check (:func:`clean_scratch`).

Disk use is what the files occupy (allocated blocks, so a sparse file costs what it
holds); links are never followed and hard links are counted once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from agilerl.arena.server import states
from agilerl.arena.server.config import ServerConfig
from agilerl.arena.server.errors import ApiError

if TYPE_CHECKING:
    from agilerl.arena.server.scheduler import Scheduler
    from agilerl.arena.server.store import Row, Store

log = logging.getLogger(__name__)
_MB = 1 << 20


def disk_usage(root: Path) -> int:
    """Bytes the files under ``root`` occupy (0 when it does not exist)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                    if (info.st_dev, info.st_ino) in seen:
                        continue
                    seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
    return total


def user_folders(config: ServerConfig, store: Store, user_id: int) -> list[Path]:
    """Every folder holding ``user_id``'s files (layout: :mod:`.catalog`, runs)."""
    from agilerl.arena.server.catalog import user_roots

    runs = [config.experiments_dir / str(int(row["id"]))
            for row in store.experiments(user_id, None)]
    return [*runs, *user_roots(config.data_dir, user_id)]


def usage(config: ServerConfig, store: Store, user_id: int) -> int:
    return sum(disk_usage(folder) for folder in user_folders(config, store, user_id))


def _mb(size: int) -> str:
    return f"{size / _MB:,.1f} MB"


def over_quota(config: ServerConfig, used: int, what: str) -> ApiError:
    quota = config.user_disk_quota_bytes
    return ApiError(403, "DISK_QUOTA_EXCEEDED",
                    f"{what}: your experiments, environments and datasets on this server take"
                    f" {_mb(used)}, over your disk quota of {_mb(quota)}; delete some"
                    " (arena experiments delete, environments delete, datasets delete)"
                    " to free space", used_bytes=used, limit=quota)


def check(config: ServerConfig, store: Store, user_id: int, what: str,
          adding: int = 0) -> None:
    """403 ``DISK_QUOTA_EXCEEDED`` when the user's files, plus ``adding`` bytes about to
    be written, exceed the quota. ``what`` names the refused action."""
    quota = config.user_disk_quota_bytes
    if quota <= 0:
        return
    used = usage(config, store, user_id)
    if used + adding > quota:
        raise over_quota(config, used + adding, what)


def clean_scratch(scratch: Path) -> None:
    """Remove ``scratch`` (a check's HOME and TMPDIR) and what the check left in it;
    links inside are removed, never followed."""
    if scratch.is_symlink() or scratch.is_file():
        scratch.unlink(missing_ok=True)
    else:
        shutil.rmtree(scratch, ignore_errors=True)


class QuotaWatch:
    """Stops running jobs whose users are over the quota (called once per tick)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._next = 0.0

    def tick(self, scheduler: Scheduler) -> None:
        cfg = self.config
        now = time.monotonic()
        if cfg.user_disk_quota_bytes <= 0 or now < self._next:
            return
        self._next = now + cfg.quota_check_interval_s
        rows = [scheduler.store.experiment(exp_id) for exp_id in scheduler.running()]
        by_user: dict[int, list[Row]] = {}
        for row in rows:
            if row is not None and row["state"] in (states.STARTING, states.RUNNING):
                by_user.setdefault(int(row["user_id"]), []).append(row)
        for user_id, running in by_user.items():
            used = usage(cfg, scheduler.store, user_id)
            if used > cfg.user_disk_quota_bytes:
                for row in running:
                    self._stop(scheduler, row, used)

    def _stop(self, scheduler: Scheduler, row: Row, used: int) -> None:
        message = over_quota(self.config, used, "Stopped").message
        log.warning("experiment %s: %s", row["id"], message)
        if scheduler.store.transition(int(row["id"]), states.STOPPING,
                                      reason="disk quota exceeded", error=message) is not None:
            scheduler.signal_stop(int(row["id"]))
