"""Confine a job's file access with Linux Landlock, then run it.

    python -m agilerl.arena.server.sandbox --hide DATA_DIR --write EXP_DIR [--write D ...]
                                           [--read D ...] -- COMMAND [ARG ...]

Jobs run as the server's user, so file permissions alone cannot keep them from the data
folder (signing secret, database, other users' runs). Landlock, an unprivileged Linux
security module (kernel 5.13+), lets a process give up access for itself and everything
it starts: this wrapper keeps read and execute access to the whole file system except the
``--hide`` folders, read-write access to the ``--write`` folders (the experiment folder,
which lies inside the hidden data folder) and to ``/dev``, read access to the ``--read``
folders (an uploaded environment's source and virtual environment, also inside the
hidden folder), then ``exec``s the job. The
restriction cannot be lifted by the job, covers its child processes, and also stops it
from tracing (reading the memory of) processes outside it, such as the server.

Where the kernel has Landlock ABI 6 or later, the job is also *scoped*: it cannot signal
a process outside its Landlock domain (another user's trainer, the server), nor connect
to an abstract Unix socket created outside it. A ``--hide`` folder below ``/dev`` (the
shared ``/dev/shm`` where the job has no private one, :mod:`.containment`) is left out of
the ``/dev`` write grant too.

Not covered: a hidden folder reachable by another path (a bind mount or a hard link
elsewhere), and network access. :func:`landlock_abi` is 0 where the kernel lacks Landlock;
the server then runs jobs unconfined and says so when it starts.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_WRITE_TREE = sum(1 << bit for bit in range(4, 13))  # remove, make dir/file/sock/fifo/...
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
#: rights a rule on a file (not a directory) may carry.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
_READ = EXECUTE | READ_FILE | READ_DIR
#: ABI 6 scopes: abstract Unix sockets and signals stay within the Landlock domain.
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
_SCOPED_ABI = 6


class _RulesetAttr(ctypes.Structure):
    # the kernel reads as many fields as the size passed says: older kernels only the first
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class SandboxError(OSError):
    """Landlock is unavailable or refused the ruleset."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                              ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _handled(abi: int) -> int:
    rights = _READ | WRITE_FILE | _WRITE_TREE
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _fail(what: str) -> SandboxError:
    err = ctypes.get_errno()
    return SandboxError(err, f"landlock: {what}: {os.strerror(err)}")


class _Ruleset:
    def __init__(self, abi: int) -> None:
        self.libc = _libc()
        self.handled = _handled(abi)
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= _SCOPED_ABI else 0
        attr = _RulesetAttr(self.handled, 0, scoped)
        size = ctypes.sizeof(attr) if scoped else _RulesetAttr.handled_access_fs.size
        fd = self.libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr),
                               ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise _fail("create ruleset")
        self.fd = int(fd)

    def allow(self, path: Path, rights: int) -> None:
        """Grant ``rights`` on ``path`` and below (file rights only for a file)."""
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return  # vanished or unreadable: nothing to grant
        try:
            if not os.path.isdir(f"/proc/self/fd/{target}"):
                rights &= _FILE_RIGHTS
            rule = _PathBeneathAttr(rights & self.handled, target)
            if self.libc.syscall(_SYS_ADD_RULE, ctypes.c_int(self.fd),
                                 ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                                 ctypes.c_uint32(0)) < 0:
                raise _fail(f"add rule for {path}")
        finally:
            os.close(target)

    def enforce(self) -> None:
        if self.libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("no_new_privs")
        if self.libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0)) < 0:
            raise _fail("restrict self")
        os.close(self.fd)


def _around(hidden: list[Path], top: Path = Path("/")) -> list[Path]:
    """Paths whose hierarchies together cover ``top`` except ``hidden``.

    Walks from ``top`` towards each hidden folder below it; at every folder on the way,
    each entry that does not lead to a hidden folder is granted whole. Symbolic links are
    skipped: a path through one is checked where it leads.
    """
    on_the_way = {a for h in hidden for a in (h, *h.parents)}
    if top not in on_the_way:
        return [top]
    granted: list[Path] = []
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if path in hidden or entry.is_symlink():
                continue
            (pending if path in on_the_way else granted).append(path)
    return granted


def confine(hide: list[Path], write: list[Path], read: list[Path] | None = None) -> None:
    """Restrict this process (and what it starts) as the module docstring describes.

    :raises SandboxError: when Landlock is unavailable or refuses a rule.
    """
    abi = landlock_abi()
    if abi < 1:
        raise SandboxError(0, "landlock is not available on this kernel")
    hidden = [Path(os.path.realpath(p)) for p in hide]
    rules = _Ruleset(abi)
    for path in [*_around(hidden), *(Path(os.path.realpath(p)) for p in read or [])]:
        rules.allow(path, _READ)
    everything = rules.handled
    for path in (*write, Path("/dev")):
        for part in _around(hidden, Path(os.path.realpath(path))):
            rules.allow(part, everything)
    rules.enforce()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agilerl.arena.server.sandbox")
    parser.add_argument("--hide", type=Path, action="append", default=[])
    parser.add_argument("--write", type=Path, action="append", default=[])
    parser.add_argument("--read", type=Path, action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    return confine_and_exec("arena job sandbox", args.hide, args.write, args.read, command)


def confine_and_exec(label: str, hide: list[Path], write: list[Path],
                     read: list[Path] | None, command: list[str],
                     *, landlock: bool = True) -> int:
    """Confine this process (unless ``landlock`` is False), then replace it with ``command``;
    returns only on failure: 126 when confinement fails, 127 when ``command`` cannot run."""
    if landlock:
        try:
            confine(hide, write, read)
        except SandboxError as exc:
            print(f"{label}: {exc}", file=sys.stderr)
            return 126
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"{label}: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())
