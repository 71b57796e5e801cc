"""Uploaded environments over real HTTP: upload, install, validate, profile, train on them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agilerl.arena.client import ArenaClient
from agilerl.arena.errors import ArenaAPIError, ArenaValidationError
from agilerl.arena.server.testing import RunningServer, create_token

from .conftest import Api, manifest, ndjson
from .envsources import BROKEN, LINE_WORLD, PARALLEL, TWO_ENVS, hostile_tar, tar_gz

ENVS = "/api/cli/v1/environments"


def client(srv: RunningServer, token: str | None = None) -> ArenaClient:
    return ArenaClient(api_key=token or srv.token, base_url=srv.base_url, verbose=False)


def upload(api: Api, name: str, files: dict[str, str | bytes] | bytes, *,
           requirements: str = "", env_config: str = "", **fields: str) -> httpx.Response:
    """POST create-and-validate as the reference client does (multipart, placeholders)."""
    archive = files if isinstance(files, bytes) else tar_gz(files)
    data = {"name": name, "version": "v1", "multi_agent": "false",
            "language_based": "false", "do_rollouts": "false", **fields}
    parts = {"file": ("env.tar.gz", archive, "application/gzip"),
             "env_config": ("env_config.yaml", env_config.encode(), "application/x-yaml"),
             "requirements": ("requirements.txt", requirements.encode(), "text/plain")}
    return api.http.post(ENVS + "/create-and-validate", data=data, files=parts, timeout=120)


def last(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    return ndjson(resp.text)[-1]


@pytest.fixture
def custom(make_server: Any) -> tuple[RunningServer, Api]:
    return make_server(allow_custom_code=True, env_profile_s=0.3)  # type: ignore[no-any-return]


def test_uploads_need_allow_custom_code(server: Any) -> None:
    srv, api = server
    resp = upload(api, "LineWorld", {"line_world.py": LINE_WORLD})
    assert resp.status_code == 403
    assert resp.json()["error_code"] == "CUSTOM_CODE_DISABLED"
    assert "--allow-custom-code" in resp.json()["error"]
    for path, body in (("/validate", {"name": "LineWorld"}), ("/profile", {"name": "x"}),
                       ("/duplicate", {"name": "x", "new_version_name": "v2"})):
        assert api.http.post(ENVS + path, json=body).status_code == 403
    with client(srv) as arena, pytest.raises(ArenaValidationError, match="allow-custom-code"):
        arena.validate_environment("LineWorld", source=tar_gz({"line_world.py": LINE_WORLD}))
    assert api.http.get(ENVS).json()["data"] == {}
    assert not (srv.data_dir / "environments" / "1").exists()


def test_upload_installs_validates_and_profiles(custom: Any) -> None:
    srv, api = custom
    resp = upload(api, "LineWorld", {"line_world.py": LINE_WORLD}, env_config="size: 5\n",
                  do_rollouts="true")
    events = ndjson(resp.text)
    stages = [(e["stage"], e["status"]) for e in events if e["kind"] == "status"]
    assert stages[0] == ("upload", "completed")
    assert ("install", "completed") in stages and ("validation", "completed") in stages
    assert stages[-1] == ("profiling", "completed")
    checks = {e["detail"]["check"]: e["detail"]["result"]["success"]
              for e in events if e["kind"] == "check"}
    assert checks and all(checks.values())
    assert {"Class exists in path", "Observation space", "Reset", "Step",
            "Random rollouts"} <= set(checks)
    detail = events[-1]["detail"]
    assert detail["entrypoint"] == "line_world:LineWorld" and detail["validated"] is True
    assert detail["episodes"] == 20  # the server's env_rollout_episodes
    assert detail["profile"]["steps_per_second"] > 0
    assert api.http.get(ENVS).json()["data"] == {
        "LineWorld": {"v1": {"validated": True, "profiled": True}}}
    assert api.http.get(ENVS + "/entrypoints",
                        params={"name": "LineWorld"}).json()["data"] == ["line_world:LineWorld"]
    # the same version cannot be replaced once validated
    again = upload(api, "LineWorld", {"line_world.py": LINE_WORLD})
    assert again.status_code == 409 and again.json()["error_code"] == "ENVIRONMENT_EXISTS"


def _upload_while_checking_busy(srv: RunningServer, api: Api, case: str) -> httpx.Response:
    """Upload ``case`` in a thread; meanwhile other requests on that version get 409."""
    import threading
    import time

    answer: list[httpx.Response] = []
    other = Api(srv)
    worker = threading.Thread(target=lambda: answer.append(
        upload(other, case, {"line_world.py": BROKEN[case]})))
    worker.start()
    try:
        deadline, seen = time.monotonic() + 5, None
        while time.monotonic() < deadline and seen is None:
            resp = api.http.post(ENVS + "/validate", json={"name": case})
            if resp.status_code == 409:
                seen = resp.json()
            time.sleep(0.05)
        assert seen is not None and seen["error_code"] == "ENVIRONMENT_BUSY", seen
        busy = api.http.request("DELETE", ENVS + "/delete", json={"name": case})
        assert busy.status_code == 409 and busy.json()["error_code"] == "ENVIRONMENT_BUSY"
    finally:
        worker.join(timeout=60)
        other.close()
    return answer[0]


BROKEN_CASES = [  # (source, check that fails, error code, words in the reason)
    ("import_error", "Class exists in path", "VALIDATION_FAILED", "a_module_that_does_not_exist"),
    ("wrong_spaces", "Reset", "VALIDATION_FAILED", "shape (3,)"),
    ("hanging_step", "Step", "WALL_TIME_LIMIT", "wall-clock limit of 6 s"),
    ("unbounded_allocation", "Step", "MEMORY_LIMIT", "memory"),
]


def test_broken_environments_fail_with_stage_and_reason(make_server: Any) -> None:
    srv, api = make_server(allow_custom_code=True, env_check_wall_s=6.0,
                           env_check_memory_bytes=1 << 30, env_profile_s=0.2)
    for case, check, code, words in BROKEN_CASES:
        if case == "hanging_step":
            resp = _upload_while_checking_busy(srv, api, case)
        else:
            resp = upload(api, case, {"line_world.py": BROKEN[case]})
        failed = last(resp)
        assert failed["status"] == "failed" and failed["stage"] == "validation", failed
        assert failed["detail"]["error_code"] == code, failed
        assert failed["detail"]["check"] == check and words in failed["detail"]["reason"], failed
        shown = [e for e in ndjson(resp.text) if e["kind"] == "check" and e["message"] == check]
        assert shown and shown[-1]["detail"]["result"]["success"] is False
        assert api.http.get("/health").status_code == 200
    assert api.http.get(ENVS).json()["data"] == {
        case: {"v1": {"validated": False, "profiled": False}} for case, *_ in BROKEN_CASES}
    with client(srv) as arena, pytest.raises(ArenaValidationError) as info:
        arena.validate_environment("wrong_spaces")
    assert "Reset" in str(info.value) and "shape (3,)" in str(info.value)
    # the server is healthy: a fixed upload of a failed version validates
    fixed = last(upload(api, "hanging_step", {"line_world.py": LINE_WORLD}))
    assert fixed["status"] == "completed" and fixed["detail"]["validated"] is True


@pytest.mark.slow
def test_a_busy_step_is_stopped_at_the_cpu_time_limit(make_server: Any) -> None:
    _, api = make_server(allow_custom_code=True, env_check_cpu_s=3, env_check_wall_s=60.0)
    failed = last(upload(api, "Busy", {"line_world.py": BROKEN["busy_step"]}))
    assert failed["status"] == "failed" and failed["detail"]["error_code"] == "CPU_LIMIT"
    assert failed["detail"]["check"] == "Step" and "3 s" in failed["detail"]["reason"]
    assert api.http.get("/health").status_code == 200


def test_hostile_archives_are_refused(custom: Any) -> None:
    srv, api = custom
    for kind in ("absolute", "dotdot", "symlink", "hardlink", "device", "fifo"):
        resp = upload(api, "Evil", hostile_tar(kind))
        assert resp.status_code == 422, (kind, resp.text)
        body = resp.json()
        assert body["error_code"] == "ARCHIVE_REFUSED" and body["member"], body
        assert body["member"] in body["error"]
    assert not Path("/tmp/arena-escape.txt").exists()
    assert not list(srv.data_dir.parent.rglob("arena-escape.txt"))
    assert not (srv.data_dir / "environments" / "1" / "Evil").exists()
    assert api.http.get(ENVS).json()["data"] == {}
    resp = upload(api, "Evil", b"this is not an archive")
    assert resp.status_code == 422 and resp.json()["error_code"] == "INVALID_ARCHIVE"


def test_entrypoints_exists_duplicate_and_delete(custom: Any) -> None:
    srv, api = custom
    ambiguous = last(upload(api, "Lines", {"envs/lines.py": TWO_ENVS, "envs/__init__.py": ""}))
    assert ambiguous["status"] == "failed"
    assert ambiguous["detail"]["error_code"] == "AMBIGUOUS_ENTRYPOINT"
    found = ["envs.lines:LineWorld", "envs.lines:LongLineWorld"]
    assert ambiguous["detail"]["available_entrypoints"] == found
    assert api.http.get(ENVS + "/entrypoints", params={"name": "Lines"}).json()["data"] == found
    with client(srv) as arena:
        result = arena.validate_environment("Lines", entrypoint="envs.lines:LongLineWorld",
                                            do_rollouts=True)
        assert result["validated"] is True and result["entrypoint"] == "envs.lines:LongLineWorld"
        copy = arena.duplicate_environment_version("Lines", "v2")
        assert copy["source_version"] == "v1"
        assert arena.list_environments() == {"Lines": {"v1": {"validated": True,
                                                              "profiled": False},
                                                       "v2": {"validated": True,
                                                              "profiled": False}}}
        metrics = arena.profile_environment("Lines", "v2")
        assert set(metrics) >= {"steps_per_second", "avg_cpu_per_env", "peak_cpu_per_env",
                                "memory_per_env_gb"}
        assert arena.environment_exists("Lines", "v2") and arena.environment_exists("Lines")
        arena.delete_environment("Lines", "v1")
        assert not arena.environment_exists("Lines", "v1")
        assert arena.validate_environment("Lines", "v2")["validated"] is True
        arena.delete_environment("Lines")
        assert arena.list_environments() == {}
        with pytest.raises(ArenaAPIError, match="not found"):
            arena.delete_environment("Lines")
    assert not (srv.data_dir / "environments" / "1" / "Lines" / "v1").exists()


@pytest.mark.slow
def test_pettingzoo_environment_validates(custom: Any) -> None:
    _, api = custom
    done = last(upload(api, "Pair", {"pair.py": PARALLEL}, multi_agent="true",
                       do_rollouts="true"))
    assert done["status"] == "completed", done
    assert done["detail"]["multi_agent"] is True and done["detail"]["entrypoint"] == "pair:Pair"
    as_single = last(upload(api, "Pair2", {"pair.py": PARALLEL}))
    assert as_single["status"] == "failed" and "--multi-agent" in as_single["detail"]["reason"]
    man = manifest()
    man["environment"] = {"name": "Pair", "num_envs": 1}
    resp = api.submit_raw({"manifest": man})
    assert resp.status_code == 422 and resp.json()["error_code"] == "ENVIRONMENT_MISMATCH"
    assert "DQN needs a single-agent environment" in resp.json()["error"]


def test_bad_sidecars_are_refused_naming_the_field(custom: Any) -> None:
    _, api = custom
    for requirements in ("-e ./local\n", "foo @ https://example.com/foo.whl\n", "not a spec!\n"):
        resp = upload(api, "Req", {"line_world.py": LINE_WORLD}, requirements=requirements)
        assert resp.status_code == 422 and resp.json()["error_code"] == "INVALID_REQUIREMENTS"
        assert "requirements.txt line 1" in resp.json()["error"]
    resp = upload(api, "Cfg", {"line_world.py": LINE_WORLD}, env_config="- a list\n")
    assert resp.status_code == 422 and "env_config" in resp.json()["error"]
    resp = upload(api, "../x", {"line_world.py": LINE_WORLD})
    assert resp.status_code == 422 and "name" in resp.json()["error"]
    resp = upload(api, "CartPole-v1", {"line_world.py": LINE_WORLD})
    assert resp.status_code == 409 and "built-in" in resp.json()["error"]


#: a job that reports where two packages come from.
PACKAGES_PROBE = """
import json, appdirs, cloudpickle
print(json.dumps({"appdirs": appdirs.__file__, "cloudpickle": cloudpickle.__version__,
                  "cloudpickle_file": cloudpickle.__file__}), flush=True)
"""


@pytest.mark.slow
def test_requirements_install_into_the_environments_own_venv(make_server: Any,
                                                             tmp_path: Path) -> None:
    """Requirements come from the package index into the env's venv only, and win over
    the server's own copy of a package (cloudpickle here) in validation and in jobs."""
    probe = tmp_path / "probe.py"
    probe.write_text(PACKAGES_PROBE)
    srv, api = make_server(allow_custom_code=True, env_profile_s=0.3,
                           job_command=[sys.executable, str(probe)])
    env = LINE_WORLD.replace("import gymnasium as gym", "import appdirs\nimport cloudpickle\n"
                             "assert cloudpickle.__version__ == '3.1.2'\nimport agilerl\n"
                             "import gymnasium as gym")
    resp = upload(api, "WithReq", {"line_world.py": env},
                  requirements="appdirs==1.4.4\ncloudpickle==3.1.2  # older than the server's\n")
    done = last(resp)
    assert done["status"] == "completed", ndjson(resp.text)[-6:]
    installed = [e for e in ndjson(resp.text) if e["stage"] == "install"]
    assert any(e.get("level") == "secondary-info" for e in installed)
    venv = srv.data_dir / "environments" / "1" / "WithReq" / "v1" / "venv"
    assert list(venv.glob("lib/python*/site-packages/appdirs.py"))
    import importlib.util

    import cloudpickle
    assert importlib.util.find_spec("appdirs") is None  # not in the server's environment
    assert cloudpickle.__version__ != "3.1.2"
    man = manifest()
    man["environment"] = {"name": "WithReq", "num_envs": 1}
    api.submit(man, experiment_name="packages")
    row = api.wait("packages", {"COMPLETED", "FAILED"})
    lines = [e["message"] for e in api.logs("packages") if e["kind"] == "log"]
    assert row["state"] == "COMPLETED", lines
    seen = json.loads(next(line for line in lines if line.startswith("{")))
    assert seen["cloudpickle"] == "3.1.2" and seen["cloudpickle_file"].startswith(str(venv))
    assert seen["appdirs"].startswith(str(venv))


@pytest.mark.slow
@pytest.mark.parametrize("limit, words", [
    ({"env_max_venv_bytes": 8 << 10}, "over this server's limit of 0 MiB"),
    ({"env_install_timeout_s": 0.05}, "took longer than the limit of 0.05 s"),
])
def test_install_limits_fail_the_install_stage(make_server: Any, limit: dict[str, Any],
                                               words: str) -> None:
    _, api = make_server(allow_custom_code=True, **limit)
    failed = last(upload(api, "Big", {"line_world.py": LINE_WORLD},
                         requirements="appdirs==1.4.4\n"))
    assert failed["stage"] == "install" and failed["status"] == "failed", failed
    assert failed["detail"]["error_code"] == "INSTALL_FAILED"
    assert words in failed["detail"]["reason"], failed
    assert api.http.get(ENVS).json()["data"]["Big"]["v1"]["validated"] is False
    # validating it again retries the install, which an incomplete venv needs
    again = last(api.http.post(ENVS + "/validate", json={"name": "Big"}, timeout=120))
    assert again["stage"] == "install" and again["detail"]["error_code"] == "INSTALL_FAILED"


def test_user_isolation_for_environments(custom: Any) -> None:
    srv, api = custom
    resp = upload(api, "Secret", {"line_world.py": LINE_WORLD})
    assert last(resp)["status"] == "completed"
    checks = [e["detail"] for e in ndjson(resp.text) if e["kind"] == "check"]
    assert checks[-1]["check"] == "Episode lifecycle"  # a short run without --do-rollouts
    assert [c["result"]["warnings"] for c in checks] == [[]] * len(checks)
    bob_token = create_token(srv.data_dir, "bob")
    bob = Api(srv, bob_token)
    try:
        assert bob.http.get(ENVS).json()["data"] == {}
        assert bob.http.get(ENVS + "/exists", params={"name": "Secret"}).json()["data"] == {
            "exists": False}
        assert bob.http.get(ENVS + "/entrypoints", params={"name": "Secret"}).status_code == 404
        assert bob.http.post(ENVS + "/validate", json={"name": "Secret"}).status_code == 404
        assert bob.http.post(ENVS + "/profile", json={"name": "Secret"}).status_code == 404
        assert bob.http.request("DELETE", ENVS + "/delete",
                                json={"name": "Secret"}).status_code == 404
        man = manifest()
        man["environment"] = {"name": "Secret", "num_envs": 1}
        resp = bob.submit_raw({"manifest": man})
        assert resp.status_code == 404 and "not found" in resp.json()["error"]
        # bob's own upload of the same name is his, and leaves alice's alone
        assert last(upload(bob, "Secret", {"line_world.py": BROKEN["wrong_spaces"]}))[
            "status"] == "failed"
    finally:
        bob.close()
    assert api.http.get(ENVS).json()["data"]["Secret"]["v1"]["validated"] is True


#: a job that reports its interpreter and environment section, then waits for a file.
PROBE = """
import json, os, sys, time
flag, manifest = sys.argv[1], json.load(open(sys.argv[2]))
print(json.dumps({"prefix": sys.prefix, "env": manifest["environment"]}), flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(flag) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def test_jobs_run_with_the_environments_venv(make_server: Any, tmp_path: Path) -> None:
    probe, flag = tmp_path / "probe.py", tmp_path / "release"
    probe.write_text(PROBE)
    srv, api = make_server(allow_custom_code=True, env_profile_s=0.3,
                           job_command=[sys.executable, str(probe), str(flag)])
    assert last(upload(api, "LineWorld", {"line_world.py": LINE_WORLD},
                       env_config="size: 5\n"))["status"] == "completed"
    man = manifest()
    man["environment"] = {"name": "LineWorld", "version": "v1", "num_envs": 1,
                          "config": {"size": 3}}
    api.submit(man, experiment_name="probe")
    api.wait("probe", {"RUNNING"})
    # an environment in use cannot be deleted
    resp = api.http.request("DELETE", ENVS + "/delete", json={"name": "LineWorld"})
    assert resp.status_code == 409 and resp.json()["error_code"] == "ENVIRONMENT_IN_USE"
    assert resp.json()["experiments"] == ["probe"]
    flag.write_text("go")
    row = api.wait("probe", {"COMPLETED", "FAILED"})
    lines = [e["message"] for e in api.logs("probe") if e["kind"] == "log"]
    assert row["state"] == "COMPLETED", (row, lines)
    seen = json.loads(next(line for line in lines if line.startswith("{")))
    root = srv.data_dir / "environments" / "1" / "LineWorld" / "v1"
    assert Path(seen["prefix"]) == root / "venv"
    assert seen["env"] == {"name": "LineWorld", "num_envs": 1, "entrypoint":
                           "line_world:LineWorld", "path": str(root / "source"),
                           "config": {"size": 3}}
    resp = api.http.request("DELETE", ENVS + "/delete", json={"name": "LineWorld"})
    assert resp.status_code == 200 and resp.json()["data"]["versions"] == ["v1"]
    assert not root.exists()


def test_jobs_need_a_validated_version(custom: Any) -> None:
    srv, api = custom
    assert last(upload(api, "Bad", {"line_world.py": BROKEN["wrong_spaces"]}))["status"] == \
        "failed"
    man = manifest()
    man["environment"] = {"name": "Bad", "num_envs": 1}
    resp = api.submit_raw({"manifest": man})
    assert resp.status_code == 422 and resp.json()["error_code"] == "ENVIRONMENT_NOT_VALIDATED"
    assert "arena env validate Bad --version v1" in resp.json()["error"]
    man["environment"]["version"] = "v9"
    resp = api.submit_raw({"manifest": man})
    assert resp.status_code == 404 and "v9" in resp.json()["error"]
    # ArenaTrainer finds out before it submits
    from agilerl.arena.trainer import ArenaTrainer

    man["environment"].pop("version")
    with client(srv) as arena, pytest.raises(ArenaValidationError) as info:
        ArenaTrainer.from_manifest(man, client=arena).train()
    assert "arena env validate Bad --version v1" in str(info.value.cli_hint)
    man["environment"]["name"] = "NoSuchEnv"
    with client(srv) as arena, pytest.raises(ArenaAPIError) as missing:
        ArenaTrainer.from_manifest(man, client=arena).train()
    assert "not registered" in str(missing.value)
    assert "arena env validate NoSuchEnv --source DIR" in str(missing.value.cli_hint)
    assert api.http.get("/api/cli/v1/experiments/list").json()["data"] == []


def _processes_under(folder: Path) -> list[str]:
    """Command lines of live processes that mention ``folder`` or work in it."""
    import os

    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(folder) in cmdline or cwd == str(folder):
            found.append(cmdline)
    return found


def test_a_client_that_goes_away_stops_its_check(make_server: Any) -> None:
    import time

    srv, api = make_server(allow_custom_code=True, env_check_wall_s=120.0)
    files = {"file": ("e.tar.gz", tar_gz({"line_world.py": BROKEN["hanging_step"]}),
                      "application/gzip")}
    scratch = srv.data_dir / "environments" / "1" / "Hang" / "v1" / "scratch"
    with api.http.stream("POST", ENVS + "/create-and-validate", data={"name": "Hang"},
                         files=files) as resp:
        for line in resp.iter_lines():
            if '"Reset seed"' in line:  # the next check, Step, hangs
                break
        assert _processes_under(scratch)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _processes_under(scratch):
        time.sleep(0.1)
    assert not _processes_under(scratch)
    while time.monotonic() < deadline:  # and the version is free again
        gone = api.http.request("DELETE", ENVS + "/delete", json={"name": "Hang"})
        if gone.status_code != 409:
            break
        time.sleep(0.2)
    assert gone.status_code == 200, gone.text


def test_the_launcher_applies_its_limits_even_without_the_server() -> None:
    import signal
    import subprocess

    limits = [sys.executable, "-m", "agilerl.arena.server.env_limits"]
    slept = subprocess.run([*limits, "--wall-seconds", "1", "--", sys.executable, "-c",
                            "import time; time.sleep(60)"], timeout=30)
    assert slept.returncode == -signal.SIGALRM
    hog = subprocess.run([*limits, "--memory-bytes", str(512 << 20), "--", sys.executable,
                          "-c", "x = bytearray(1 << 30)"], capture_output=True, text=True,
                         timeout=30)
    assert hog.returncode == 1 and "MemoryError" in hog.stderr


def test_unknown_plain_names_are_refused_but_namespaced_ids_are_left_to_the_trainer(
        server: Any) -> None:
    _, api = server
    man = manifest()
    man["environment"] = {"name": "NoSuchThing", "num_envs": 1}
    resp = api.submit_raw({"manifest": man})
    assert resp.status_code == 404 and resp.json()["error_code"] == "ENVIRONMENT_NOT_FOUND"
    man["environment"] = {"name": "ALE/Pong-v5", "num_envs": 1}  # registers with ale-py
    assert api.submit_raw({"manifest": man}).status_code == 200
