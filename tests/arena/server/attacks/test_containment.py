"""A job or check stays inside its own process tree: it cannot signal or connect to
processes outside it, nothing it starts outlives it (``setsid()`` children included, with
and without resume), its memory cap holds for the whole tree, and its ``/dev/shm`` is its
own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agilerl.arena.server import scheduler
from agilerl.arena.server.containment import SUBREAPER, Containment, probe
from agilerl.arena.server.sandbox import landlock_abi
from agilerl.arena.server.testing import create_token, server_process

from ..conftest import Api, manifest, ndjson
from ..envsources import LINE_WORLD
from ..test_custom_envs import last, upload

#: a hostile job; its first argument picks what it does, its experiment folder (cwd) its
#: role where two jobs of one server play different parts.
HOSTILE = r'''
import errno, json, os, signal, socket, sys, time

def orphan(marker):
    """A grandchild in its own session that ignores SIGTERM and keeps stdout open."""
    marker += "-exp" + os.path.basename(os.getcwd())
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)",
                                      marker])
        os._exit(0)
    os.wait()

def attempt(how):
    try:
        how()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

mode, arg = sys.argv[1], sys.argv[2]
if mode == "orphan":  # leave a child behind, then finish
    orphan(arg)
    print("trainer done", flush=True)
elif mode == "orphan_then_wait":
    orphan(arg)
    print("waiting", flush=True)
    time.sleep(600)
elif mode == "resume":  # the first attempt waits (to be interrupted), the next one finishes
    first = not os.path.exists("attempt-1")
    open("attempt-1", "a").close()
    orphan(arg)
    print("attempt started", flush=True)
    if first:
        time.sleep(600)
elif mode == "signals" and os.path.basename(os.getcwd()) == "1":  # the victim
    print("victim up", flush=True)
    time.sleep(600)
elif mode == "signals":  # the attacker: arg names a file with its targets
    for _ in range(400):
        if os.path.exists(arg):
            break
        time.sleep(0.05)
    with open(arg) as fh:
        targets = json.load(fh)
    seen = {name: attempt(lambda pid=pid: os.kill(pid, signal.SIGKILL))
            for name, pid in targets["kill"].items()}
    seen["server_signal_0"] = attempt(lambda: os.kill(targets["server"], 0))
    def connect():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect("\0" + targets["socket"])
    seen["abstract_socket"] = attempt(connect)
    print(json.dumps(seen), flush=True)
elif mode == "shm":  # write a file in /dev/shm, then past the size limit
    path = "/dev/shm/arena-" + arg
    with open(path, "wb") as fh:
        fh.write(b"x" * 1000)
    seen = {"listing": sorted(os.listdir("/dev/shm"))}
    def fill():
        with open(path + "-big", "wb") as fh:
            for _ in range(64):
                fh.write(b"x" * (1 << 20))
    seen["fill"] = attempt(fill)
    os.unlink(path + "-big")
    import multiprocessing as mp  # semaphores and shared arrays live in /dev/shm
    box = mp.Array("d", 4)
    def work(a):
        a[0] = 42.0
    p = mp.get_context("fork").Process(target=work, args=(box,))
    p.start(); p.join()
    seen["shared_array"] = box[0]
    print(json.dumps(seen), flush=True)
elif mode == "shm_denied":  # the machine's /dev/shm, hidden by the sandbox
    def write():
        with open("/dev/shm/arena-" + arg, "wb") as fh:
            fh.write(b"x")
    print(json.dumps({"write": attempt(write), "list": attempt(lambda: os.listdir("/dev/shm"))}),
          flush=True)
elif mode == "memory":  # children that together pass the cap, each one below it
    n, each = (int(x) for x in arg.split("x"))
    for _ in range(n):
        if os.fork() == 0:
            hog = bytearray(each)
            for i in range(0, each, 4096):
                hog[i] = 1
            time.sleep(600)
    time.sleep(20)
    print("all children allocated", flush=True)
'''


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE)
    return path


def _job(tmp_path: Path, mode: str, arg: str) -> list[str]:
    return [sys.executable, str(_script(tmp_path)), mode, arg]


def _pids_with(word: str) -> list[int]:
    """Live processes with an argument that starts with ``word``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if any(arg.startswith(word.encode()) for arg in argv) and state != "Z":
            found.append(int(entry))
    return found


def _gone(word: str, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while _pids_with(word):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _cleanup(word: str) -> None:
    for pid in _pids_with(word):
        os.kill(pid, signal.SIGKILL)


def _without_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs run as where namespaces and cgroups are refused: a subreaper and a watchdog."""
    monkeypatch.setattr(scheduler, "for_jobs",
                        lambda on_ray_cluster: Containment(SUBREAPER, why_not="test"))


@pytest.fixture(params=["probed", SUBREAPER])
def tree(request: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Jobs contained as this machine allows, then as where namespaces and cgroups are
    refused (a subreaper, a memory watchdog)."""
    if request.param == SUBREAPER:
        _without_namespaces(monkeypatch)
    return str(request.param)


def _json_line(api: Api, name: str) -> dict[str, Any]:
    lines = [e["message"] for e in api.logs(name) if e["kind"] == "log"]
    return dict(json.loads(next(line for line in lines if line.startswith("{"))))


def test_a_setsid_child_does_not_keep_a_job_running(make_server: Any, tmp_path: Path,
                                                    tree: str) -> None:
    marker = f"arena-orphan-{uuid.uuid4().hex}"
    _, api = make_server(job_command=_job(tmp_path, "orphan", marker), slots=1)
    try:
        started = time.monotonic()
        api.submit(manifest(100), experiment_name="leaves-a-child")
        api.submit(manifest(100), experiment_name="next-in-queue")
        row = api.wait("leaves-a-child", {"COMPLETED", "FAILED"}, timeout=20)
        took = time.monotonic() - started
        assert row["state"] == "COMPLETED", row
        assert _gone(marker), "the setsid() child outlived its job"
        assert api.wait("next-in-queue", {"COMPLETED", "FAILED"})["state"] == "COMPLETED"
        print(f"setsid child: job ended {took:.2f} s after submission")
    finally:
        _cleanup(marker)


def test_stop_ends_a_job_and_its_setsid_child(make_server: Any, tmp_path: Path,
                                              tree: str) -> None:
    marker = f"arena-orphan-{uuid.uuid4().hex}"
    _, api = make_server(job_command=_job(tmp_path, "orphan_then_wait", marker), slots=1)
    try:
        api.submit(manifest(100), experiment_name="stopped")
        api.submit(manifest(100), experiment_name="next-in-queue")
        api.wait("stopped", {"RUNNING"})
        assert _pids_with(marker)
        resp = api.post("/api/cli/v1/experiments/jobs/stop", {"experiment_name": "stopped"})
        assert resp.status_code == 200, resp.text
        assert api.wait("stopped", {"STOPPED", "COMPLETED", "FAILED"},
                        timeout=15)["state"] == "STOPPED"
        assert _gone(f"{marker}-exp1"), "the setsid() child outlived its stopped job"
        api.post("/api/cli/v1/experiments/jobs/stop", {"experiment_name": "next-in-queue"})
    finally:
        _cleanup(marker)


def test_a_resumed_job_and_its_interrupted_attempt_leave_nothing_behind(tmp_path: Path) -> None:
    marker = f"arena-orphan-{uuid.uuid4().hex}"
    data = tmp_path / "data"
    token = create_token(data)
    job = ["--slots", "1", "--stop-grace", "1",
           "--job-command", " ".join(_job(tmp_path, "resume", marker))]
    try:
        with server_process(data, *job) as (base, proc):
            api = Api.__new__(Api)
            import httpx
            api.http = httpx.Client(base_url=base, timeout=30,
                                    headers={"Authorization": f"Bearer {token}"})
            api.submit(manifest(100), experiment_name="resumed")
            api.wait("resumed", {"RUNNING"})
            deadline = time.monotonic() + 10
            while not _pids_with(marker):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)  # the server dies; the run is orphaned
            proc.wait(timeout=10)
            api.close()
        with server_process(data, *job) as (base, _):
            api.http = httpx.Client(base_url=base, timeout=30,
                                    headers={"Authorization": f"Bearer {token}"})
            row = api.wait("resumed", {"COMPLETED", "FAILED"}, timeout=20)
            assert row["state"] == "COMPLETED" and row["attempt"] == 2, row
            assert _gone(marker), "a setsid() child of the first or second attempt survived"
            api.close()
    finally:
        _cleanup(marker)


@pytest.mark.skipif(landlock_abi() < 6, reason="Landlock scopes need ABI 6")
def test_landlock_scopes_refuse_signals_and_abstract_sockets_outside_the_domain(
        tmp_path: Path) -> None:
    """The sandbox wrapper alone (no namespaces) refuses both with EPERM."""
    decoy = subprocess.Popen(["sleep", "600"])
    name = f"arena-test-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(1)
    probe_code = (
        "import errno, os, socket, json\n"
        "seen = {}\n"
        "try:\n"
        f"    os.kill({decoy.pid}, 9); seen['kill'] = 'ok'\n"
        "except OSError as e:\n"
        "    seen['kill'] = errno.errorcode[e.errno]\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect('\\0{name}'); seen['connect'] = 'ok'\n"
        "except OSError as e:\n"
        "    seen['connect'] = errno.errorcode[e.errno]\n"
        "print(json.dumps(seen))\n")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "agilerl.arena.server.sandbox", "--hide", str(tmp_path / "h"),
             "--write", str(tmp_path), "--", sys.executable, "-c", probe_code],
            capture_output=True, text=True, timeout=60, check=True).stdout
        assert json.loads(out) == {"kill": "EPERM", "connect": "EPERM"}
        assert decoy.poll() is None
    finally:
        listener.close()
        decoy.kill()
        decoy.wait()


def test_a_job_cannot_signal_another_users_trainer_or_the_server(make_server: Any,
                                                                 tmp_path: Path) -> None:
    targets = tmp_path / "targets.json"
    script = _job(tmp_path, "signals", str(targets))
    srv, victim_api = make_server(job_command=script, slots=2)
    attacker = Api(srv, create_token(srv.data_dir, "mallory"))
    decoy = subprocess.Popen(["sleep", "600"])  # stands for the server's other processes
    name = f"arena-test-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(1)
    try:
        victim_api.submit(manifest(100), experiment_name="victim")
        victim_api.wait("victim", {"RUNNING"})
        trainer = [p for p in _pids_with(str(_script(tmp_path)))
                   if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[1]
                   == str(_script(tmp_path)).encode()]
        assert len(trainer) == 1, trainer
        attacker.submit(manifest(100), experiment_name="attacker")
        targets.write_text(json.dumps({"kill": {"victim": trainer[0], "decoy": decoy.pid},
                                       "server": os.getpid(), "socket": name}))
        row = attacker.wait("attacker", {"COMPLETED", "FAILED"})
        assert row["state"] == "COMPLETED", row
        seen = _json_line(attacker, "attacker")
        refused = {"EPERM", "ESRCH"}
        assert seen["victim"] in refused and seen["decoy"] in refused, seen
        assert seen["server_signal_0"] in refused, seen
        if landlock_abi() >= 6:
            assert seen["abstract_socket"] == "EPERM", seen
        assert victim_api.status("victim")["state"] == "RUNNING"
        assert decoy.poll() is None
    finally:
        listener.close()
        decoy.kill()
        decoy.wait()
        attacker.close()
        victim_api.post("/api/cli/v1/experiments/jobs/stop", {"experiment_name": "victim"})


@pytest.mark.skipif(probe().mode != "pid-namespace", reason="needs namespaces")
def test_a_job_has_its_own_small_dev_shm(make_server: Any, tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    _, api = make_server(job_command=_job(tmp_path, "shm", marker), shm_bytes=8 << 20)
    api.submit(manifest(100), experiment_name="shm")
    row = api.wait("shm", {"COMPLETED", "FAILED"})
    assert row["state"] == "COMPLETED", (row, api.logs("shm"))
    seen = _json_line(api, "shm")
    assert seen["listing"] == [f"arena-{marker}"], seen  # nothing of anyone else's
    assert seen["fill"] == "ENOSPC" and seen["shared_array"] == 42.0, seen
    assert not Path(f"/dev/shm/arena-{marker}").exists()  # never in the host's /dev/shm


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_without_namespaces_the_shared_dev_shm_is_hidden(make_server: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _without_namespaces(monkeypatch)
    marker = uuid.uuid4().hex
    _, api = make_server(job_command=_job(tmp_path, "shm_denied", marker))
    api.submit(manifest(100), experiment_name="shm")
    assert api.wait("shm", {"COMPLETED", "FAILED"})["state"] == "COMPLETED"
    assert _json_line(api, "shm") == {"write": "EACCES", "list": "EACCES"}
    assert not Path(f"/dev/shm/arena-{marker}").exists()


def test_a_jobs_memory_cap_holds_for_its_whole_process_tree(make_server: Any, tmp_path: Path,
                                                           tree: str) -> None:
    # four children of 160 MiB each: 640 MiB together against a cap of 400 MiB
    _, api = make_server(job_command=_job(tmp_path, "memory", f"4x{160 << 20}"),
                         job_memory_bytes=400 << 20)
    api.submit(manifest(100), experiment_name="forks")
    row = api.wait("forks", {"COMPLETED", "FAILED"}, timeout=40)
    assert row["state"] == "FAILED", row
    assert "memory limit of 400 MiB" in row["error"], row


FORKING_ENV = '''
import os as _os, time as _time
if _os.environ.get("ARENA_TEST_FORKED") is None:
    _os.environ["ARENA_TEST_FORKED"] = "1"
    for _ in range(6):
        if _os.fork() == 0:
            _hog = bytearray(200 << 20)
            for _i in range(0, len(_hog), 4096):
                _hog[_i] = 1
            _time.sleep(600)
    _time.sleep(5)
''' + LINE_WORLD

ORPHANING_ENV = '''
import os as _os, signal as _signal, sys as _sys
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)
        _os.execv(_sys.executable, [_sys.executable, "-c", "import time; time.sleep(600)",
                                    "MARKER"])
    _os._exit(0)
_os.wait()
''' + LINE_WORLD


def test_a_setsid_child_does_not_outlive_its_validation(make_server: Any) -> None:
    marker = f"arena-orphan-{uuid.uuid4().hex}"
    _, api = make_server(allow_custom_code=True, env_check_wall_s=20.0, env_profile_s=0.2)
    try:
        started = time.monotonic()
        resp = upload(api, "Orphaning", {"line_world.py": ORPHANING_ENV.replace("MARKER", marker)})
        took = time.monotonic() - started
        events = ndjson(resp.text)
        assert last(resp)["status"] == "completed", events[-3:]
        assert _gone(marker), "the setsid() child outlived its check"
        print(f"setsid child in a check: upload answered in {took:.2f} s")
    finally:
        _cleanup(marker)


def test_a_forking_env_is_held_to_the_memory_cap_as_a_whole(make_server: Any) -> None:
    # six children of 200 MiB: 1.2 GiB together against the check's 1 GiB
    _, api = make_server(allow_custom_code=True, env_check_wall_s=40.0,
                         env_check_memory_bytes=1 << 30, env_profile_s=0.2)
    failed = last(upload(api, "Forking", {"line_world.py": FORKING_ENV}))
    assert failed["status"] == "failed" and failed["stage"] == "validation", failed
    assert failed["detail"]["error_code"] == "MEMORY_LIMIT", failed
    assert "1024 MiB" in failed["detail"]["reason"], failed


def test_real_training_with_worker_processes_runs_inside_its_tree(make_server: Any) -> None:
    """Async vector envs and population workers (processes, pipes, semaphores in the
    private /dev/shm) work in a contained job."""
    from agilerl.arena.server.config import default_job_command

    _, api = make_server(job_command=default_job_command(), job_memory_bytes=4 << 30)
    man = {"algorithm": {"name": "DQN", "batch_size": 16, "lr": 0.001, "learn_step": 1},
           "environment": {"name": "CartPole-v1", "num_envs": 2},
           "training": {"max_steps": 200, "evo_steps": 100, "pop_size": 2, "num_workers": 2,
                        "learning_delay": 0, "checkpoint_steps": 100},
           "replay_buffer": {"max_size": 1000}}
    api.submit(man, experiment_name="workers")
    row = api.wait("workers", {"COMPLETED", "FAILED"}, timeout=240)
    messages = [e["message"] for e in api.logs("workers") if e["kind"] == "log"]
    assert row["state"] == "COMPLETED", (row, messages[-20:])
    assert row["steps"] == 200


SIGNALLING_ENV = '''
import errno as _errno, os as _os
_seen = {}
for _name, _pid, _sig in (("decoy", DECOY, 9), ("server", SERVER, 0)):
    try:
        _os.kill(_pid, _sig)
        _seen[_name] = "ok"
    except OSError as _exc:
        _seen[_name] = _errno.errorcode[_exc.errno]
raise RuntimeError("SEEN " + " ".join(f"{k}={v}" for k, v in sorted(_seen.items())))
''' + LINE_WORLD


def test_a_check_cannot_signal_processes_outside_its_tree(make_server: Any) -> None:
    _, api = make_server(allow_custom_code=True, env_profile_s=0.2)
    decoy = subprocess.Popen(["sleep", "600"])  # stands for another user's trainer
    try:
        source = SIGNALLING_ENV.replace("DECOY", str(decoy.pid)).replace("SERVER", str(os.getpid()))
        failed = last(upload(api, "Signalling", {"line_world.py": source}))
        reason = failed["detail"]["reason"]
        assert "SEEN" in reason, failed
        seen = dict(word.split("=") for word in reason.split("SEEN ", 1)[1].split()[:2])
        assert seen["decoy"] in {"EPERM", "ESRCH"} and seen["server"] in {"EPERM", "ESRCH"}, seen
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()
