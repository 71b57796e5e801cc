"""Issue 22 item 3: the Arena server's pages and their API (``/api/ui``) over real HTTP."""

from __future__ import annotations

import io
import os
import sqlite3
import tarfile
from typing import Any

import httpx

from agilerl.arena.server.testing import create_token

from .conftest import Api, manifest

UI = "/api/ui"


def _done(api: Api, name: str, **training: Any) -> dict[str, Any]:
    api.submit(manifest(400, checkpoint_steps=100, **training), experiment_name=name)
    return api.wait(name, {"COMPLETED"})


def test_every_answer_carries_the_security_headers(server: Any) -> None:
    srv, api = server
    for path in ("/", "/static/arena.js", "/static/run.js", UI + "/runs", "/device",
                 "/api/cli/v1/experiments/list", "/nowhere"):
        headers = api.http.get(path).headers
        assert headers["content-security-policy"].startswith("default-src 'self'"), path
        assert headers["x-content-type-options"] == "nosniff", path
        assert headers["x-frame-options"] == "DENY", path
    page = httpx.get(srv.base_url + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/static/arena.js">' in page.text
    assert "set-cookie" not in page.headers
    assert "<script>" not in page.text  # no inline script: the CSP would refuse it
    assert httpx.get(srv.base_url + "/static/..%2Fapp.py").status_code == 404
    assert httpx.get(srv.base_url + "/static/missing.js").status_code == 404
    # the one data answer without a key: the device login's realm, nothing of any user
    assert httpx.get(srv.base_url + UI + "/server").json() == {"realm": "arena"}


def test_the_ui_api_refuses_a_request_without_a_valid_token(server: Any) -> None:
    srv, api = server
    _done(api, "mine")
    run_id = api.status("mine")["id"]
    for path in (UI + "/runs", f"{UI}/runs/{run_id}", f"{UI}/runs/{run_id}/metrics",
                 f"{UI}/runs/{run_id}/events", f"{UI}/runs/{run_id}/logs",
                 f"{UI}/runs/{run_id}/download/metrics.csv", UI + "/environments"):
        for headers in ({}, {"Authorization": "Bearer arena_pat_nope"},
                        {"Cookie": "token=" + srv.token}):
            answer = httpx.get(srv.base_url + path, headers=headers)
            assert answer.status_code == 401, (path, headers)
            assert answer.json()["error_code"] == "UNAUTHORIZED"
            assert "mine" not in answer.text


def test_runs_detail_metrics_events_and_logs_of_an_experiment(server: Any) -> None:
    srv, api = server
    row = _done(api, "cart-ui")
    run_id = str(row["id"])
    listed = api.http.get(UI + "/runs").json()["runs"]
    assert [r["id"] for r in listed] == [run_id]
    summary = listed[0]
    assert summary["name"] == "cart-ui" and summary["status"] == "completed"
    assert summary["project"] == "default" and summary["agent_steps"] == 400
    assert summary["algorithm"] == "DQN" and summary["env"] == "CartPole-v1"
    detail = api.http.get(f"{UI}/runs/{run_id}").json()
    assert [c["name"] for c in detail["checkpoints"]] == [
        "step_100", "step_200", "step_300", "step_400"]
    assert detail["files"] == ["metrics.csv"] and "CartPole-v1" in detail["manifest"]
    metrics = api.http.get(f"{UI}/runs/{run_id}/metrics").json()
    assert metrics["columns"] == ["train/global_step", "eval/mean_fitness"]
    assert metrics["total"] == 4 and metrics["rows"][0] == [200.0, 0.25]
    assert api.http.get(f"{UI}/runs/{run_id}/metrics?since=3").json()["rows"] == [[800.0, 1.0]]
    events = api.http.get(f"{UI}/runs/{run_id}/events").json()
    assert events == {"events": [], "since": 0, "total": 0, "recorded": False, "file": None}
    logs = api.http.get(f"{UI}/runs/{run_id}/logs").json()
    messages = [line["message"] for line in logs["lines"]]
    assert "training to 400 steps" in messages and "done" in messages
    assert logs["offset"] == logs["size"] and logs["skipped"] is False
    again = api.http.get(f"{UI}/runs/{run_id}/logs", params={"offset": logs["offset"]}).json()
    assert again["lines"] == []
    csv = api.http.get(f"{UI}/runs/{run_id}/download/metrics.csv")
    assert csv.status_code == 200 and csv.text.startswith("train/global_step,")
    archive = api.http.get(f"{UI}/runs/{run_id}/download/checkpoints/step_400")
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        assert "step_400/index.json" in tar.getnames()
    for missing in ("checkpoints/step_999", "checkpoints/../manifest.json", "logs.ndjson",
                    "../manifest.json"):
        assert api.http.get(f"{UI}/runs/{run_id}/download/{missing}").status_code == 404


def test_another_users_experiment_is_not_found_like_a_missing_one(server: Any) -> None:
    srv, api = server
    row = _done(api, "private")
    other = Api(srv, create_token(srv.data_dir, "mallory"))
    try:
        assert other.http.get(UI + "/runs").json()["runs"] == []
        for rest in ("", "/metrics", "/events", "/logs", "/download/metrics.csv",
                     "/download/checkpoints/step_400"):
            theirs = other.http.get(f"{UI}/runs/{row['id']}{rest}")
            missing = other.http.get(f"{UI}/runs/999{rest}")
            assert theirs.status_code == missing.status_code == 404, rest
            assert theirs.json()["error_code"] == missing.json()["error_code"]
            assert "private" not in theirs.text
        for bad in ("abc", "-1", "1" * 30):
            assert other.http.get(f"{UI}/runs/{bad}").status_code == 404
    finally:
        other.close()


def test_a_link_planted_in_the_run_folder_is_not_followed(server: Any) -> None:
    """The job writes its run folder: a link to the server's secret must not be read."""
    srv, api = server
    row = _done(api, "planted")
    run = srv.data_dir / "experiments" / str(row["id"]) / "run"
    secret = srv.data_dir / "jwt_secret"
    for name in ("manifest.yaml", "events.jsonl"):
        os.symlink(secret if secret.exists() else "/etc/hostname", run / name)
    (run / "metrics.csv").unlink()
    os.symlink(secret if secret.exists() else "/etc/hostname", run / "metrics.csv")
    run_id = str(row["id"])
    detail = api.http.get(f"{UI}/runs/{run_id}").json()
    assert detail["files"] == [] and detail["manifest"].startswith("# the manifest as submitted")
    assert api.http.get(f"{UI}/runs/{run_id}/metrics").json()["columns"] == []
    assert api.http.get(f"{UI}/runs/{run_id}/events").json()["events"] == []
    for name in ("metrics.csv", "manifest.yaml", "events.jsonl"):
        assert api.http.get(f"{UI}/runs/{run_id}/download/{name}").status_code == 404


def test_names_reach_the_page_as_data_not_markup(server: Any) -> None:
    """The API refuses such names; one in the database anyway is sent as a JSON string."""
    srv, api = server
    row = _done(api, "renamed")
    xss = "<script>alert(1)</script>"
    with sqlite3.connect(srv.data_dir / "arena.sqlite3") as db:
        db.execute("UPDATE experiments SET name = ? WHERE id = ?", (xss, row["id"]))
    answer = api.http.get(UI + "/runs")
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["runs"][0]["name"] == xss


def test_environments_list_shows_descriptions_and_the_custom_code_switch(server: Any) -> None:
    srv, api = server
    data = api.http.get(UI + "/environments").json()
    assert data == {"environments": [], "custom_code": False}


def test_a_metrics_file_past_the_cap_is_not_parsed(server: Any, monkeypatch: Any) -> None:
    """A job could write a huge file to fill the server's memory through the pages."""
    from agilerl.arena.server import ui_runs

    srv, api = server
    row = _done(api, "huge")
    monkeypatch.setattr(ui_runs, "MAX_PARSED_BYTES", 20)
    metrics = api.http.get(f"{UI}/runs/{row['id']}/metrics").json()
    assert metrics["columns"] == [] and metrics["rows"] == []
    download = api.http.get(f"{UI}/runs/{row['id']}/download/metrics.csv")
    assert download.text.count("\n") == 5  # still downloadable whole
