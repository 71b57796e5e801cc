"""Each uploaded environment gets its own virtual environment.

The venv is made with ``python -m venv --without-pip`` (tens of milliseconds, nothing
downloaded) and a ``.pth`` file that adds the server's own site folders after the venv's,
so ``agilerl``, ``gymnasium``, ``numpy`` and ``torch`` come from the server while packages
the environment's ``requirements.txt`` installs into the venv take precedence. pip itself
is the server's (found through that same ``.pth``); it installs into the venv because it
runs with the venv's interpreter, and it never removes a package outside it.

Requirements are package specifiers only (``name[extra]>=1.0; marker``): options, local
paths and URLs are refused, so a requirements file cannot point pip at other files on the
server. pip runs with a time limit, confined by Landlock where the kernel has it (it may
write only to the venv and its scratch folder), and the venv's size is checked afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import agilerl
from agilerl.arena.server import nofollow
from agilerl.arena.server.passed_env import passed_env
from agilerl.arena.server.quota import disk_usage

if TYPE_CHECKING:
    from agilerl.arena.server.env_validation import ProcessGroups

SERVER_PTH = "_agilerl_server_site.pth"
_CREATE_TIMEOUT_S = 120
#: server variables pip may see (besides the job allow-list): its configuration and proxies.
_PIP_ENV = re.compile(r"^(PIP_[A-Z_]+|(HTTPS?|NO|ALL)_PROXY|(https?|no|all)_proxy|HOME)$")


class InstallError(Exception):
    """Installing the environment's requirements failed; the message says why."""


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def server_site_dirs() -> list[str]:
    """The site folders this server's interpreter uses (its venv's, and the system's if
    that venv includes them)."""
    dirs = [p for p in site.getsitepackages() if os.path.isdir(p)]
    user = site.getusersitepackages()
    if site.ENABLE_USER_SITE and os.path.isdir(user):
        dirs.append(user)
    return dirs


def _site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python*/site-packages"))
    if not found:
        raise InstallError(f"the new virtual environment at {venv} has no site-packages")
    return found[0]


def create_venv(venv: Path) -> None:
    """A fresh venv at ``venv`` that sees the server's packages after its own."""
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                       check=True, capture_output=True, text=True, timeout=_CREATE_TIMEOUT_S)
    except subprocess.CalledProcessError as exc:
        raise InstallError(f"could not create a virtual environment: {exc.stderr.strip()}"
                           ) from None
    except subprocess.TimeoutExpired:
        raise InstallError("creating the virtual environment timed out") from None
    # ``import`` lines of a .pth run at start-up; addsitedir also reads the .pth files of
    # those folders (editable installs of agilerl live there). A server run from a source
    # checkout finds agilerl in the checkout: that folder comes last.
    dirs = server_site_dirs()
    lines = [f"import site; site.addsitedir({d!r})" for d in dirs]
    root = str(Path(agilerl.__file__).resolve().parents[1])
    if root not in dirs:
        lines.append(root)
    (_site_packages(venv) / SERVER_PTH).write_text("\n".join(lines) + "\n")


def parse_requirements(text: str) -> list[str]:
    """The specifiers of a requirements file; refuses anything but ``name[extras] spec``.

    :raises InstallError: naming the line.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    found = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise InstallError(f"requirements.txt line {number}: options such as '{line.split()[0]}'"
                               " are not accepted; list package names with versions only")
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise InstallError(f"requirements.txt line {number}: '{line}' is not a package"
                               f" specifier ({exc})") from None
        if req.url:
            raise InstallError(f"requirements.txt line {number}: direct references"
                               f" ('{req.name} @ {req.url}') are not accepted; name a"
                               " package from the package index")
        found.append(str(req))
    return found


def _pip_env(scratch: Path) -> dict[str, str]:
    env = passed_env() | {k: v for k, v in os.environ.items() if _PIP_ENV.match(k)}
    env.update(TMPDIR=str(scratch), PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    return env


def install(venv: Path, requirements: list[str], scratch: Path, *, timeout_s: float,
            max_bytes: int, confine: list[str], groups: ProcessGroups | None = None,
            cancel: threading.Event | None = None) -> Iterator[str]:
    """pip-install ``requirements`` into ``venv``, yielding pip's output lines.

    ``confine`` is the Landlock wrapper prefix (empty: unconfined); setting ``cancel``
    stops pip.

    :raises InstallError: pip failed, ran past ``timeout_s``, or the venv grew past
        ``max_bytes``.
    """
    req_file = scratch / "requirements.txt"
    try:
        # code an earlier install ran (a setup.py) could write scratch/: a link it left
        # there is replaced, never written through
        nofollow.write_atomic(scratch.parent, f"{scratch.name}/requirements.txt",
                              ("\n".join(requirements) + "\n").encode())
    except OSError as exc:
        raise InstallError(f"cannot write requirements.txt in the scratch folder: {exc}"
                           ) from None
    cmd = [*confine, str(venv_python(venv)), "-m", "pip", "install", "--no-cache-dir",
           "--progress-bar", "off", "--no-warn-script-location", "-r", str(req_file)]
    proc = subprocess.Popen(cmd, cwd=scratch, env=_pip_env(scratch), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)
    if groups is not None:
        groups.add(proc.pid)
    stop = cancel if cancel is not None else threading.Event()
    done = threading.Event()
    # ends pip at the time limit, or as soon as ``stop`` is set
    watcher = threading.Thread(target=_watch, args=(proc, stop, done, timeout_s), daemon=True)
    started = time.monotonic()
    watcher.start()
    tail: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            text = line.rstrip()
            if text:
                tail = (tail + [text])[-5:]
                yield text
        code = proc.wait()
    finally:
        done.set()
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
        if groups is not None:
            groups.discard(proc.pid)
    if stop.is_set():
        raise InstallError("the request was cancelled")
    if time.monotonic() - started >= timeout_s and code != 0:
        raise InstallError(f"installing the requirements took longer than the limit of"
                           f" {timeout_s:g} s")
    if code != 0:
        raise InstallError(f"pip exited with code {code}: " + " | ".join(tail)[-800:])
    size = disk_usage(venv)  # measured as the disk quota measures it
    if size > max_bytes:
        raise InstallError(f"the virtual environment takes {size / 2**20:.0f} MiB after"
                           f" installing, over this server's limit of {max_bytes / 2**20:.0f}"
                           " MiB")


def _watch(proc: subprocess.Popen[str], stop: threading.Event, done: threading.Event,
           timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done.is_set() and time.monotonic() < deadline:
        if stop.wait(min(0.25, max(0.0, deadline - time.monotonic()))):
            break
    if not done.is_set():
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """End pip and everything it started (:mod:`.containment`)."""
    from agilerl.arena.server.containment import probe

    probe().end(proc.pid)


def copy_venv(source: Path, dest: Path) -> None:
    """Copy a venv (its interpreter stays a link to the same base Python)."""
    shutil.copytree(source, dest, symlinks=True)
