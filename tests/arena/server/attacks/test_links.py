"""The server never follows a link that job or upload code planted (issue 20, items 2-4).

Each test plants links the way hostile code would (an uploaded env at import time, a
job in its own experiment folder), then drives the real server over HTTP and checks that
the link's target was neither read nor written.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from agilerl.arena.server.testing import running_server

from ..conftest import JOB_SCRIPT, Api, manifest
from ..envsources import LINE_WORLD
from ..test_custom_envs import ENVS, last, upload

HOSTILE = Path(__file__).with_name("hostile_job.py")
JOBS = "/api/cli/v1/experiments/jobs"
PRECIOUS = b"another user's file\n"
#: a learning rate only the victim's manifest holds.
VICTIM_LR = 0.000777


def _database_works(data: Path) -> None:
    db = sqlite3.connect(data / "arena.sqlite3")
    try:
        assert db.execute("SELECT COUNT(*) FROM users").fetchone()[0] >= 1
    finally:
        db.close()


def _targets(tmp_path: Path, data: Path) -> dict[str, Path]:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(PRECIOUS)
    return {"outside": outside, "database": data / "arena.sqlite3"}


def _check_target(which: str, target: Path, data: Path, api: Api) -> None:
    if which == "outside":
        assert target.read_bytes() == PRECIOUS
    _database_works(data)
    assert api.http.get(ENVS).status_code == 200  # the server keeps working
    assert api.http.get("/api/cli/v1/experiments/list").status_code == 200


# ---- item 2: scratch/spec.json and scratch/requirements.txt -----------------------------


def _planting_env(name: str, target: Path) -> str:
    """LineWorld whose import (in the checker, HOME = scratch) links scratch/NAME to TARGET."""
    return (f"import os as _os, pathlib as _pl\n"
            f"_p = _pl.Path(_os.environ['HOME']) / {name!r}\n"
            f"if not _p.is_symlink():\n"
            f"    _p.unlink(missing_ok=True)\n"
            f"    _p.symlink_to({str(target)!r})\n" + LINE_WORLD)


@pytest.mark.parametrize("which", ["outside", "database"])
def test_validation_does_not_write_spec_json_through_a_planted_link(
        make_server: Any, tmp_path: Path, which: str) -> None:
    srv, api = make_server(allow_custom_code=True, env_profile_s=0.3)
    target = _targets(tmp_path, srv.data_dir)[which]
    first = last(upload(api, "Planter", {"line_world.py": _planting_env("spec.json", target)}))
    assert first["status"] in ("completed", "failed"), first
    scratch = srv.data_dir / "environments" / "1" / "Planter" / "v1" / "scratch"
    # the spec now travels over the check's pipe, and scratch/ goes with each check
    assert not (scratch / "spec.json").is_symlink()
    again = api.http.post(ENVS + "/validate", json={"name": "Planter"}, timeout=120)
    assert again.status_code == 200
    assert last(again)["status"] in ("completed", "failed")
    _check_target(which, target, srv.data_dir, api)


@pytest.mark.parametrize("which", ["outside", "database"])
def test_reinstall_does_not_write_requirements_through_a_planted_link(
        make_server: Any, tmp_path: Path, which: str) -> None:
    srv, api = make_server(allow_custom_code=True, env_max_venv_bytes=8 << 10)
    target = _targets(tmp_path, srv.data_dir)[which]
    failed = last(upload(api, "Req", {"line_world.py": LINE_WORLD},
                         requirements="appdirs==1.4.4\n"))
    assert failed["stage"] == "install" and failed["status"] == "failed", failed
    # what a requirement's setup.py (run by pip in this scratch folder) can leave behind
    planted = srv.data_dir / "environments" / "1" / "Req" / "v1" / "scratch" / "requirements.txt"
    planted.parent.mkdir(exist_ok=True)  # each check removes scratch/ when it ends
    planted.unlink(missing_ok=True)
    planted.symlink_to(target)
    again = last(api.http.post(ENVS + "/validate", json={"name": "Req"}, timeout=120))
    assert again["stage"] == "install" and again["status"] == "failed", again
    assert again["detail"]["error_code"] == "INSTALL_FAILED"
    _check_target(which, target, srv.data_dir, api)


# ---- items 3 and 4: links a job plants in its experiment folder -------------------------


def _victim(tmp_path: Path, data: Path) -> Path:
    """A finished experiment of another user (id 1); returns its folder."""
    man = manifest(200, checkpoint_steps=100)
    man["algorithm"]["lr"] = VICTIM_LR
    with running_server(tmp_path / "victim", data_dir=data, user="victim",
                        job_command=JOB_SCRIPT, device_poll_interval_s=0) as srv:
        api = Api(srv)
        api.submit(man, experiment_name="private")
        assert api.wait("private", {"COMPLETED", "FAILED"})["state"] == "COMPLETED"
        api.close()
    folder = data / "experiments" / "1"
    assert (folder / "run" / "metrics.csv").is_file()
    return folder


def _attacker(tmp_path: Path, data: Path, plan: dict[str, Any]) -> Any:
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return running_server(tmp_path / "attacker", data_dir=data, user="attacker",
                          job_command=[sys.executable, str(HOSTILE), str(tmp_path / "plan.json")],
                          device_poll_interval_s=0, stop_grace_s=1.0)


def _leaks(text: str | bytes) -> bool:
    data = text.encode() if isinstance(text, str) else text
    return str(VICTIM_LR).encode() in data or b"mean_fitness" in data or b"x" * 100 in data


def _probe_files(api: Api, name: str) -> list[Any]:
    """Every read the API offers on the experiment's files; none may fail or leak."""
    params = {"experiment_name": name}
    answers = [
        api.http.get("/api/cli/v1/experiments/metrics", params=params),
        api.http.get("/api/cli/v1/experiments/metrics", params={**params, "details": "true"}),
        api.http.get("/api/cli/v1/experiments/metrics", params={**params, "preview_rows": "50"}),
        api.http.get(JOBS + "/checkpoints", params=params),
        api.http.get(JOBS + "/status", params=params),
        api.http.get("/api/cli/v1/experiments/list"),
        api.http.get(JOBS + "/checkpoints/download", params=params),
    ]
    for wanted in ("step_9", "step_100", "step_200", "mine"):
        answers.append(api.http.get(JOBS + "/checkpoints/download",
                                    params={**params, "checkpoint": wanted}))
    for resp in answers:
        assert resp.status_code < 500, (resp.request.url, resp.text[:300])
        assert not _leaks(resp.content), (resp.request.url, resp.content[:300])
        if resp.headers.get("content-type") == "application/octet-stream":
            with tarfile.open(fileobj=io.BytesIO(resp.content)) as tar:
                assert not any(m.isfile() and m.size == 100 for m in tar.getmembers())
    return answers


@pytest.mark.parametrize("links", [
    {"run": "{victim}/run", "metrics.csv": "{victim}/manifest.json"},
    {"run/metrics.csv": "{victim}/manifest.json"},
    {"run/evil.csv": "{victim}/run/metrics.csv"},
], ids=["run-folder", "metrics-file", "newest-csv"])
def test_metrics_and_checkpoints_never_follow_a_jobs_links(tmp_path: Path,
                                                          links: dict[str, str]) -> None:
    data = tmp_path / "data"
    victim = _victim(tmp_path, data)
    ckpt = victim / "checkpoints"
    plan = {"mode": "plant", "links": {
        **{k: v.format(victim=victim) for k, v in links.items()},
        "checkpoints/step_9": str(ckpt / "step_200"),
        "checkpoints/mine/index.json": str(ckpt / "step_100" / "index.json"),
        "checkpoints/mine/member_0.pt": str(ckpt / "step_100" / "member_0.pt"),
    }}
    with _attacker(tmp_path, data, plan) as srv:
        api = Api(srv)
        api.submit(manifest(200), experiment_name="thief")
        assert api.wait("thief", {"COMPLETED", "FAILED"})["state"] == "COMPLETED"
        _probe_files(api, "thief")
        api.close()


def test_trimming_metrics_on_resume_does_not_follow_a_run_link(tmp_path: Path) -> None:
    data = tmp_path / "data"
    victim = _victim(tmp_path, data)
    before = (victim / "run" / "metrics.csv").read_bytes()
    plan = {"mode": "plant", "links": {"run": str(victim / "run")},
            "checkpoints": {"step_1": 0}, "exit": 3}
    with _attacker(tmp_path, data, plan) as srv:
        api = Api(srv)
        api.submit(manifest(200), experiment_name="trimmer")
        assert api.wait("trimmer", {"COMPLETED", "FAILED"})["state"] == "FAILED"
        resp = api.post(JOBS + "/resume", {"experiment_name": "trimmer", "max_steps": 200})
        assert resp.status_code == 200, resp.text
        row = api.wait("trimmer", {"COMPLETED", "FAILED"})
        assert row["attempt"] == 2
        api.close()
    assert (victim / "run" / "metrics.csv").read_bytes() == before


def test_a_relaunch_never_appends_its_log_through_a_link(tmp_path: Path) -> None:
    data = tmp_path / "data"
    victim = _victim(tmp_path, data)
    before = (victim / "logs.ndjson").read_bytes()
    plan = {"mode": "plant", "links": {"logs.ndjson": str(victim / "logs.ndjson")},
            "checkpoints": {"step_1": 2}}
    with _attacker(tmp_path, data, plan) as srv:
        api = Api(srv)
        api.submit(manifest(200), experiment_name="logger")
        assert api.wait("logger", {"COMPLETED", "FAILED"})["state"] == "COMPLETED"
        assert not any(_leaks(json.dumps(e)) or "victim" in json.dumps(e)
                       for e in api.logs("logger"))
        resp = api.post(JOBS + "/resume", {"experiment_name": "logger", "max_steps": 200})
        assert resp.status_code == 200, resp.text
        row = api.wait("logger", {"COMPLETED", "FAILED"})
        status = api.status("logger")
        api.close()
    assert (victim / "logs.ndjson").read_bytes() == before
    assert row["state"] == "FAILED" and "logs.ndjson" in status["error"], status


_SETUP_PY = '''
import os, pathlib
from setuptools import setup

scratch = pathlib.Path(os.environ["TMPDIR"])
for planted, target in ((scratch.parent / "venv" / ".agilerl-installed", {marker!r}),
                        (scratch / "requirements.txt", {requirements!r})):
    if not planted.is_symlink():
        if planted.exists():
            planted.unlink()
        planted.symlink_to(target)
setup(name="plantlinks", version="1.0", py_modules=[])
'''


def _sdist(folder: Path, setup_py: str) -> None:
    """``plantlinks-1.0.tar.gz`` in ``folder``: a requirement whose setup.py plants links."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in (("setup.py", setup_py),
                           ("PKG-INFO", "Metadata-Version: 2.1\nName: plantlinks\nVersion: 1.0\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"plantlinks-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plantlinks-1.0.tar.gz").write_bytes(buf.getvalue())


def test_install_never_writes_through_links_a_requirements_setup_py_planted(
        make_server: Any, tmp_path: Path, monkeypatch: Any) -> None:
    created, outside = tmp_path / "created-by-the-server", tmp_path / "outside.txt"
    outside.write_bytes(PRECIOUS)
    _sdist(tmp_path / "index", _SETUP_PY.format(marker=str(created),
                                                requirements=str(outside)))
    links = " ".join(p for p in (os.environ.get("PIP_FIND_LINKS"), str(tmp_path / "index")) if p)
    monkeypatch.setenv("PIP_FIND_LINKS", links)
    srv, api = make_server(allow_custom_code=True, env_profile_s=0.3)
    first = last(upload(api, "Setup", {"line_world.py": LINE_WORLD},
                        requirements="plantlinks==1.0\n"))
    assert first["status"] == "completed", first
    venv = srv.data_dir / "environments" / "1" / "Setup" / "v1" / "venv"
    assert list(venv.glob("lib/python*/site-packages/plantlinks-1.0*"))  # setup.py ran
    assert not created.exists()
    # a reinstall (a failed install is retried by validate) writes requirements.txt again
    (venv / ".agilerl-installed").unlink()
    again = last(api.http.post(ENVS + "/validate", json={"name": "Setup"}, timeout=120))
    assert again["status"] == "completed", again
    assert outside.read_bytes() == PRECIOUS and not created.exists()
    _database_works(srv.data_dir)


def test_a_linked_checkpoints_folder_is_neither_listed_nor_downloaded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    victim = _victim(tmp_path, data)
    plan = {"mode": "plant", "links": {"checkpoints": str(victim / "checkpoints")}}
    with _attacker(tmp_path, data, plan) as srv:
        api = Api(srv)
        api.submit(manifest(200), experiment_name="thief")
        assert api.wait("thief", {"COMPLETED", "FAILED"})["state"] == "COMPLETED"
        answers = _probe_files(api, "thief")
        listed = api.http.get(JOBS + "/checkpoints", params={"experiment_name": "thief"})
        api.close()
    assert listed.json()["data"] == []
    assert all(r.headers.get("content-type") != "application/octet-stream" for r in answers)
