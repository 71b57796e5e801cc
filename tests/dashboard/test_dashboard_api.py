"""Issue 22 items 2 and 5: the dashboard's JSON API over run folders, without a browser."""

from __future__ import annotations

import http.client
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agilerl.cli.main import main
from agilerl.dashboard import DashboardApp, DashboardServer, RunsIndex


def _get(server: DashboardServer, path: str, method: str = "GET",
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with the raw path as given (no client-side normalisation of ``..``)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _json(server: DashboardServer, path: str) -> Any:
    status, _, body = _get(server, path)
    assert status == 200, body
    return json.loads(body)


def _run(server: DashboardServer, run_id: str, rest: str = "") -> str:
    return f"/api/runs/{quote(run_id, safe='')}{rest}"


def test_runs_list_summarises_each_run(served, runs_dir, synthetic):
    synthetic.write_run(runs_dir / "done", 12, 4, algorithm="DQN", env="LunarLander-v3")
    live = synthetic.write_run(runs_dir / "group" / "live", 5, 4, finished=False)
    runs = {r["id"]: r for r in _json(served, "/api/runs")["runs"]}
    assert set(runs) == {"done", "group/live"}
    done = runs["done"]
    assert (done["algorithm"], done["env"], done["status"]) == ("DQN", "LunarLander-v3", "finished")
    assert done["generations"] == 12 and done["steps"] == 12 * 4 * synthetic.EVO_STEPS
    metrics = _json(served, _run(served, "done", "/metrics"))
    column = metrics["columns"].index("eval/best_fitness")
    best = max(row[column] for row in metrics["rows"])
    assert done["best_fitness"] == pytest.approx(best)
    assert done["wall_seconds"] == pytest.approx(12 * 30)
    assert runs["group/live"]["status"] == "running"
    live.end("interrupted")
    assert {r["id"]: r for r in _json(served, "/api/runs")["runs"]}["group/live"]["status"] \
        == "interrupted"


def test_a_run_without_events_gets_its_names_from_the_manifest(served, runs_dir, synthetic):
    synthetic.write_run(runs_dir / "old", 3, 2, events=False, algorithm="TD3", env="Pendulum-v1")
    (run,) = _json(served, "/api/runs")["runs"]
    assert (run["algorithm"], run["env"], run["has_events"]) == ("TD3", "Pendulum-v1", False)
    assert run["status"] == "running"  # just written; "finished" once it stops changing
    events = _json(served, _run(served, "old", "/events"))
    assert events == {"events": [], "since": 0, "total": 0, "recorded": False, "file": None}


def test_metrics_and_events_come_incrementally_and_skip_a_partial_last_line(
        served, runs_dir, synthetic):
    run = synthetic.SyntheticRun(runs_dir / "r", 3).begin()
    run.generation()
    run.generation()
    first = _json(served, _run(served, "r", "/metrics"))
    assert first["total"] == 2 and first["columns"][0] == "train/global_step"
    assert [row[0] for row in first["rows"]] == [6000, 12000]
    with (runs_dir / "r" / "metrics.csv").open("a") as handle:
        handle.write("18000,3,nan,")  # a row still being written
    with (runs_dir / "r" / "events.jsonl").open("a") as handle:
        handle.write('{"v": 1, "event": "gener')
    assert _json(served, _run(served, "r", "/metrics?since=2"))["rows"] == []
    events = _json(served, _run(served, "r", "/events"))
    assert [e["event"] for e in events["events"]][:3] == ["run_start", "generation", "selection"]
    assert events["total"] == len(events["events"])
    since = _json(served, _run(served, "r", f"/events?since={events['total'] - 1}"))
    assert len(since["events"]) == 1 and since["since"] == events["total"] - 1


def test_non_finite_numbers_are_null_in_json(served, runs_dir):
    (runs_dir / "r").mkdir()
    (runs_dir / "r" / "metrics.csv").write_text("train/global_step,eval/best_fitness\n"
                                                "10,nan\n20,inf\n30,\n40,7.5\n")
    data = _json(served, _run(served, "r", "/metrics"))
    assert data["rows"] == [[10, None], [20, None], [30, None], [40, 7.5]]
    assert _json(served, "/api/runs")["runs"][0]["best_fitness"] == 7.5


def test_run_detail_has_the_manifest_checkpoints_and_files(served, runs_dir, synthetic):
    synthetic.write_run(runs_dir / "r", 10, 3, checkpoint_every=5)
    (runs_dir / "r" / "checkpoints" / "gen00011-unfinished").mkdir()  # no index.json
    detail = _json(served, _run(served, "r"))
    assert detail["manifest"].startswith("# resolved manifest") and "pop_size: 3" in detail["manifest"]
    assert [c["generation"] for c in detail["checkpoints"]] == [5, 10]
    assert {f["name"] for f in detail["checkpoints"][0]["files"]} >= {"member_0.pt", "index.json"}
    assert detail["files"] == ["elite.pt", "manifest.yaml", "metrics.csv", "events.jsonl"]


def test_checkpoints_and_files_download(served, runs_dir, synthetic):
    synthetic.write_run(runs_dir / "r", 5, 2, checkpoint_every=5)
    status, headers, body = _get(served, _run(served, "r", "/download/elite.pt"))
    assert (status, body) == (200, b"synthetic elite")
    assert headers["Content-Disposition"] == 'attachment; filename="elite.pt"'
    name = "gen00005-step0000020000"
    status, headers, body = _get(served, _run(served, "r", f"/download/checkpoints/{name}"))
    assert status == 200 and headers["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(body)) as archive:
        names = archive.getnames()
        assert archive.extractfile(f"{name}/member_1.pt").read() == b"synthetic member 1"
    assert sorted(names) == [f"{name}/index.json", f"{name}/member_0.pt", f"{name}/member_1.pt"]
    status, _, body = _get(served, _run(served, "r", f"/download/checkpoints/{name}/member_0.pt"))
    assert (status, body) == (200, b"synthetic member 0")
    assert _get(served, _run(served, "r", "/download/notes.txt"))[0] == 404


@pytest.mark.parametrize("path", [
    "/api/runs/..%2F..%2Fetc/metrics",
    "/api/runs/%2e%2e/metrics",
    "/api/runs/r/download/..%2F..%2Fsecret.txt",
    "/api/runs/r/download/checkpoints/../../../secret.txt",
    "/api/runs/r/download/checkpoints/..%5C..%5Csecret.txt",
    "/static/..%2Fapi.py",
    "/../secret.txt",
])
def test_paths_with_dot_dot_are_refused(served, runs_dir, synthetic, path):
    synthetic.write_run(runs_dir / "r", 2, 2)
    (runs_dir.parent / "secret.txt").write_text("secret")
    status, _, body = _get(served, path)
    assert status == 400 and b"secret" not in body
    assert json.loads(body)["error"].startswith("path traversal refused")


def test_a_symbolic_link_out_of_the_run_is_not_followed(served, runs_dir, synthetic, tmp_path):
    synthetic.write_run(runs_dir / "r", 5, 2, checkpoint_every=5)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "index.json").write_text("{}")
    os.symlink(tmp_path / "outside", runs_dir / "r" / "checkpoints" / "link")
    os.symlink(tmp_path / "outside", runs_dir / "linked-run")  # a run folder outside
    assert _get(served, _run(served, "r", "/download/checkpoints/link"))[0] == 404
    assert _get(served, _run(served, "r", "/download/checkpoints/link/index.json"))[0] == 404
    assert [c["name"] for c in _json(served, _run(served, "r"))["checkpoints"]] \
        == ["gen00005-step0000020000"]
    assert [r["id"] for r in _json(served, "/api/runs")["runs"]] == ["r"]


def test_every_response_carries_the_security_headers(served, runs_dir, synthetic):
    synthetic.write_run(runs_dir / "r", 2, 2)
    for path in ("/", "/static/app.js", "/api/runs", _run(served, "r"), "/nowhere",
                 "/api/runs/%2e%2e"):
        _, headers, _ = _get(served, path)
        assert headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert headers["X-Content-Type-Options"] == "nosniff"
    assert _get(served, "/static/app.js")[1]["Content-Type"].startswith("text/javascript")
    assert b"<script" not in _get(served, "/")[2].split(b"</head>")[1]  # no inline script


def test_unknown_runs_and_writes_are_refused(served, runs_dir, synthetic):
    synthetic.write_run(runs_dir / "r", 2, 2)
    assert _get(served, "/api/runs/nope")[0] == 404
    assert _get(served, "/api/runs/nope/metrics")[0] == 404
    assert _get(served, "/api/runs", method="POST")[0] == 405
    assert _get(served, "/api/runs", method="DELETE")[0] == 405


def test_a_loopback_dashboard_answers_only_to_loopback_names(served):
    assert _get(served, "/api/runs", headers={"Host": "localhost:8050"})[0] == 200
    assert _get(served, "/api/runs", headers={"Host": "evil.example:8050"})[0] == 403


def test_several_roots_prefix_their_run_ids(tmp_path, synthetic):
    for root in ("a", "b"):
        synthetic.write_run(tmp_path / root / "same", 2, 2)
    app = DashboardApp(RunsIndex([tmp_path / "a", tmp_path / "b"]))
    ids = [run["id"] for run in json.loads(app.handle("GET", "/api/runs").body)["runs"]]
    assert ids == ["0/same", "1/same"]
    assert app.handle("GET", "/api/runs/1%2Fsame/metrics").status == 200
    single = DashboardApp(RunsIndex([tmp_path / "a" / "same"]))  # a run folder as RUNS_DIR
    assert [r["id"] for r in json.loads(single.handle("GET", "/api/runs").body)["runs"]] \
        == ["same"]


@pytest.mark.filterwarnings("ignore:no replay_buffer section")
def test_a_real_training_run_folder(tmp_path):
    from agilerl import LocalTrainer
    from agilerl.models import TrainingSpec

    spec = TrainingSpec(max_steps=64, evo_steps=32, pop_size=2, eval_steps=20)
    LocalTrainer("DQN", "CartPole-v1", seed=0, training=spec).train(
        verbose=False, run_dir=tmp_path / "run")
    app = DashboardApp(RunsIndex([tmp_path]))
    (run,) = json.loads(app.handle("GET", "/api/runs").body)["runs"]
    assert (run["algorithm"], run["env"], run["pop_size"]) == ("DQN", "CartPole-v1", 2)
    assert run["steps"] > 0 and run["generations"] >= 1 and run["best_fitness"] is not None
    metrics = json.loads(app.handle("GET", "/api/runs/run/metrics").body)
    assert {"eval/best_fitness", "eval/agent_1/fitness", "train/agent_0/lr"} \
        <= set(metrics["columns"])


def test_cli_errors_name_the_folder_and_port(tmp_path, capsys):
    missing = tmp_path / "missing"
    assert main(["dashboard", str(missing)]) == 1
    assert f"RUNS_DIR {missing} is not a folder" in capsys.readouterr().err
    busy = DashboardServer([tmp_path], port=0)
    try:
        port = busy.server_address[1]
        assert main(["dashboard", str(tmp_path), "--port", str(port)]) == 1
        assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    finally:
        busy.server_close()
    assert main(["dashboard", str(tmp_path), "--port", "70000"]) == 2


def test_static_assets_are_package_files():
    static = Path(__file__).resolve().parents[2] / "agilerl" / "dashboard" / "static"
    assert {"index.html", "app.js", "chart.js", "style.css"} <= {p.name for p in static.iterdir()}
    pyproject = (static.parents[2] / "pyproject.toml").read_text()
    assert '"dashboard/static/*"' in pyproject


def test_the_command_serves_until_interrupted(runs_dir, synthetic):
    import re
    import signal
    import subprocess
    import sys

    synthetic.write_run(runs_dir / "r", 2, 2)
    repo = Path(__file__).resolve().parents[2]
    # Ctrl-C in a terminal: SIGINT at its default, whatever this runner inherited (a suite
    # started in the background by a shell without job control ignores it, and so would
    # the child)
    process = subprocess.Popen(
        [sys.executable, "-m", "agilerl", "dashboard", str(runs_dir), "--port", "0"],
        cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = process.stdout.readline()  # type: ignore[union-attr]
        match = re.search(r"at http://127\.0\.0\.1:(\d+)/ \(Ctrl-C to stop\)", line)
        assert match, line + process.stderr.read()  # type: ignore[union-attr]
        connection = http.client.HTTPConnection("127.0.0.1", int(match.group(1)), timeout=10)
        connection.request("GET", "/api/runs")
        runs = json.loads(connection.getresponse().read())["runs"]
        assert [run["id"] for run in runs] == ["r"]
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and "Traceback" not in err


def test_a_resumed_run_goes_on_and_counts_only_its_training_time(served, runs_dir):
    folder = runs_dir / "resumed"
    folder.mkdir()

    def event(kind: str, minute: int, **fields: Any) -> str:
        return json.dumps({"v": 1, "event": kind, "time": f"2026-12-02T12:{minute:02d}:00Z",
                           **fields})

    start = {"algorithm": "PPO", "env": "CartPole-v1", "pop_size": 2}
    (folder / "events.jsonl").write_text("\n".join([
        event("run_start", 0, generation=0, **start),
        event("generation", 1, generation=1, members=[]),
        event("run_end", 2, status="interrupted", generations=1, best_fitness=3.0),
        event("run_start", 40, generation=1, **start),  # resumed 38 minutes later
        event("generation", 43, generation=2, members=[]),
    ]) + "\n")
    (run,) = _json(served, "/api/runs")["runs"]
    assert run["status"] == "running" and run["wall_seconds"] == 5 * 60
    first = _json(served, _run(served, "resumed", "/events"))["file"]
    lines = (folder / "events.jsonl").read_text().splitlines()[:2]
    (folder / "rewrite.tmp").write_text("\n".join(lines) + "\n")
    os.replace(folder / "rewrite.tmp", folder / "events.jsonl")  # as the writer drops events
    again = _json(served, _run(served, "resumed", "/events?since=5"))
    assert again["file"] != first and again["total"] == 2


def test_unreadable_files_and_bugs_answer_500_not_a_dropped_connection(
        served, runs_dir, synthetic, monkeypatch):
    import agilerl.dashboard.api as api

    synthetic.write_run(runs_dir / "r", 2, 2)

    def denied(run: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(api, "read_metrics", denied)
    status, _, body = _get(served, "/api/runs/r/metrics")
    assert status == 500
    assert json.loads(body)["error"] == "cannot read the run's files: Permission denied"

    def broken(self: Any, method: str, target: str) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(DashboardApp, "handle", broken)
    status, headers, body = _get(served, "/api/runs")
    assert status == 500 and json.loads(body) == {"error": "internal error: RuntimeError"}
    assert headers["X-Content-Type-Options"] == "nosniff"
