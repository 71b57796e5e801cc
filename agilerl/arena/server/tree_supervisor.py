"""The supervisor of one job's or check's process tree (run by the server, see
:mod:`.containment`, which chooses the mode and explains the design).

    python -I agilerl/arena/server/tree_supervisor.py --mode MODE [--memory-bytes N]
        [--max-processes N] [--shm-bytes N] [--cgroup-version V --cgroup DIR ...]
        -- COMMAND [ARG ...]

``pid-namespace``: unshare PID and IPC namespaces (and the user namespace when not root),
fork the namespace's init, which makes its own mount namespace (private ``/dev/shm`` and
``/proc``), starts ``COMMAND``, reaps orphans and exits with the command, so the kernel
kills the rest of the namespace. ``subreaper``: become a child subreaper, start
``COMMAND``, and kill every descendant once it exits. Either way, with ``--cgroup`` the
tree runs in a cgroup of its own (created under each ``DIR``, removed at the end) that
caps its memory and processes; without, a watchdog sums the tree's PSS and
``RLIMIT_NPROC`` caps processes. Past the memory limit the tree is killed and the
supervisor prints :data:`MEMORY_LIMIT_HIT` on stderr.

Signals: SIGTERM, SIGINT and SIGHUP are passed to the command (a graceful stop);
:data:`END_NOW` kills the tree at once. The supervisor exits as the command did (its
code, or its signal). This file needs only the standard library: the server runs it in
isolated mode (``-I``), whatever the tree's environment.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass
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
#: signals the supervisor and the init pass on to the command (a graceful stop)
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: a tree's cgroup is this folder name plus its supervisor's pid, under each parent folder
CGROUP_PREFIX = "arena-tree-"


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



def tree_cgroup(version: int, parents: list[Path] | tuple[Path, ...], supervisor: int
                ) -> TreeCgroup:
    """The cgroup of the tree supervised by ``supervisor``, under ``parents``."""
    return TreeCgroup(version, tuple(Path(p) / f"{CGROUP_PREFIX}{supervisor}" for p in parents))


def running(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


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
    for sig in (*_FORWARDED, END_NOW, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (*_FORWARDED, END_NOW))  # a mask survives exec
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"arena supervisor: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
    os._exit(127)


def _release_stdio() -> None:
    """Hand the tree's stdin and stdout to the command alone (stderr stays, for this
    module's own messages): a reader then sees the end of the command's output when the
    command closes it, not only when its supervisor and init exit."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)


def _init(command: list[str], shm_bytes: int, status_fd: int) -> None:
    """PID 1 of the tree's namespace: start the command, reap orphans, and leave with the
    command (the kernel then kills the rest of the namespace)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor's death ends the namespace
    _private_mounts(shm_bytes)
    child = os.fork()
    if child == 0:
        os.close(status_fd)
        _exec(command)
    _release_stdio()
    for sig in _FORWARDED:
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
    while True:
        pid, status = os.wait()
        if pid == child:
            os.write(status_fd, status.to_bytes(4, "little", signed=True))
            os._exit(0)


def _limit_processes(max_processes: int, own_user_namespace: bool) -> None:
    """Cap the tree's processes with RLIMIT_NPROC (root is not held to it). The kernel
    counts a user's processes per user namespace: in the tree's own, the tree's alone
    (and its init); elsewhere all of the user's, so allow ``max_processes`` more than now."""
    uid = os.getuid()
    now = 1 if own_user_namespace else sum(
        1 for e in os.listdir("/proc") if e.isdigit() and _owner(e) == uid)
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
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
            _limit_processes(args.max_processes,
                             own_user_namespace=args.mode == NAMESPACES and os.geteuid() != 0)
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
    # held until each process has its handlers: a stop during start-up is passed on, not lost
    signal.pthread_sigmask(signal.SIG_BLOCK, (*_FORWARDED, END_NOW))
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
        cgroup = tree_cgroup(args.cgroup_version, args.cgroup, os.getpid())
        cgroup.create(args.memory_bytes, args.max_processes)
    watch = _Watch(args.memory_bytes, cgroup)
    try:
        child, status_r = _start(args, command, cgroup)
    except OSError:
        if cgroup is not None:  # nothing was started in it
            cgroup.kill_and_remove()
        raise
    _release_stdio()

    def end_now(_s: int, _f: object) -> None:
        watch.ending = True

    for sig in _FORWARDED:
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    signal.signal(END_NOW, end_now)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (*_FORWARDED, END_NOW))
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
        peak = f" (peak {watch.peak_bytes / 2**20:.0f} MiB)" if watch.peak_bytes else ""
        print(f"{MEMORY_LIMIT_HIT}: the processes together used more than the memory limit of"
              f" {args.memory_bytes / 2**20:.0f} MiB{peak} and were ended", file=sys.stderr,
              flush=True)
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
    parser = argparse.ArgumentParser(prog="tree_supervisor.py")
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
