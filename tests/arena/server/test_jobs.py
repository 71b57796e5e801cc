"""Job lifecycle over real HTTP with a scripted worker: run, logs, stop, resume, failure."""

from __future__ import annotations

import io
import json
import os
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import Api, manifest, ndjson

JOBS = "/api/cli/v1/experiments/jobs"


def _states(row: dict[str, Any]) -> list[str]:
    return [t["to_state"] for t in row["transitions"]]


def test_submit_runs_to_completion_with_logs_metrics_checkpoints(server: Any) -> None:
    srv, api = server
    detail = api.submit(manifest(400, checkpoint_steps=100), experiment_name="cart-1")
    assert detail["accepted"] is True and detail["experiment_name"] == "cart-1"
    assert detail["state"] == "QUEUED" and detail["project"] == "default"
    assert detail["resource_id"] == "local-cpu" and detail["num_nodes"] == 1

    row = api.wait("cart-1", {"COMPLETED", "FAILED"})
    assert row["state"] == "COMPLETED", row
    assert _states(row) == ["PENDING", "QUEUED", "STARTING", "RUNNING", "COMPLETED"]
    stamps = [t["at"] for t in row["transitions"]]
    assert stamps == sorted(stamps) and all(s.endswith("Z") for s in stamps)
    # steps per agent, like max_steps; the trainer's files count the 2 agents together
    assert row["steps"] == 400 and row["max_steps"] == 400 and row["error"] is None
    assert row["pop_size"] == 2 and row["latest_checkpoint"]["total_steps"] == 800
    assert row["latest_checkpoint"]["name"] == "step_400"

    lines = api.logs("cart-1")
    # stdout and stderr are read concurrently; order is kept within each stream.
    messages = [e["message"] for e in lines
                if e["kind"] == "log" and e["detail"]["stream"] == "stdout"]
    assert messages == ["training to 400 steps", "step 100", "step 200", "step 300",
                        "step 400", "done"]
    assert {e["detail"]["stream"] for e in lines if e["kind"] == "log"} == {"stdout", "stderr"}
    seqs = [e["detail"]["seq"] for e in lines if e["kind"] == "log"]
    assert seqs == list(range(1, len(seqs) + 1))
    assert lines[-1]["status"] == "completed" and lines[-1]["detail"]["state"] == "COMPLETED"
    later = api.logs("cart-1", since=seqs[-2])
    assert [e["detail"]["seq"] for e in later if e["kind"] == "log"] == [seqs[-1]]
    assert len(api.logs("cart-1", since="", follow="")) == len(lines)  # empty = absent
    bad = api.http.get(f"{JOBS}/logs", params={"experiment_name": "cart-1", "since": "x"})
    assert bad.status_code == 422 and bad.json()["error_code"] == "INVALID_REQUEST"

    ckpts = api.http.get(f"{JOBS}/checkpoints", params={"experiment_name": "cart-1"})
    rows = ckpts.json()["data"]
    assert [r["steps"] for r in rows] == [100, 200, 300, 400]
    assert rows[0]["name"] == "step_100" and rows[0]["evaluation_score"] == 2.0

    names = api.http.get("/api/cli/v1/experiments/metrics", params={"experiment_name": "cart-1"})
    assert names.json()["data"] == ["train/global_step", "eval/mean_fitness"]
    details = api.http.get("/api/cli/v1/experiments/metrics",
                           params={"experiment_name": "cart-1", "details": "true"})
    assert details.json()["data"]["metrics"] == ["train/global_step", "eval/mean_fitness"]
    csv = api.http.get("/api/cli/v1/experiments/metrics", params=[
        ("experiment_name", "cart-1"), ("preview_rows", "2"), ("metric", "train/global_step")])
    assert csv.headers["content-type"].startswith("text/csv")
    assert 'filename="cart-1_metrics.csv"' in csv.headers["content-disposition"]
    assert csv.text == "train/global_step\n200\n400\n"  # population totals (pop_size 2)

    # Best checkpoint by evaluation score: step % 7 is largest for 300 (6).
    dl = api.http.get(f"{JOBS}/checkpoints/download", params={"experiment_name": "cart-1"})
    assert dl.status_code == 200
    assert dl.headers["content-type"] == "application/octet-stream"
    assert 'filename="cart-1_step_300.tar.gz"' in dl.headers["content-disposition"]
    with tarfile.open(fileobj=io.BytesIO(dl.content)) as tar:
        assert sorted(tar.getnames()) == ["step_300", "step_300/index.json",
                                          "step_300/member_0.pt"]
    named = api.http.get(f"{JOBS}/checkpoints/download",
                         params={"experiment_name": "cart-1", "checkpoint": "step_100"})
    assert 'step_100' in named.headers["content-disposition"]
    escape = api.http.get(f"{JOBS}/checkpoints/download",
                          params={"experiment_name": "cart-1", "checkpoint": "../../arena"})
    assert escape.status_code == 404

    listed = api.http.get("/api/cli/v1/experiments/list", params={"project": "default"})
    (only,) = listed.json()["data"]
    assert only["name"] == "cart-1" and only["state"] == "COMPLETED"
    assert only["algorithm"] == "DQN" and only["environment"] == "CartPole-v1"
    run_dir = srv.data_dir / "experiments" / str(only["id"])
    assert (run_dir / "manifest.json").is_file() and (run_dir / "logs.ndjson").is_file()


def test_long_logs_are_served_whole(server: Any) -> None:
    from agilerl.arena.server.runs import LogWriter

    srv, api = server
    api.submit(manifest(100, checkpoint_steps=100), experiment_name="chatty")
    row = api.wait("chatty", {"COMPLETED"})
    writer = LogWriter(srv.data_dir / "experiments" / str(row["id"]) / "logs.ndjson")
    for i in range(3000):  # ~1.7 MB: more than one read of the file
        writer.write("stdout", f"line {i} " + "x" * 500)
    writer.close()
    for follow in ("false", "true"):
        lines = [e for e in api.logs("chatty", follow=follow) if e["kind"] == "log"]
        assert lines[-1]["message"].startswith("line 2999 ")
        seqs = [e["detail"]["seq"] for e in lines]
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 3000


def test_served_logs_pass_over_lines_whose_seq_is_not_a_whole_number(server: Any) -> None:
    """A job may rewrite its log: lines whose ``seq`` is not a whole number >= 0 are left out
    of the served log (following or not), and the stream still ends with its final event."""
    srv, api = server
    api.submit(manifest(100, checkpoint_steps=100), experiment_name="rewritten")
    row = api.wait("rewritten", {"COMPLETED"})
    path = srv.data_dir / "experiments" / str(row["id"]) / "logs.ndjson"
    planted = ["Infinity", "-Infinity", "NaN", "12.5", "-3", "true", '"12"', "[1]", "{}"]
    with path.open("a") as fh:
        for seq in planted:
            fh.write(f'{{"seq": {seq}, "message": "planted {seq}"}}\n')
        fh.write('{"seq": 100000, "message": "kept"}\n')
    for follow in ("false", "true"):
        events = api.logs("rewritten", follow=follow)
        messages = [e["message"] for e in events if e["kind"] == "log"]
        assert not [m for m in messages if m.startswith("planted")]
        assert messages[-1] == "kept"
        assert events[-1]["kind"] == "status" and events[-1]["detail"]["state"] == "COMPLETED"


@pytest.mark.parametrize("seq", ["Infinity", "-Infinity", "NaN", "12.5", "-3", "true", '"12"'])
def test_a_log_goes_on_from_its_last_whole_seq(tmp_path: Path, seq: str) -> None:
    """A job may rewrite its log: a last line whose ``seq`` is not a whole number >= 0 is
    passed over like any other malformed line, and numbering goes on from the one before."""
    from agilerl.arena.server.runs import LogWriter

    path = tmp_path / "logs.ndjson"
    path.write_text('{"seq": 7, "message": "kept"}\n'
                    f'{{"seq": {seq}, "message": "planted"}}\n')
    writer = LogWriter(path)
    try:
        assert writer.write("stdout", "next") == 8
    finally:
        writer.close()


def test_follow_streams_lines_while_written(make_server: Any) -> None:
    _, api = make_server(extra_env={"JOB_STEP_S": "0.15"})
    api.submit(manifest(500, checkpoint_steps=100), experiment_name="follow")
    api.wait("follow", {"RUNNING"})
    arrivals: list[tuple[float, dict[str, Any]]] = []
    with api.http.stream("GET", f"{JOBS}/logs",
                         params={"experiment_name": "follow", "follow": "true"}) as resp:
        assert resp.headers["content-type"].startswith("application/x-ndjson")
        for line in resp.iter_lines():
            if line.strip():
                arrivals.append((time.monotonic(), ndjson(line)[0]))
    events = [e for _, e in arrivals]
    assert events[-1]["status"] == "completed"
    assert events[-1]["detail"]["state"] == "COMPLETED"
    steps = [e["message"] for e in events if e["message"].startswith("step ")]
    assert steps == ["step 100", "step 200", "step 300", "step 400", "step 500"]
    times = [t for t, e in arrivals if e["message"].startswith("step ")]
    assert times[-1] - times[0] > 0.3  # delivered as written, not in one burst at the end


def test_stop_running_job_then_resume_from_latest_checkpoint(make_server: Any) -> None:
    srv, api = make_server(extra_env={"JOB_STEP_S": "0.1"})
    api.submit(manifest(100_000, checkpoint_steps=100), experiment_name="long")
    deadline = time.monotonic() + 20
    while not api.status("long")["latest_checkpoint"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    live = api.status("long")
    assert live["state"] == "RUNNING" and live["steps"] >= 100  # read from the run's files
    resp = api.post(f"{JOBS}/stop", {"experiment_name": " long "})
    assert resp.status_code == 200 and resp.json()["data"]["state"] in {"STOPPING", "STOPPED"}
    row = api.wait("long", {"STOPPED"}, timeout=10)
    assert _states(row)[-2:] == ["STOPPING", "STOPPED"]
    again = api.post(f"{JOBS}/stop", {"experiment_name": "long"})
    assert again.status_code == 409 and again.json()["error_code"] == "INVALID_STATE"

    stopped_at = row["latest_checkpoint"]["steps"]
    zero = api.post(f"{JOBS}/resume", {"experiment_name": "long", "max_steps": 0})
    assert zero.status_code == 422
    resp = api.post(f"{JOBS}/resume", {"experiment_name": "long", "max_steps": stopped_at + 200})
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"]["attempt"] == 2
    row = api.wait("long", {"COMPLETED", "FAILED"})
    assert row["state"] == "COMPLETED" and row["steps"] == stopped_at + 200
    assert _states(row)[-6:] == ["STOPPING", "STOPPED", "QUEUED", "STARTING", "RUNNING",
                                 "COMPLETED"]
    messages = [e["message"] for e in api.logs("long") if e["kind"] == "log"]
    assert f"resuming from step_{stopped_at} at step {stopped_at}" in messages
    saved = json.loads((srv.data_dir / "experiments" / str(row["id"]) / "manifest.json")
                       .read_text())
    assert saved["training"]["max_steps"] == stopped_at + 200


def test_stop_escalates_to_sigkill_after_grace(make_server: Any) -> None:
    _, api = make_server(stop_grace_s=0.5, extra_env={"JOB_MODE": "stubborn", "JOB_STEP_S": "0.1"})
    api.submit(manifest(100_000, checkpoint_steps=100), experiment_name="stubborn")
    api.wait("stubborn", {"RUNNING"})
    started = time.monotonic()
    assert api.post(f"{JOBS}/stop", {"experiment_name": "stubborn"}).status_code == 200
    api.wait("stubborn", {"STOPPED"}, timeout=10)
    assert time.monotonic() - started >= 0.4  # SIGTERM was ignored; SIGKILL ended it


def test_stop_queued_job_and_slots_are_respected(make_server: Any) -> None:
    _, api = make_server(slots=1, extra_env={"JOB_STEP_S": "0.1"})
    api.submit(manifest(100_000, checkpoint_steps=100), experiment_name="first")
    api.submit(manifest(100_000, checkpoint_steps=100), experiment_name="second")
    api.wait("first", {"RUNNING"})
    time.sleep(0.6)
    assert api.status("second")["state"] == "QUEUED"  # one slot only
    resp = api.post(f"{JOBS}/stop", {"experiment_name": "second"})
    assert resp.json()["data"]["state"] == "STOPPED"
    assert _states(api.status("second")) == ["PENDING", "QUEUED", "STOPPED"]
    none = api.post(f"{JOBS}/resume", {"experiment_name": "second", "max_steps": 500})
    assert none.status_code == 409 and none.json()["error_code"] == "NO_CHECKPOINT"
    running = api.post(f"{JOBS}/resume", {"experiment_name": "first", "max_steps": 500})
    assert running.status_code == 409 and running.json()["error_code"] == "INVALID_STATE"
    api.post(f"{JOBS}/stop", {"experiment_name": "first"})
    api.wait("first", {"STOPPED"})


def test_failed_job_reports_error_and_follow_ends_failed(make_server: Any) -> None:
    _, api = make_server(extra_env={"JOB_MODE": "fail"})
    api.submit(manifest(400, checkpoint_steps=100), experiment_name="crash")
    row = api.wait("crash", {"COMPLETED", "FAILED"})
    assert row["state"] == "FAILED"
    assert row["error"] == "Training process exited with code 3: boom: simulated crash"
    events = api.logs("crash", follow="true")
    assert events[-1]["status"] == "failed"
    assert events[-1]["detail"]["error_code"] == "JOB_FAILED"
    resumed = api.post(f"{JOBS}/resume", {"experiment_name": "crash", "max_steps": 800})
    assert resumed.status_code == 200  # FAILED with a checkpoint may resume


def test_resumed_run_leaves_no_duplicate_metrics_rows(make_server: Any) -> None:
    srv, api = make_server(extra_env={"JOB_MODE": "fail_late"})
    api.submit(manifest(400, checkpoint_steps=100), experiment_name="torn")
    assert api.wait("torn", {"COMPLETED", "FAILED"})["state"] == "FAILED"
    csv_path = srv.data_dir / "experiments" / "1" / "run" / "metrics.csv"
    # the crash came after the 200-step row was logged but before its checkpoint
    assert csv_path.read_text().splitlines()[1:] == ["200,0.250", "400,0.500"]
    resp = api.post(f"{JOBS}/resume", {"experiment_name": "torn", "max_steps": 400})
    assert resp.status_code == 200, resp.text
    row = api.wait("torn", {"COMPLETED", "FAILED"})
    assert row["state"] == "COMPLETED" and row["steps"] == 400, row
    steps = [line.split(",")[0] for line in csv_path.read_text().splitlines()[1:]]
    assert steps == ["200", "400", "600", "800"]  # each population step once
    csv = api.http.get("/api/cli/v1/experiments/metrics", params=[
        ("experiment_name", "torn"), ("preview_rows", "10"), ("metric", "train/global_step")])
    assert csv.text.split() == ["train/global_step", "200", "400", "600", "800"]


def test_missing_worker_command_fails_the_job_cleanly(make_server: Any) -> None:
    _, api = make_server(job_command=["/nonexistent/trainer"])
    api.submit(manifest(), experiment_name="nowhere")
    row = api.wait("nowhere", {"FAILED", "COMPLETED"})
    assert row["state"] == "FAILED" and "Could not start" in row["error"]


def test_follow_waits_through_the_queue(make_server: Any) -> None:
    _, api = make_server(slots=1, extra_env={"JOB_STEP_S": "0.05"})
    api.submit(manifest(300, checkpoint_steps=100), experiment_name="a")
    api.submit(manifest(300, checkpoint_steps=100), experiment_name="b")
    result: dict[str, Any] = {}

    def follow() -> None:
        result["events"] = api.logs("b", follow="true")

    t = threading.Thread(target=follow)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    assert result["events"][-1]["detail"]["state"] == "COMPLETED"
    assert "done" in [e["message"] for e in result["events"]]


def test_worker_runs_in_its_own_folder_and_session(server: Any) -> None:
    srv, api = server
    api.submit(manifest(200, checkpoint_steps=100), experiment_name="where")
    row = api.wait("where", {"COMPLETED", "FAILED"})
    folder = srv.data_dir / "experiments" / str(row["id"])
    assert (folder / "run" / "metrics.csv").is_file()
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == ["step_100", "step_200"]
    assert os.stat(folder).st_mode & 0o077 == 0


def test_submission_returns_immediately_and_list_is_per_user(server: Any) -> None:
    srv, api = server
    other = api.post("/api/admin/tokens", {"user": "bob"}).json()["data"]["token"]
    bob = Api(srv, other)
    try:
        bob.submit(manifest(200, checkpoint_steps=100), experiment_name="bobs")
        assert api.http.get("/api/cli/v1/experiments/list").json()["data"] == []
        hidden = api.http.get(f"{JOBS}/status", params={"experiment_name": "bobs"})
        assert hidden.status_code == 404
        bob.wait("bobs", {"COMPLETED"})
    finally:
        bob.close()
