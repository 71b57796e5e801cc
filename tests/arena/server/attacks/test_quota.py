"""Disk: a user's experiments, uploaded environments and datasets share one quota; a job
that fills the disk is stopped saying why, and checks leave no scratch files behind."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ..conftest import manifest
from ..envsources import LINE_WORLD
from ..test_custom_envs import ENVS, last, upload

#: a "trainer" that saves a checkpoint, then writes 1 MB every 200 ms into its experiment
#: folder for ~24 s unless stopped: slow enough that the watcher (a scheduler tick of 0.5 s,
#: a measurement every 0.2 s) stops it within the test's 8 MB margin on an idle machine.
FILLER = """
import json, pathlib, sys, time
ckpt = pathlib.Path(sys.argv[sys.argv.index("--checkpoint-path") + 1]) / "step_100"
ckpt.mkdir(parents=True)
(ckpt / "member_0.pt").write_bytes(b"x")
(ckpt / "index.json").write_text(json.dumps({"summary": {"global_step": 200}}))
print("filling", flush=True)
for i in range(120):
    with open(f"fill-{i}.bin", "wb") as out:
        out.write(b"x" * (1 << 20))
    time.sleep(0.2)
print("filled", flush=True)
"""
QUOTA = 8 << 20


def _filler(tmp_path: Path) -> list[str]:
    script = tmp_path / "filler.py"
    script.write_text(FILLER)
    return [sys.executable, str(script)]


def test_a_job_that_fills_the_disk_is_stopped_and_saying_so(make_server: Any,
                                                           tmp_path: Path) -> None:
    srv, api = make_server(job_command=_filler(tmp_path), user_disk_quota_bytes=QUOTA,
                           quota_check_interval_s=0.2, allow_custom_code=True)
    name = api.submit(manifest())["experiment_name"]
    row = api.wait(name, {"COMPLETED", "FAILED", "STOPPED"}, timeout=60)
    assert row["state"] == "STOPPED", row
    assert "disk quota" in (row.get("error") or ""), row
    used = sum(f.stat().st_size for f in (srv.data_dir / "experiments").rglob("fill-*"))
    assert used < QUOTA + (8 << 20), used  # stopped within a few measurements
    # over the quota: nothing new is accepted until files are deleted
    resp = api.submit_raw({"manifest": manifest()})
    assert resp.status_code == 403 and resp.json()["error_code"] == "DISK_QUOTA_EXCEEDED"
    assert "disk quota" in resp.json()["error"] and "delete" in resp.json()["error"]
    resp = upload(api, "LineWorld", {"line_world.py": LINE_WORLD})
    assert resp.status_code == 403 and resp.json()["error_code"] == "DISK_QUOTA_EXCEEDED"
    assert api.http.get(ENVS).json()["data"] == {}
    resume = api.post("/api/cli/v1/experiments/jobs/resume",
                      {"experiment_name": name, "max_steps": 800})
    assert resume.status_code == 403, resume.text
    assert resume.json()["error_code"] == "DISK_QUOTA_EXCEEDED"


def test_an_upload_that_would_pass_the_quota_is_refused(make_server: Any) -> None:
    _, api = make_server(allow_custom_code=True, user_disk_quota_bytes=1 << 10)
    resp = upload(api, "LineWorld", {"line_world.py": LINE_WORLD, "blob.bin": os.urandom(4096)})
    assert resp.status_code == 403 and resp.json()["error_code"] == "DISK_QUOTA_EXCEEDED"
    assert resp.json()["limit"] == 1 << 10


def test_checks_leave_no_scratch_behind(make_server: Any) -> None:
    srv, api = make_server(allow_custom_code=True, env_profile_s=0.3)
    resp = upload(api, "LineWorld", {"line_world.py": LINE_WORLD})
    assert last(resp)["status"] == "completed", resp.text[-500:]
    root = srv.data_dir / "environments" / "1" / "LineWorld" / "v1"
    assert (root / "source").is_dir() and (root / "venv").is_dir()
    assert not (root / "scratch").exists()
    resp = api.http.post(ENVS + "/validate", json={"name": "LineWorld", "do_rollouts": True},
                         timeout=120)
    assert last(resp)["status"] == "completed", resp.text[-500:]
    assert not (root / "scratch").exists()


def test_disk_usage_counts_blocks_once_and_follows_no_link(tmp_path: Path) -> None:
    from agilerl.arena.server.quota import disk_usage

    root = tmp_path / "user"
    root.mkdir()
    (root / "a.bin").write_bytes(b"x" * (1 << 20))
    (root / "hard.bin").hardlink_to(root / "a.bin")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"x" * (4 << 20))
    (root / "link").symlink_to(outside)
    with open(root / "sparse.bin", "wb") as out:
        out.truncate(1 << 30)
    assert (1 << 20) <= disk_usage(root) < (1 << 20) + (64 << 10)
