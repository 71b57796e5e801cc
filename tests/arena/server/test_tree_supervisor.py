"""The process-tree supervisor on its own: it exits as its command did, and ends the whole
tree (``setsid()`` children included) when the command exits or when told to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agilerl.arena.server.containment import NAMESPACES, SUBREAPER, Containment, probe
from agilerl.arena.server.tree_supervisor import MEMORY_LIMIT_HIT

from .attacks.test_containment import _gone, _pids_with

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

MODES = [SUBREAPER] + ([NAMESPACES] if probe().mode == NAMESPACES else [])


def _run(mode: str, script: str, **limits: int) -> subprocess.Popen[str]:
    prefix = Containment(mode).prefix(**limits)
    return subprocess.Popen([*prefix, sys.executable, "-c", script], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _orphan(marker: str) -> str:
    return ("import os, signal, subprocess, sys\n"
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)', "
            f"'{marker}'], start_new_session=True)\n")


@pytest.mark.parametrize("mode", MODES)
def test_the_supervisor_exits_as_its_command_did(mode: str) -> None:
    assert _run(mode, "import sys; sys.exit(7)").wait(timeout=30) == 7
    assert _run(mode, "import os; os.kill(os.getpid(), 15)").wait(timeout=30) == -15


@pytest.mark.parametrize("mode", MODES)
def test_a_setsid_child_ends_with_the_command(mode: str) -> None:
    marker = f"arena-orphan-{uuid.uuid4().hex}"
    proc = _run(mode, _orphan(marker) + "import time; time.sleep(1)\n")
    try:
        assert proc.wait(timeout=30) == 0
        assert _gone(marker, timeout=5)
    finally:
        for pid in _pids_with(marker):
            subprocess.run(["kill", "-9", str(pid)], check=False)


@pytest.mark.parametrize("mode", MODES)
def test_sigterm_is_passed_on_and_sigusr1_ends_the_tree(mode: str) -> None:
    marker = f"arena-orphan-{uuid.uuid4().hex}"
    script = _orphan(marker) + ("import signal, time\nsignal.signal(signal.SIGTERM,"
                                " signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(600)\n")
    proc = _run(mode, script)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        proc.send_signal(signal.SIGTERM)  # the command ignores it: nothing ends
        time.sleep(0.5)
        assert proc.poll() is None
        started = time.monotonic()
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert time.monotonic() - started < 5 and _gone(marker, timeout=5)
    finally:
        proc.kill()
        for pid in _pids_with(marker):
            subprocess.run(["kill", "-9", str(pid)], check=False)


def test_the_watchdog_ends_a_forking_tree_past_its_memory_cap() -> None:
    script = ("import os, time\n"
              "for _ in range(3):\n"
              "    if os.fork() == 0:\n"
              "        b = bytearray(100 << 20)\n"
              "        b[::4096] = b'1' * len(b[::4096])\n"
              "        time.sleep(60)\n"
              "time.sleep(60)\n")
    proc = _run(SUBREAPER, script, memory_bytes=200 << 20)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert err.startswith(MEMORY_LIMIT_HIT) and "200 MiB" in err, err


def test_a_delegated_cgroup_v2_is_found_and_read(tmp_path: Path) -> None:
    """Where the server's cgroup v2 offers the memory controller, the server moves into a
    leaf of its own and hands memory and pids to the trees' cgroups beside it."""
    from agilerl.arena.server.containment import _v1_parent, _v2_parent
    from agilerl.arena.server.tree_supervisor import tree_cgroup

    own = tmp_path / "service"
    own.mkdir()
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("\n")
    mounts = [(str(tmp_path), "cgroup2", {"rw"})]
    found = _v2_parent(mounts, {"": "/service"})
    assert found is not None and found.version == 2 and found.folders == (own,)
    assert (own / "arena-server" / "cgroup.procs").read_text() == str(os.getpid())
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert _v1_parent(mounts, {"": "/service"}) is None  # no v1 memory hierarchy here
    tree = tree_cgroup(2, found.folders, 1234)
    assert tree.folders == (own / "arena-tree-1234",)
    tree.folders[0].mkdir()
    (tree.folders[0] / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    assert tree.oom_kills() == 2
    (own / "cgroup.controllers").write_text("cpu pids\n")  # memory not delegated
    assert _v2_parent(mounts, {"": "/service"}) is None
