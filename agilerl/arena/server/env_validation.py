"""Host an environment in its venv, under limits, and check it from the server.

The environment runs in :mod:`agilerl.arena.server.env_host`, a subprocess of
:mod:`agilerl.arena.server.env_limits` with a CPU-time limit, an address-space (memory)
limit and a file-size limit, under the process-tree supervisor of
:mod:`agilerl.arena.server.containment` (the memory limit also holds for all its
processes together, and nothing it starts outlives it), confined by Landlock where the
kernel has it (it reads its environment's source and venv, writes only its scratch
folder, and cannot see the rest of the data folder). It only answers requests; the
checks themselves (:mod:`agilerl.arena.server.env_checker`) run in a thread of the server
that drives it over its stdin and stdout, so the verdict never comes from the process
that runs upload code. The server enforces the wall-clock limit: past it the whole tree
is killed. However the host ends, the outcome names the check it was in and why it failed.
"""

from __future__ import annotations

import collections
import contextlib
import io
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
from typing import IO

from agilerl.arena.server.containment import MEMORY_LIMIT_HIT, Containment, probe
from agilerl.arena.server.env_checker import CheckMessage, CheckSpec, Remote, Result, drive
from agilerl.arena.server.env_install import venv_python
from agilerl.arena.server.env_wire import PipeReader

_STDERR_LINES = 20
_LINE_CHARS = 500


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
    result: Result = field(default_factory=dict)
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
    """The host process's whole environment: nothing of the server's beyond locale and PATH
    (no ``PYTHONPATH``: the venv finds the server's packages after its own)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TZ")
           or k.startswith("LC_")}
    env.update(HOME=str(scratch), TMPDIR=str(scratch), PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _drive(spec: CheckSpec, remote: Remote, sink: queue.Queue[CheckMessage | None]) -> None:
    try:
        drive(spec, remote, sink.put)
    finally:
        sink.put(None)


def _tail(pipe: IO[str], keep: collections.deque[str]) -> None:
    # read in bounded pieces: a host may print gigabytes without a newline
    for line in iter(lambda: pipe.readline(_LINE_CHARS), ""):
        if line.strip():
            keep.append(line.rstrip())


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _death(code: int, limits: Limits, stderr: collections.deque[str]) -> tuple[str, str]:
    """(error code, reason) for a host that ended before the checker reached a verdict."""
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
    ended: bool = False  # the checker stopped by itself (a verdict, or the host went away)


_CANCEL_POLL_S = 0.25
#: how long a host that went away may take to exit (to learn why from its status)
_EXIT_GRACE_S = 5


def _relay(messages: queue.Queue[CheckMessage | None], deadline: float, limits: Limits,
           progress: _Progress, cancel: threading.Event | None) -> Iterator[CheckMessage]:
    """Yield the checker's check messages until it ends, the wall-clock limit passes or
    ``cancel`` is set (the client went away). The messages come from the server's own
    checker thread, never from the host."""
    while True:
        left = deadline - time.monotonic()
        if cancel is not None and cancel.is_set():
            progress.verdict = Outcome(False, check=progress.current, code="CANCELLED",
                                       reason="the request was cancelled")
            return
        try:
            message = messages.get(timeout=max(0.0, min(left, _CANCEL_POLL_S)))
        except queue.Empty:
            if left > _CANCEL_POLL_S:
                continue
            progress.verdict = Outcome(False, check=progress.current, code="WALL_TIME_LIMIT",
                                       reason="did not finish within the wall-clock limit of"
                                       f" {limits.wall_s:g} s")
            return
        if message is None:
            progress.ended = True
            return
        if "start" in message:
            progress.current = str(message["start"])
        elif "check" in message:
            yield message
            if not message.get("success"):
                progress.verdict = Outcome(False, check=str(message["check"]),
                                           reason=str(message.get("error") or "failed"))
        elif "result" in message:
            progress.verdict = Outcome(True, result=message["result"])


def _final(progress: _Progress, code: int | None, limits: Limits,
           stderr: collections.deque[str]) -> Outcome:
    """The checker's verdict; when it has none, why the host went away (its exit status
    only explains that: it never decides a check), ``code`` None when it had closed its
    pipe yet stayed alive until killed."""
    verdict = progress.verdict
    if verdict is None:
        kind, reason = ("VALIDATION_FAILED", "the environment's process closed its pipe to"
                        " the checker") if code is None else _death(code, limits, stderr)
        verdict = Outcome(False, check=progress.current, code=kind, reason=reason)
    if not verdict.ok and verdict.code == "VALIDATION_FAILED" and "MemoryError" in verdict.reason:
        verdict.code = "MEMORY_LIMIT"
        verdict.reason += f" (limit {limits.memory_bytes / 2**20:.0f} MiB)"
    return verdict


def run_checker(venv: Path, spec: CheckSpec, scratch: Path, limits: Limits,
                sandbox: Sandbox, *, read: list[Path], groups: ProcessGroups,
                cancel: threading.Event | None = None) -> Iterator[CheckMessage | Outcome]:
    """Host the environment and check it; yield the per-check messages as they come, then
    an :class:`Outcome`."""
    scratch.mkdir(parents=True, exist_ok=True)
    cmd = [*sandbox.prefix(limits, read, [scratch]), str(venv_python(venv)), "-m",
           "agilerl.arena.server.env_host"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=scratch, env=checker_env(scratch),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    groups.add(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    os.set_blocking(proc.stdin.fileno(), False)
    stop = threading.Event()
    reader = PipeReader(proc.stdout.fileno(), stop, alive=lambda: proc.poll() is None)
    messages: queue.Queue[CheckMessage | None] = queue.Queue()
    stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
    threads = [threading.Thread(target=_drive, daemon=True,
                                args=(spec, Remote(proc.pid, reader, proc.stdin.fileno()),
                                      messages)),
               threading.Thread(target=_tail, daemon=True, args=(
                   io.TextIOWrapper(proc.stderr, errors="replace"), stderr))]
    for t in threads:
        t.start()
    progress = _Progress()
    try:
        yield from _relay(messages, started + limits.wall_s, limits, progress, cancel)
    finally:
        stop.set()
        if progress.verdict is not None or not progress.ended:
            sandbox.tree.end(proc.pid)  # checked, timed out, or abandoned
        code: int | None
        try:
            code = proc.wait(timeout=_EXIT_GRACE_S)
        except subprocess.TimeoutExpired:  # it stopped answering, yet lives on
            sandbox.tree.end(proc.pid)
            proc.wait()
            code = None
        _signal_group(proc.pid, signal.SIGKILL)  # anything the environment left running
        sandbox.tree.clean(proc.pid)
        groups.discard(proc.pid)
        for t in threads:
            t.join(timeout=5)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
    verdict = _final(progress, code, limits, stderr)
    verdict.elapsed_s = round(time.monotonic() - started, 3)
    yield verdict
