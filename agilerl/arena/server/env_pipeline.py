"""The stages an uploaded environment goes through, each streamed as NDJSON events.

``upload`` (stored and unpacked, by the route) -> ``install`` (its virtual environment and
requirements) -> ``validation`` (entrypoint, Gymnasium/PettingZoo checks, optional random
rollouts) -> ``profiling`` (steps/s, CPU and memory of one copy). Each stage ends with a
``completed`` event, or with one ``failed`` event whose ``detail`` carries ``error_code``,
the ``check`` that failed and the ``reason``; the record keeps the state and the error.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias, TypeVar

from agilerl.arena.server import nofollow
from agilerl.arena.server.catalog import Catalog, Row
from agilerl.arena.server.config import ServerConfig
from agilerl.arena.server.env_checker import CheckMessage, CheckSpec, Result
from agilerl.arena.server.env_entrypoints import find_entrypoints
from agilerl.arena.server.env_install import InstallError, create_venv, install
from agilerl.arena.server.env_validation import (
    Limits,
    Outcome,
    ProcessGroups,
    Sandbox,
    run_checker,
)
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.events import event
from agilerl.arena.server.quota import clean_scratch
from agilerl.arena.server.sandbox import landlock_abi

_Returned = TypeVar("_Returned")
#: a stage's NDJSON events, then what it found (``yield from`` hands it to the caller).
Stream: TypeAlias = Generator[bytes, None, _Returned]


@dataclass(frozen=True)
class EnvPaths:
    root: Path

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"

    @property
    def installed(self) -> Path:
        """Written once the venv and its requirements are complete."""
        return self.venv / ".agilerl-installed"

    def is_installed(self) -> bool:
        """Whether :attr:`installed` is there as a regular file (a link does not count)."""
        found = nofollow.entry(self.root, self.installed.relative_to(self.root))
        return found is not None and found.kind == "file"


class EnvService:
    """Shared state of the environment routes: catalog, limits and who is busy."""

    def __init__(self, config: ServerConfig, catalog: Catalog) -> None:
        self.config = config
        self.catalog = catalog
        self.sandbox = Sandbox(enabled=config.job_sandbox and landlock_abi() > 0,
                               hide=(config.data_dir,))
        self._slots = threading.BoundedSemaphore(config.env_concurrent_checks)
        #: versions being worked on, and since when (monotonic seconds).
        self._busy: dict[tuple[int, str, str], float] = {}
        self._lock = threading.RLock()
        #: pip and check processes running now (ended when the server stops).
        self.groups = ProcessGroups()

    def paths(self, row: Row) -> EnvPaths:
        return EnvPaths(self.catalog.env_dir(row["user_id"], row["name"], row["version"]))

    @property
    def limits(self) -> Limits:
        cfg = self.config
        return Limits(cpu_s=cfg.env_check_cpu_s, memory_bytes=cfg.env_check_memory_bytes,
                      wall_s=cfg.env_check_wall_s)

    @property
    def _max_hold_s(self) -> float:
        """Longest one request can work on a version (install, validation and profiling);
        a hold older than this was left by a request that never ran and is ignored."""
        cfg = self.config
        return cfg.env_install_timeout_s + 3 * cfg.env_check_wall_s + 300

    def ensure_idle(self, user_id: int, name: str, version: str) -> None:
        """409 ``ENVIRONMENT_BUSY`` while another request works on this version."""
        with self._lock:
            since = self._busy.get((user_id, name, version))
            if since is not None and time.monotonic() - since < self._max_hold_s:
                raise ApiError(409, "ENVIRONMENT_BUSY",
                               f"Environment '{name}' version '{version}' is being installed,"
                               " validated or profiled by another request; try again shortly")

    def acquire(self, user_id: int, name: str, version: str) -> None:
        """Hold one environment version (409 when held); :meth:`release` ends the hold."""
        with self._lock:
            self.ensure_idle(user_id, name, version)
            self._busy[(user_id, name, version)] = time.monotonic()

    def release(self, user_id: int, name: str, version: str) -> None:
        with self._lock:
            self._busy.pop((user_id, name, version), None)

    @contextlib.contextmanager
    def claim(self, user_id: int, name: str, version: str) -> Iterator[None]:
        """Hold one environment version for the ``with`` block (409 when held)."""
        self.acquire(user_id, name, version)
        try:
            yield
        finally:
            self.release(user_id, name, version)

    def shutdown(self) -> None:
        """End every pip and check process (their requests are ending with the server)."""
        self.groups.kill_all()

    def remove_files(self, row: Row) -> None:
        shutil.rmtree(self.paths(row).root, ignore_errors=True)


def _failed(stage: str, code: str, message: str, row: Row, **detail: object) -> bytes:
    return event("status", stage, "failed", message,
                 {"error_code": code, "name": row["name"], "version": row["version"], **detail})


def exclusive(svc: EnvService, row: Row, stage: str, body: Iterator[bytes]) -> Iterator[bytes]:
    """``body``'s events, then the release of ``row``'s version, which the route acquired
    (:meth:`EnvService.acquire`) before answering. An :class:`ApiError` raised on the way
    ends the stream with a ``failed`` event, since the answer has already started."""
    try:
        yield from body
    except ApiError as err:
        yield _failed(stage, err.code, err.message, row, reason=err.message)
    finally:
        svc.release(row["user_id"], row["name"], row["version"])


def mark_installed(paths: EnvPaths) -> None:
    """Write :attr:`EnvPaths.installed`. pip ran upload code (a setup.py) that could leave
    a link there: it is replaced, never followed."""
    try:
        nofollow.write_atomic(paths.root, paths.installed.relative_to(paths.root), b"")
    except OSError as exc:
        raise InstallError(f"cannot mark the virtual environment installed: {exc}") from None


def install_stage(svc: EnvService, row: Row, cancel: threading.Event) -> Stream[bool]:
    """Create the venv and install the requirements; returns True on success."""
    paths = svc.paths(row)
    requirements: list[str] = row["requirements"]
    yield event("status", "install", "started", "Creating the environment's virtual environment")
    svc.catalog.update_environment(row["id"], state="installing", error=None)
    try:
        shutil.rmtree(paths.venv, ignore_errors=True)
        create_venv(paths.venv)
        if requirements:
            yield event("status", "install", "running",
                        f"Installing {len(requirements)} requirement(s): "
                        + ", ".join(requirements)[:500])
            cfg = svc.config
            confine = svc.sandbox.prefix(None, [paths.source], [paths.venv, paths.scratch],
                                         wall_s=cfg.env_install_timeout_s)
            for line in install(paths.venv, requirements, paths.scratch,
                                timeout_s=cfg.env_install_timeout_s,
                                max_bytes=cfg.env_max_venv_bytes, confine=confine,
                                groups=svc.groups, cancel=cancel):
                yield event("status", "install", "running", line, level="secondary-info")
        mark_installed(paths)
    except InstallError as exc:
        svc.catalog.update_environment(row["id"], state="failed", error=str(exc))
        yield _failed("install", "INSTALL_FAILED", f"Installing the requirements failed: {exc}",
                      row, reason=str(exc))
        return False
    finally:
        clean_scratch(paths.scratch)  # pip's TMPDIR: nothing is kept
    svc.catalog.update_environment(row["id"], state="installed")
    yield event("status", "install", "completed",
                "Requirements installed" if requirements else "No requirements to install")
    return True


def choose_entrypoint(svc: EnvService, row: Row, given: str | None) -> Stream[str | None]:
    """The entrypoint to validate: the one given, else the only one found; else None."""
    if given:
        return given
    found = find_entrypoints(svc.paths(row).source)
    svc.catalog.update_environment(row["id"], entrypoints=found)
    if row.get("entrypoint") and (row["entrypoint"] in found or not found):
        return str(row["entrypoint"])
    if len(found) == 1:
        yield event("status", "validation", "running", f"Found entrypoint {found[0]}")
        return found[0]
    if not found:
        reason = ("no class deriving from gymnasium.Env or pettingzoo.ParallelEnv was found;"
                  " pass --entrypoint module:Class")
        code = "ENTRYPOINT_NOT_FOUND"
    else:
        reason = f"{len(found)} environment classes were found; choose one with --entrypoint"
        code = "AMBIGUOUS_ENTRYPOINT"
    svc.catalog.update_environment(row["id"], state="failed", error=reason)
    yield _failed("validation", code, f"Cannot choose an entrypoint: {reason}", row,
                  reason=reason, available_entrypoints=found)
    return None


def _check_event(message: CheckMessage) -> bytes:
    name = str(message.get("check"))
    result = {"success": bool(message.get("success")), "warnings": message.get("warnings") or [],
              "error msg": message.get("error")}
    status = "completed" if result["success"] else "failed"
    return event("check", "validation", status, name, {"check": name, "result": result})


def _run(svc: EnvService, row: Row, spec: CheckSpec, stage: str,
         cancel: threading.Event) -> Stream[Outcome]:
    """Run the checker in a free slot, relaying check events; returns the Outcome."""
    paths = svc.paths(row)
    if not svc._slots.acquire(blocking=False):
        yield event("status", stage, "running", "Waiting for a free validation slot")
        svc._slots.acquire()
    outcome: Outcome | None = None
    failure_shown = False
    try:
        for item in run_checker(paths.venv, spec, paths.scratch, svc.limits, svc.sandbox,
                                read=[paths.source, paths.venv], groups=svc.groups,
                                cancel=cancel):
            if isinstance(item, Outcome):
                outcome = item
            elif stage == "validation":
                failure_shown = failure_shown or not item.get("success")
                yield _check_event(item)
    finally:
        svc._slots.release()
        clean_scratch(paths.scratch)  # the check's HOME and TMPDIR: nothing is kept
    assert outcome is not None
    if not outcome.ok and outcome.check and not failure_shown and (
            stage == "validation" or outcome.code != "VALIDATION_FAILED"):
        # the host was stopped, or went away, inside a check: show that check as failed
        yield _check_event({"check": outcome.check, "success": False, "error": outcome.reason})
    return outcome


def _spec(svc: EnvService, row: Row, entrypoint: str, mode: str, rollouts: bool) -> CheckSpec:
    return {"mode": mode, "source": str(svc.paths(row).source), "entrypoint": entrypoint,
            "config": row["env_config"], "multi_agent": bool(row["multi_agent"]),
            "rollouts": svc.config.env_rollout_episodes if rollouts else 0,
            "seconds": svc.config.env_profile_s}


def validation_stage(svc: EnvService, row: Row, entrypoint: str, do_rollouts: bool,
                     started: float, cancel: threading.Event
                     ) -> Stream[dict[str, object] | None]:
    """Check the environment; returns the completion detail, or None when it failed."""
    yield event("status", "validation", "started", f"Validating {entrypoint}")
    svc.catalog.update_environment(row["id"], state="validating", entrypoint=entrypoint)
    outcome = yield from _run(svc, row, _spec(svc, row, entrypoint, "validate", do_rollouts),
                              "validation", cancel)
    if not outcome.ok:
        where = f"check '{outcome.check}'" if outcome.check else "validation"
        svc.catalog.update_environment(row["id"], state="failed", validated=0, profiled=0,
                                       error=f"{where}: {outcome.reason}")
        yield _failed("validation", outcome.code, f"Validation failed at {where}: {outcome.reason}",
                      row, check=outcome.check, reason=outcome.reason)
        return None
    svc.catalog.update_environment(row["id"], state="validated", validated=1, error=None)
    detail: dict[str, object] = {"name": row["name"], "version": row["version"], "validated": True,
              "entrypoint": entrypoint, "multi_agent": bool(row["multi_agent"]),
              **outcome.result, "validation_s": round(time.monotonic() - started, 3)}
    yield event("status", "validation", "completed",
                f"Environment {row['name']}:{row['version']} is valid", detail)
    return detail


def profiling_stage(svc: EnvService, row: Row, entrypoint: str,
                    cancel: threading.Event) -> Stream[Result | None]:
    """Measure the environment; returns the metrics, or None when profiling failed."""
    yield event("status", "profiling", "started",
                f"Profiling {row['name']}:{row['version']} for {svc.config.env_profile_s:g} s")
    outcome = yield from _run(svc, row, _spec(svc, row, entrypoint, "profile", False),
                              "profiling", cancel)
    if not outcome.ok:
        svc.catalog.update_environment(row["id"], profiled=0)
        yield event("warning", "profiling", "running",
                    f"Profiling failed: {outcome.reason}",
                    {"error_code": "PROF_ERR", "reason": outcome.reason})
        return None
    metrics = dict(outcome.result)
    svc.catalog.update_environment(row["id"], profiled=1, profile=metrics)
    return metrics
