"""Keep everything a job or check starts in one process tree, and end the tree with it.

The server starts every job, validation, profile and pip install through a small
supervisor (:mod:`.tree_supervisor`; it stays the process the server waits on and
signals), which starts the command in one of two modes, chosen once per server by
:func:`probe`:

* ``pid-namespace``: the command runs in new PID, mount and IPC namespaces (and a user
  namespace when the server is not root), under a small init process. When the command
  exits, the init exits and the kernel kills everything left in the namespace, however
  it was started (``setsid()`` children included); from inside, no process outside the
  namespace can even be named, let alone signalled. The mount namespace gives the tree a
  private, size-limited ``/dev/shm`` and its own ``/proc``.
* ``subreaper``: where namespaces are refused, the supervisor marks itself a child
  subreaper, so every orphan of the tree becomes its child, and kills all its descendants
  when the command exits. ``/dev/shm`` is then shared with the machine, so the sandbox
  hides it (:mod:`.sandbox`).

Memory and process-count limits hold for the whole tree: a cgroup per tree where the
server may create one (cgroup v2, or the v1 ``memory`` and ``pids`` hierarchies), else a
watchdog that sums the tree's proportional memory (PSS) twice a second and
``RLIMIT_NPROC``. Past the memory limit the whole tree is killed and the supervisor says
so on stderr (:data:`MEMORY_LIMIT_HIT`).

Signals to the supervisor: SIGTERM, SIGINT and SIGHUP are passed to the command (a
graceful stop); SIGUSR1 kills the tree now (:meth:`Containment.end`). The supervisor
exits as the command did (the same code, or the same signal).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from agilerl.arena.server.tree_supervisor import (
    END_NOW,
    MEMORY_LIMIT_HIT,
    NAMESPACES,
    NONE,
    SUBREAPER,
    TreeCgroup,
    running,
    tree_cgroup,
)

__all__ = ["MEMORY_LIMIT_HIT", "NAMESPACES", "NONE", "SUBREAPER", "CgroupParent", "Containment",
           "find_cgroup_parent", "for_jobs", "probe", "running"]

#: the supervisor's command: its file, run in isolated mode. It needs nothing but the
#: standard library, so it runs the same whatever the tree's environment (a check's has no
#: PYTHONPATH) and whichever interpreter the tree itself uses.
_SUPERVISOR = [sys.executable, "-I",
               str(Path(__file__).resolve().with_name("tree_supervisor.py"))]


# ---- cgroups ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CgroupParent:
    """Folders under which the server may create one cgroup per tree: one folder for v2,
    the ``memory`` (and ``pids``) hierarchies' for v1."""

    version: int
    folders: tuple[Path, ...]

    def tree(self, supervisor: int) -> TreeCgroup:
        return tree_cgroup(self.version, self.folders, supervisor)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of every mount of this process."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        fstype, _, options = (tail.split() + ["", "", ""])[:3]
        found.append((head.split()[4], fstype, set(options.split(","))))
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per controller (``""``: the v2 hierarchy)."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _v2_parent(mounts: list[tuple[str, str, set[str]]], own: dict[str, str]
               ) -> CgroupParent | None:
    point = next((m for m, fstype, _ in mounts if fstype == "cgroup2"), None)
    if point is None or "" not in own:
        return None
    folder = Path(point + own[""])
    try:
        if "memory" not in (folder / "cgroup.controllers").read_text().split():
            return None
        if "memory" not in (folder / "cgroup.subtree_control").read_text().split():
            # a cgroup with members cannot hand controllers to children: move this
            # server into a leaf of its own first (the usual set-up of a delegated cgroup)
            leaf = folder / "arena-server"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            (folder / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError:
        return None
    return CgroupParent(2, (folder,))


def _v1_parent(mounts: list[tuple[str, str, set[str]]], own: dict[str, str]
               ) -> CgroupParent | None:
    folders = []
    for controller in ("memory", "pids"):
        point = next((m for m, fstype, opts in mounts
                      if fstype == "cgroup" and controller in opts), None)
        if point is None or controller not in own:
            continue
        folder = Path(point + own[controller])
        if os.access(folder, os.W_OK) and (folder / "cgroup.procs").exists():
            folders.append(folder)
    if not folders or not (folders[0] / "memory.limit_in_bytes").exists():
        return None
    return CgroupParent(1, tuple(folders))


def find_cgroup_parent() -> CgroupParent | None:
    """Where this server may create per-tree cgroups with a memory controller, if anywhere."""
    try:
        mounts, own = _mounts(), _own_cgroups()
    except OSError:
        return None
    return _v2_parent(mounts, own) or _v1_parent(mounts, own)


# ---- the server's side ------------------------------------------------------------------


@dataclass(frozen=True)
class Containment:
    """How this machine lets the server contain process trees (:func:`probe`)."""

    mode: str
    cgroup: CgroupParent | None = None
    #: why namespaces are not used (empty when they are)
    why_not: str = field(default="", compare=False)

    @property
    def private_shm(self) -> bool:
        """Whether each tree gets its own ``/dev/shm`` (else the sandbox hides it)."""
        return self.mode == NAMESPACES

    def describe(self) -> str:
        """One sentence for the server's start-up message (after "job" or "check")."""
        if self.mode == NONE:
            return ("processes are not contained (not Linux): what they start may outlive"
                    " them")
        how = ("in their own PID, mount and IPC namespaces, with a private /dev/shm"
               if self.mode == NAMESPACES else
               f"under a subreaper that kills their descendants (no namespaces: {self.why_not};"
               " /dev/shm is hidden from sandboxed processes)")
        limits = (f"cgroup v{self.cgroup.version}" if self.cgroup is not None else
                  "a memory watchdog and RLIMIT_NPROC (no writable cgroup)")
        return f"process trees run {how}; their memory limit holds through {limits}"

    def hide_args(self) -> list[str]:
        """The sandbox's ``--hide`` arguments for what the tree must not share: the
        machine's ``/dev/shm`` where the tree has no private one."""
        return [] if self.private_shm or self.mode == NONE else ["--hide", "/dev/shm"]

    def prefix(self, *, memory_bytes: int | None = None, max_processes: int | None = None,
               shm_bytes: int = 64 << 20) -> list[str]:
        """The supervisor command that starts a tree's command (empty: no containment)."""
        if self.mode == NONE:
            return []
        cmd = [*_SUPERVISOR, "--mode", self.mode, "--shm-bytes", str(int(shm_bytes))]
        if memory_bytes:
            cmd += ["--memory-bytes", str(int(memory_bytes))]
        if max_processes:
            cmd += ["--max-processes", str(int(max_processes))]
        if self.cgroup is not None:
            cmd += ["--cgroup-version", str(self.cgroup.version)]
            for folder in self.cgroup.folders:
                cmd += ["--cgroup", str(folder)]
        return [*cmd, "--"]

    def end(self, pid: int, wait_s: float = 3.0) -> None:
        """End the tree of the supervisor ``pid`` now: ask it (it kills the tree), then
        SIGKILL its process group and whatever is left in its cgroup."""
        if self.mode != NONE:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, END_NOW)
            deadline = time.monotonic() + wait_s
            while running(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        self.clean(pid)

    def clean(self, pid: int) -> None:
        """Kill what is left in the cgroup of the supervisor ``pid`` once it has exited
        (normally nothing: it ends its tree itself, unless it was killed first)."""
        if self.cgroup is not None:
            self.cgroup.tree(pid).kill_and_remove()


def for_jobs(on_ray_cluster: bool) -> Containment:
    """How jobs are contained: as :func:`probe` found, except that a job whose population
    runs on a Ray cluster keeps the machine's PID namespace, since its Ray driver does
    not connect to the cluster from a namespace of its own (the subreaper still ends its
    tree, and the cgroup or watchdog caps it)."""
    tree = probe()
    if on_ray_cluster and tree.mode == NAMESPACES:
        return Containment(SUBREAPER, tree.cgroup,
                           why_not="jobs on a Ray cluster drive it from the machine's")
    return tree


@functools.lru_cache(maxsize=1)
def probe() -> Containment:
    """What this machine allows, found once: a throw-away supervisor tries namespaces."""
    if not sys.platform.startswith("linux"):
        return Containment(NONE)
    cgroup = find_cgroup_parent()
    try:
        done = subprocess.run([*_SUPERVISOR, "--probe"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Containment(SUBREAPER, cgroup, why_not=str(exc))
    if done.returncode == 0:
        return Containment(NAMESPACES, cgroup)
    why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return Containment(SUBREAPER, cgroup, why_not=why)
