"""A job's metrics file is untrusted input (issue 20, item 13): whatever a job leaves
there (garbage, invalid UTF-8, a FIFO, a huge line, a link to the server's secret), the
job still ends, status and list answer, and no error message carries the file's bytes."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

from agilerl.arena.server.testing import running_server

from ..conftest import Api, manifest

HOSTILE = Path(__file__).with_name("hostile_job.py")
JOBS = "/api/cli/v1/experiments/jobs"


def _release_fifo(path: Path) -> None:
    """Unblock a server thread stuck opening the FIFO (only the unfixed server is)."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("kind", ["garbage", "utf8", "fifo", "huge_line", "link"])
def test_a_bad_metrics_file_never_wedges_a_job_or_the_api(tmp_path: Path, kind: str) -> None:
    data, plan = tmp_path / "data", tmp_path / "plan.json"
    plan.write_text(json.dumps({"mode": "bad_metrics", "kind": kind, "checkpoints": {"step_1": 2},
                                "target": str(data / "jwt_secret")}))
    fifo = data / "experiments" / "1" / "run" / "metrics.csv"
    with running_server(tmp_path / "srv", data_dir=data, device_poll_interval_s=0,
                        job_command=[sys.executable, str(HOSTILE), str(plan)]) as srv:
        api = Api(srv)
        api.http.timeout = 10  # type: ignore[assignment]
        try:
            api.submit(manifest(200), experiment_name="bad")
            row = api.wait("bad", {"COMPLETED", "FAILED"}, timeout=20)
            assert row["state"] == "COMPLETED", row
            assert api.http.get("/api/cli/v1/experiments/list").status_code == 200
            params = {"experiment_name": "bad"}
            for extra in ({}, {"preview_rows": "5"}):
                resp = api.http.get("/api/cli/v1/experiments/metrics", params={**params, **extra})
                assert resp.status_code < 500, resp.text[:300]
            # the relaunch trims the metrics of the resumed run
            resp = api.post(JOBS + "/resume", {"experiment_name": "bad", "max_steps": 200})
            assert resp.status_code == 200, resp.text
            row = api.wait("bad", {"COMPLETED", "FAILED"}, timeout=20)
            status = api.status("bad")
        finally:
            _release_fifo(fifo)
            api.close()
    secret = (data / "jwt_secret").read_bytes()
    error = str(status.get("error") or "")
    assert "decode" not in error and "0x" not in error, error
    assert not any(f"\\x{b:02x}" in error for b in secret), error
    assert row["state"] == "COMPLETED", status


def test_deeply_nested_json_in_a_jobs_files_is_no_500(tmp_path: Path) -> None:
    data, plan = tmp_path / "data", tmp_path / "plan.json"
    deep = "[" * 200_000 + "]" * 200_000
    plan.write_text(json.dumps({"mode": "plant", "checkpoints": {"step_1": 2},
                                "files": {"logs.ndjson": deep + "\n"}}))
    with running_server(tmp_path / "srv", data_dir=data, device_poll_interval_s=0,
                        job_command=[sys.executable, str(HOSTILE), str(plan)]) as srv:
        api = Api(srv)
        api.submit(manifest(200), experiment_name="deep")
        api.wait("deep", {"COMPLETED", "FAILED"})
        index = data / "experiments" / "1" / "checkpoints" / "step_1" / "index.json"
        index.write_text(deep)  # as the job could at any time
        params = {"experiment_name": "deep"}
        for path in (JOBS + "/status", JOBS + "/checkpoints", JOBS + "/logs",
                     "/api/cli/v1/experiments/list"):
            resp = api.http.get(path, params=params)
            assert resp.status_code == 200, (path, resp.text[:300])
        resp = api.post(JOBS + "/resume", {"experiment_name": "deep", "max_steps": 200})
        assert resp.status_code == 200, resp.text
        assert api.wait("deep", {"COMPLETED", "FAILED"})["attempt"] == 2
        api.close()
