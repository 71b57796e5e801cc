"""Keep everything a job or check starts in one process tree, and end the tree with it.

    python -I agilerl/arena/server/containment.py --mode MODE [--memory-bytes N]
        [--max-processes N] [--shm-bytes N] [--cgroup-version V --cgroup DIR ...]
        -- COMMAND [ARG ...]

The server starts every job, validation, profile and pip install through this small
supervisor (it stays the process the server waits on and signals), which starts
``COMMAND`` in one of two modes, chosen once per server by :func:`probe`:

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
graceful stop); SIGUSR1 kills the tree now (:func:`end_tree`). The supervisor exits as
the command did (the same code, or the same signal).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

NAMESPACES, SUBREAPER, NONE = "pid-namespace", "subreaper", "none"
#: how the supervisor's stderr line about the memory limit begins (parsed by the checks).
MEMORY_LIMIT_HIT = "arena: memory limit hit"
#: the supervisor's request to end the tree at once.
END_NOW = signal.SIGUSR1
_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWPID = (
    0x00020000, 0x08000000, 0x10000000, 0x20000000)
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_POLL_S = 0.1
_WATCH_EVERY = 5  # polls between two memory sums of the watchdog
_CGROUP_PREFIX = "arena-tree-"
#: the supervisor's command: this file, run in isolated mode. It needs nothing but the
#: standard library, so it runs the same whatever the tree's environment (a check's has no
#: PYTHONPATH) and whichever interpreter the tree itself uses.
_SUPERVISOR = [sys.executable, "-I", str(Path(__file__).resolve())]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(_libc().mount(source.encode(), target.encode(),
                         fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                         data.encode() if data else None), f"mount {target}")


def _prctl(option: int, value: int) -> None:
    _check(_libc().prctl(option, value, 0, 0, 0), "prctl")


# ---- process trees ----------------------------------------------------------------------


def _parents() -> dict[int, int]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            found[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found, pending = [], list(children.get(root, []))
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def _pss_bytes(pid: int) -> int:
    """Proportional memory of ``pid`` (shared pages split between sharers); RSS where
    ``smaps_rollup`` is missing."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def tree_memory(root: int) -> int:
    """Bytes used by the processes below ``root`` together."""
    return sum(_pss_bytes(pid) for pid in descendants(root))


def _kill_below(root: int) -> dict[int, int]:
    """SIGKILL everything below ``root`` until nothing is left (orphans of a subreaper
    come back to it as children, and are reaped here); returns the reaped children's
    wait statuses."""
    reaped: dict[int, int] = {}
    for _ in range(200):
        below = descendants(root)
        for pid in below:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        reaped.update(_reap_all())
        if not below:
            break
        time.sleep(0.01)
    return reaped


def _reap_all() -> dict[int, int]:
    """Reap every child that has ended; returns their wait statuses."""
    reaped = {}
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reaped[pid] = status
    return reaped


# ---- cgroups ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CgroupParent:
    """Folders under which the server may create one cgroup per tree: one folder for v2,
    the ``memory`` (and ``pids``) hierarchies' for v1."""

    version: int
    folders: tuple[Path, ...]

    def tree(self, supervisor: int) -> TreeCgroup:
        return TreeCgroup(self.version, tuple(f / f"{_CGROUP_PREFIX}{supervisor}"
                                              for f in self.folders))


@dataclass(frozen=True)
class TreeCgroup:
    """The cgroup (one folder per v1 hierarchy) of one supervised tree."""

    version: int
    folders: tuple[Path, ...]

    def _file(self, name: str) -> Path | None:
        for folder in self.folders:
            if (folder / name).exists():
                return folder / name
        return None

    def create(self, memory_bytes: int | None, max_processes: int | None) -> None:
        for folder in self.folders:
            folder.mkdir()
        if self.version == 2:
            settings = {"memory.max": memory_bytes, "memory.swap.max": 0 if memory_bytes else None,
                        "memory.oom.group": 1, "pids.max": max_processes}
        else:
            settings = {"memory.limit_in_bytes": memory_bytes, "pids.max": max_processes}
        for name, value in settings.items():
            path = self._file(name)
            if value is not None and path is not None:
                path.write_text(str(value))

    def join(self, pid: int) -> None:
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(pid))

    def members(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
        return found

    def oom_kills(self) -> int:
        """How many processes the kernel killed at the memory limit."""
        path = self._file("memory.events" if self.version == 2 else "memory.oom_control")
        try:
            for line in path.read_text().splitlines() if path else []:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def peak_bytes(self) -> int | None:
        path = self._file("memory.peak" if self.version == 2 else "memory.max_usage_in_bytes")
        try:
            return int(path.read_text()) if path else None
        except (OSError, ValueError):
            return None

    def kill_and_remove(self) -> None:
        """SIGKILL every member, then remove the folders (a folder with members stays)."""
        for _ in range(200):
            members = self.members()
            if not members:
                break
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            _reap_all()
            time.sleep(0.01)
        for folder in self.folders:
            with contextlib.suppress(OSError):
                folder.rmdir()


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
        if self.mode == NONE:
            return ("job and check processes are not contained (not Linux): what they start"
                    " may outlive them")
        how = ("in their own PID, mount and IPC namespaces, with a private /dev/shm"
               if self.mode == NAMESPACES else
               f"under a subreaper that kills their descendants (no namespaces: {self.why_not};"
               " /dev/shm is hidden from sandboxed processes)")
        limits = (f"cgroup v{self.cgroup.version}" if self.cgroup is not None else
                  "a memory watchdog and RLIMIT_NPROC (no writable cgroup)")
        return f"job and check process trees run {how}; their memory limit holds through {limits}"

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
        if self.cgroup is not None:
            self.cgroup.tree(pid).kill_and_remove()


def running(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


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


# ---- the supervisor ---------------------------------------------------------------------


def _enter_namespaces() -> None:
    """Unshare PID and IPC namespaces (and the user namespace when not root: the same user
    id inside, so files keep their owner). The mount namespace is the init's alone
    (:func:`_private_mounts`): the supervisor keeps seeing the machine's ``/proc``."""
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWPID | _CLONE_NEWIPC | (_CLONE_NEWUSER if uid else 0)
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")
    if uid:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def _private_mounts(shm_bytes: int) -> None:
    _check(_libc().unshare(ctypes.c_int(_CLONE_NEWNS)), "unshare")
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here leaks out
    _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV,
           f"size={max(1 << 20, shm_bytes)},mode=1777")
    with contextlib.suppress(OSError):  # refused in some containers: processes stay hidden
        _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def _exec(command: list[str]) -> None:
    # as subprocess does: Python ignores SIGPIPE and SIGXFSZ, and an ignore survives exec
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, END_NOW, signal.SIGPIPE,
                signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"arena supervisor: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
    os._exit(127)


def _init(command: list[str], shm_bytes: int, status_fd: int) -> None:
    """PID 1 of the tree's namespace: start the command, reap orphans, and leave with the
    command (the kernel then kills the rest of the namespace)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor's death ends the namespace
    _private_mounts(shm_bytes)
    child = os.fork()
    if child == 0:
        os.close(status_fd)
        _exec(command)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    while True:
        pid, status = os.wait()
        if pid == child:
            os.write(status_fd, status.to_bytes(4, "little", signed=True))
            os._exit(0)


def _limit_processes(max_processes: int) -> None:
    """RLIMIT_NPROC counts all of the user's processes: allow ``max_processes`` more than
    it has now (root is not held to it)."""
    uid = os.getuid()
    now = sum(1 for e in os.listdir("/proc") if e.isdigit() and _owner(e) == uid)
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    want = now + max_processes
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (want, hard))


def _owner(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


@dataclass
class _Watch:
    """What the supervisor's loop watches and decided."""

    memory_bytes: int | None
    cgroup: TreeCgroup | None
    ending: bool = False
    over_memory: bool = False
    peak_bytes: int = 0
    polls: int = 0

    def over(self) -> bool:
        if self.memory_bytes is None:
            return False
        if self.cgroup is not None:
            return self.cgroup.oom_kills() > 0
        self.polls += 1
        if self.polls % _WATCH_EVERY:
            return False
        used = tree_memory(os.getpid())
        self.peak_bytes = max(self.peak_bytes, used)
        return used > self.memory_bytes


def _child(args: argparse.Namespace, command: list[str], cgroup: TreeCgroup | None,
           status_w: int) -> None:
    try:
        if cgroup is not None:
            cgroup.join(os.getpid())
        elif args.max_processes:
            _limit_processes(args.max_processes)
        if args.mode == NAMESPACES:
            _init(command, args.shm_bytes, status_w)
        _exec(command)
    except BaseException as exc:  # noqa: BLE001 - report anything, never return to the caller
        print(f"arena supervisor: cannot start the tree: {exc}", file=sys.stderr)
    os._exit(126)


def _start(args: argparse.Namespace, command: list[str], cgroup: TreeCgroup | None
           ) -> tuple[int, int]:
    """Fork the tree's first process; returns (its pid, the read end of the status pipe)."""
    status_r, status_w = os.pipe()
    if args.mode == NAMESPACES:
        _enter_namespaces()
    else:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    child = os.fork()
    if child == 0:
        os.close(status_r)
        _child(args, command, cgroup, status_w)
    os.close(status_w)
    return child, status_r


def _supervise(args: argparse.Namespace, command: list[str]) -> int:
    cgroup = None
    if args.cgroup:
        cgroup = TreeCgroup(args.cgroup_version,
                            tuple(Path(f) / f"{_CGROUP_PREFIX}{os.getpid()}" for f in args.cgroup))
        cgroup.create(args.memory_bytes, args.max_processes)
    watch = _Watch(args.memory_bytes, cgroup)
    child, status_r = _start(args, command, cgroup)

    def end_now(_s: int, _f: object) -> None:
        watch.ending = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    signal.signal(END_NOW, end_now)
    status = None
    while status is None:
        # the subreaper reaps its adopted orphans too; the namespace's init reaps its own
        status = _reap_all().get(child)
        if status is None and (watch.ending or watch.over()):
            watch.over_memory = not watch.ending
            status = _kill_below(os.getpid()).get(child)
        if status is None:
            time.sleep(_POLL_S)
    _kill_below(os.getpid())
    if args.mode == NAMESPACES:
        data = os.read(status_r, 4)
        status = int.from_bytes(data, "little", signed=True) if len(data) == 4 else status
    if cgroup is not None:
        watch.over_memory = watch.over_memory or cgroup.oom_kills() > 0
        watch.peak_bytes = cgroup.peak_bytes() or watch.peak_bytes
        cgroup.kill_and_remove()
    if watch.over_memory and args.memory_bytes:
        print(f"{MEMORY_LIMIT_HIT}: the processes together used more than the memory limit of"
              f" {args.memory_bytes / 2**20:.0f} MiB and were ended", file=sys.stderr, flush=True)
    return _leave_as(status)


def _leave_as(status: int) -> int:
    """Exit as the command did: with its exit code, or killed by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _probe() -> int:
    """Exit 0 when a tree can be started in namespaces with a private /dev/shm."""
    try:
        _enter_namespaces()
    except OSError as exc:
        print(exc, file=sys.stderr)
        return 1
    child = os.fork()
    if child == 0:
        try:
            _private_mounts(1 << 20)
            os._exit(0)
        except OSError as exc:
            print(exc, file=sys.stderr, flush=True)
            os._exit(1)
    _, status = os.waitpid(child, 0)
    return 0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agilerl.arena.server.containment")
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--mode", choices=(NAMESPACES, SUBREAPER), default=SUBREAPER)
    parser.add_argument("--memory-bytes", type=int)
    parser.add_argument("--max-processes", type=int)
    parser.add_argument("--shm-bytes", type=int, default=64 << 20)
    parser.add_argument("--cgroup-version", type=int, choices=(1, 2), default=1)
    parser.add_argument("--cgroup", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.probe:
        return _probe()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    try:
        return _supervise(args, command)
    except OSError as exc:
        print(f"arena supervisor: cannot contain the process tree: {exc}", file=sys.stderr)
        return 126


if __name__ == "__main__":
    sys.exit(main())
