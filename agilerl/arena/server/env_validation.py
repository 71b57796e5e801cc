"""Run :mod:`agilerl.arena.server.env_checker` in an environment's venv, under limits.

The checker runs as a subprocess of :mod:`agilerl.arena.server.env_limits` with a CPU-time
limit, an address-space (memory) limit and a file-size limit, under the process-tree
supervisor of :mod:`agilerl.arena.server.containment` (the memory limit also holds for
all its processes together, and nothing it starts outlives it), confined by Landlock
where the kernel has it (it reads its environment's source and venv, writes only its
scratch folder, and cannot see the rest of the data folder). The server enforces the
wall-clock limit: past it the whole tree is killed. However the checker
ends, the outcome names the check it was in and why it failed.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agilerl.arena.server.containment import MEMORY_LIMIT_HIT, Containment, probe
from agilerl.arena.server.env_install import venv_python

_STDERR_LINES = 20


@dataclass(frozen=True)
class Limits:
    """What one check or profile run may use."""

    cpu_s: int = 120
    memory_bytes: int = 4 << 30
    wall_s: float = 180.0
    file_bytes: int = 256 << 20
    #: processes the check may run at once, and the size of its private ``/dev/shm``.
    max_processes: int = 256
    shm_bytes: int = 64 << 20


@dataclass
class Outcome:
    """How a checker run ended."""

    ok: bool
    result: dict[str, Any] = field(default_factory=dict)
    check: str | None = None
    reason: str = ""
    code: str = "VALIDATION_FAILED"
    elapsed_s: float = 0.0


class ProcessGroups:
    """The process groups one server started from uploads, so shutdown can end them."""

    def __init__(self) -> None:
        self._pids: set[int] = set()
        self._lock = threading.Lock()

    def add(self, pid: int) -> None:
        with self._lock:
            self._pids.add(pid)

    def discard(self, pid: int) -> None:
        with self._lock:
            self._pids.discard(pid)

    def kill_all(self) -> None:
        with self._lock:
            pids = list(self._pids)
        for pid in pids:
            probe().end(pid)


@dataclass(frozen=True)
class Sandbox:
    """Landlock settings for processes started from an upload."""

    enabled: bool
    hide: tuple[Path, ...]
    #: how the process tree is contained (:func:`.containment.probe`)
    tree: Containment = field(default_factory=probe)

    def prefix(self, limits: Limits | None, read: list[Path], write: list[Path],
               wall_s: float | None = None) -> list[str]:
        """The launcher command: the tree's supervisor, ``limits`` (or only a wall-clock
        ``wall_s``), then Landlock when enabled."""
        caps = limits or Limits()
        cmd = [*self.tree.prefix(memory_bytes=limits.memory_bytes if limits else None,
                                 max_processes=caps.max_processes, shm_bytes=caps.shm_bytes),
               sys.executable, "-m", "agilerl.arena.server.env_limits"]
        if limits is not None:
            cmd += ["--cpu-seconds", str(int(limits.cpu_s)),
                    "--memory-bytes", str(int(limits.memory_bytes)),
                    "--file-bytes", str(int(limits.file_bytes))]
            wall_s = limits.wall_s
        if wall_s is not None:
            # a backstop should the server die: the kernel's alarm outlives it
            cmd += ["--wall-seconds", str(int(wall_s) + 30)]
        if self.enabled:
            cmd += ["--landlock", *self.tree.hide_args()]
            for flag, paths in (("--hide", self.hide), ("--read", read), ("--write", write)):
                for path in paths:
                    cmd += [flag, str(path)]
        return [*cmd, "--"]


def checker_env(scratch: Path) -> dict[str, str]:
    """The checker's whole environment: nothing of the server's beyond locale and PATH
    (no ``PYTHONPATH``: the venv finds the server's packages after its own)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TZ")
           or k.startswith("LC_")}
    env.update(HOME=str(scratch), TMPDIR=str(scratch), PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _pump(pipe: Any, sink: queue.Queue[str | None]) -> None:
    for line in pipe:
        sink.put(line)
    sink.put(None)


def _tail(pipe: Any, keep: collections.deque[str]) -> None:
    for line in pipe:
        if line.strip():
            keep.append(line.rstrip()[:500])


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _death(code: int, limits: Limits, stderr: collections.deque[str]) -> tuple[str, str]:
    """(error code, reason) for a checker that ended without a verdict."""
    if code == -signal.SIGXCPU or code == -signal.SIGKILL and not stderr:
        return "CPU_LIMIT", f"exceeded the CPU-time limit of {limits.cpu_s} s"
    if code in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS) or any(
            "MemoryError" in line or "Cannot allocate memory" in line
            or line.startswith(MEMORY_LIMIT_HIT) for line in stderr):
        return "MEMORY_LIMIT", (f"crashed (exit {code}), most likely at the memory limit of"
                                f" {limits.memory_bytes / 2**20:.0f} MiB")
    last = stderr[-1] if stderr else "no output"
    return "VALIDATION_FAILED", f"the check process exited with code {code}: {last}"


@dataclass
class _Progress:
    current: str | None = None  # the check being run
    verdict: Outcome | None = None
    ended: bool = False  # the checker closed its output (it is exiting by itself)


_CANCEL_POLL_S = 0.25


def _relay(lines: queue.Queue[str | None], deadline: float, limits: Limits,
           progress: _Progress, cancel: threading.Event | None) -> Iterator[dict[str, Any]]:
    """Yield the checker's check messages until it ends, the wall-clock limit passes or
    ``cancel`` is set (the client went away)."""
    while True:
        left = deadline - time.monotonic()
        if cancel is not None and cancel.is_set():
            progress.verdict = Outcome(False, check=progress.current, code="CANCELLED",
                                       reason="the request was cancelled")
            return
        try:
            line = lines.get(timeout=max(0.0, min(left, _CANCEL_POLL_S)))
        except queue.Empty:
            if left > _CANCEL_POLL_S:
                continue
            progress.verdict = Outcome(False, check=progress.current, code="WALL_TIME_LIMIT",
                                       reason="did not finish within the wall-clock limit of"
                                       f" {limits.wall_s:g} s")
            return
        if line is None:
            progress.ended = True
            return
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if "start" in message:
            progress.current = str(message["start"])
        elif "check" in message:
            yield message
            if not message.get("success"):
                progress.verdict = Outcome(False, check=str(message["check"]),
                                           reason=str(message.get("error") or "failed"))
        elif isinstance(message.get("result"), dict):
            progress.verdict = Outcome(True, result=message["result"])


def _final(progress: _Progress, code: int, limits: Limits,
           stderr: collections.deque[str]) -> Outcome:
    verdict = progress.verdict
    if verdict is None:
        kind, reason = _death(code, limits, stderr)
        verdict = Outcome(False, check=progress.current, code=kind, reason=reason)
    elif verdict.ok and code != 0:
        verdict = Outcome(False, check=progress.current,
                          reason=f"the check process exited with {code}")
    if not verdict.ok and verdict.code == "VALIDATION_FAILED" and "MemoryError" in verdict.reason:
        verdict.code = "MEMORY_LIMIT"
        verdict.reason += f" (limit {limits.memory_bytes / 2**20:.0f} MiB)"
    return verdict


def run_checker(venv: Path, spec: dict[str, Any], scratch: Path, limits: Limits,
                sandbox: Sandbox, *, read: list[Path], groups: ProcessGroups,
                cancel: threading.Event | None = None) -> Iterator[dict[str, Any] | Outcome]:
    """Run the checker; yield its per-check messages as they come, then an :class:`Outcome`."""
    scratch.mkdir(parents=True, exist_ok=True)
    spec_file = scratch / "spec.json"
    spec_file.write_text(json.dumps(spec))
    cmd = [*sandbox.prefix(limits, read, [scratch]), str(venv_python(venv)), "-m",
           "agilerl.arena.server.env_checker", str(spec_file)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=scratch, env=checker_env(scratch),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True)
    groups.add(proc.pid)
    lines: queue.Queue[str | None] = queue.Queue()
    stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
    readers = [threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True),
               threading.Thread(target=_tail, args=(proc.stderr, stderr), daemon=True)]
    for t in readers:
        t.start()
    progress = _Progress()
    try:
        yield from _relay(lines, started + limits.wall_s, limits, progress, cancel)
    finally:
        if not progress.ended:  # the wall limit, or the caller went away
            sandbox.tree.end(proc.pid)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sandbox.tree.end(proc.pid)
            code = proc.wait()
        _signal_group(proc.pid, signal.SIGKILL)  # anything the environment left running
        sandbox.tree.clean(proc.pid)
        groups.discard(proc.pid)
        for t in readers:
            t.join(timeout=5)
    verdict = _final(progress, code, limits, stderr)
    verdict.elapsed_s = round(time.monotonic() - started, 3)
    yield verdict
