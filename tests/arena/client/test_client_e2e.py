"""The real client and the real ``arena`` CLI against a real server on 127.0.0.1.

The server runs jobs with the server tests' stand-in worker (counts steps, prints lines,
writes checkpoints and a metrics CSV), so a job takes well under a second.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from agilerl.arena.client import ArenaClient
from agilerl.arena.errors import ArenaAPIError, ArenaAuthError, ArenaTrainingError
from agilerl.arena.server.testing import RunningServer, running_server
from agilerl.arena.stream import LogEvent

REPO = Path(__file__).resolve().parents[3]
JOB_SCRIPT = [sys.executable, str(REPO / "tests" / "arena" / "server" / "job_script.py")]

MANIFEST = {
    "algorithm": {"name": "DQN", "batch_size": 32},
    "environment": {"name": "CartPole-v1", "num_envs": 1},
    "training": {"max_steps": 400, "evo_steps": 100, "pop_size": 1},
}


@pytest.fixture
def job_env() -> dict[str, str]:
    """Variables the stand-in worker gets (jobs see only an allow-listed environment);
    set them before submitting."""
    return {}


@pytest.fixture
def srv(tmp_path: Path, job_env: dict[str, str]) -> Iterator[RunningServer]:
    with running_server(
        tmp_path / "server",
        job_command=JOB_SCRIPT,
        device_poll_interval_s=0,
        stop_grace_s=2.0,
        extra_env=job_env,  # the same dict: read when each job starts
    ) as server:
        yield server


@pytest.fixture
def client(srv: RunningServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[ArenaClient]:
    monkeypatch.setenv("ARENA_BASE_URL", srv.base_url)
    with ArenaClient(api_key=srv.token, verbose=False) as arena:
        arena.create_project("demo")
        yield arena


@pytest.fixture
def manifest_file(tmp_path: Path) -> Path:
    path = tmp_path / "dqn.yaml"
    path.write_text(yaml.safe_dump(MANIFEST))
    return path


def run_cli(
    home: Path, srv: RunningServer, *args: str, stdin: str | None = None, api_key: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env.update(HOME=str(home), ARENA_BASE_URL=srv.base_url)
    if api_key:
        env["ARENA_API_KEY"] = api_key
    return subprocess.run(
        [sys.executable, "-m", "agilerl.arena.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- auth ----------------------------------------------------------------------------------
def test_cli_token_login_profile_and_private_credentials(srv, isolated_home) -> None:
    out = run_cli(isolated_home, srv, "login", "--api-key", "-", stdin=srv.token + "\n")
    assert out.returncode == 0, out.stderr
    cred = isolated_home / ".arena" / "credentials.json"
    assert stat.S_IMODE(cred.stat().st_mode) == 0o600
    assert stat.S_IMODE(cred.parent.stat().st_mode) == 0o700
    assert srv.token not in out.stdout + out.stderr
    profile = run_cli(isolated_home, srv, "--json", "user", "profile")
    assert profile.returncode == 0, profile.stderr
    assert json.loads(profile.stdout)["first_name"] or json.loads(profile.stdout)["email"]
    assert run_cli(isolated_home, srv, "logout").returncode == 0
    assert not cred.exists()
    after = run_cli(isolated_home, srv, "user", "profile")
    assert after.returncode == 1 and "Not signed in" in after.stderr
    assert "Traceback" not in after.stderr


def test_device_login_against_the_server(srv, monkeypatch) -> None:
    monkeypatch.setenv("ARENA_BASE_URL", srv.base_url)
    approver = httpx.Client(base_url=srv.base_url, headers=srv.headers)

    def approve(url: str, user_code: str | None) -> None:
        assert user_code and user_code in url
        answer = approver.post("/api/admin/device/approve", json={"user_code": user_code})
        assert answer.status_code == 200, answer.text

    with ArenaClient(verbose=False) as arena:
        arena.login(timeout=30, open_browser=False, prompt=approve)
        assert arena.get_user_profile()
    approver.close()
    stored = json.loads((Path.home() / ".arena" / "credentials.json").read_text())
    assert stored["access_token"].count(".") == 2 and stored["refresh_token"]
    with ArenaClient(verbose=False) as again:  # the stored login is picked up
        assert again.list_projects() == []


def test_cli_device_login_in_a_subprocess(srv, isolated_home) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env.update(HOME=str(isolated_home), ARENA_BASE_URL=srv.base_url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agilerl.arena.cli", "login", "--no-browser", "--timeout", "60"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        prompt = proc.stderr.readline()
        code = prompt.strip().rsplit(" ", 1)[-1]
        answer = httpx.post(
            f"{srv.base_url}/api/admin/device/approve",
            json={"user_code": code},
            headers=srv.headers,
        )
        assert answer.status_code == 200, (prompt, answer.text)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (isolated_home / ".arena" / "credentials.json").exists()


def test_bad_key_is_refused_without_traceback(srv, isolated_home) -> None:
    out = run_cli(isolated_home, srv, "projects", "list", api_key="arena_pat_nope_nope")
    assert out.returncode == 1
    assert "Invalid API key" in out.stderr and "Traceback" not in out.stderr
    assert "arena_pat_nope_nope" not in out.stderr
    with (
        pytest.raises(ArenaAuthError),
        ArenaClient(api_key="wrong", base_url=srv.base_url, verbose=False) as arena,
    ):
        arena.list_projects()


# -- projects and usage ----------------------------------------------------------------------
def test_cli_projects_and_json_output(srv, isolated_home) -> None:
    key = srv.token
    assert run_cli(isolated_home, srv, "projects", "create", "alpha", api_key=key).returncode == 0
    dup = run_cli(isolated_home, srv, "projects", "create", "alpha", api_key=key)
    assert dup.returncode == 1 and "409" in dup.stderr and "Traceback" not in dup.stderr
    listed = run_cli(isolated_home, srv, "projects", "list", "--json", api_key=key)
    assert [p["name"] for p in json.loads(listed.stdout)] == ["alpha"]
    table = run_cli(isolated_home, srv, "projects", "list", api_key=key)
    assert "Name" in table.stdout and "alpha" in table.stdout
    assert (
        run_cli(isolated_home, srv, "projects", "set-default", "alpha", api_key=key).returncode == 0
    )
    default = run_cli(isolated_home, srv, "projects", "get-default", "--json")
    assert json.loads(default.stdout) == {"default_project": "alpha"}
    aborted = run_cli(isolated_home, srv, "projects", "delete", "alpha", stdin="n\n", api_key=key)
    assert aborted.returncode == 0 and "Aborted" in aborted.stdout
    deleted = run_cli(isolated_home, srv, "projects", "delete", "alpha", "--yes", api_key=key)
    assert deleted.returncode == 0


def test_usage_errors_exit_2(srv, isolated_home) -> None:
    for args in (
        ["experiments", "resume", "x"],  # --max-steps missing
        ["--request-timeout", "0", "projects", "list"],
        ["experiments", "bogus"],
        ["projects"],
    ):
        out = run_cli(isolated_home, srv, *args)
        assert out.returncode == 2, (args, out.stderr)
        assert "Traceback" not in out.stderr


def test_resources_and_environments(client, srv, isolated_home) -> None:
    tiers = client.list_resources()["tiers"]
    assert tiers
    assert client.environment_exists("CartPole-v1") is True
    out = run_cli(isolated_home, srv, "resources", "list", api_key=srv.token)
    assert out.returncode == 0 and next(iter(tiers)) in out.stdout
    out = run_cli(isolated_home, srv, "env", "exists", "CartPole-v1", api_key=srv.token)
    assert out.stdout.strip() == "True"
    missing = run_cli(isolated_home, srv, "env", "entrypoints", "NoSuchEnv-v0", api_key=srv.token)
    assert missing.returncode == 1 and "404" in missing.stderr
    as_json = run_cli(
        isolated_home, srv, "--json", "experiments", "status", "nope", api_key=srv.token
    )
    assert as_json.returncode == 1 and as_json.stdout == ""
    error = json.loads(as_json.stderr)
    assert error["ok"] is False and error["status_code"] == 404


# -- experiments ---------------------------------------------------------------------------------
def _wait_state(client: ArenaClient, name: str, states: set[str], limit: float = 60) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        row = client.get_experiment_status(name, "demo")
        if row["state"] in states:
            return row
        time.sleep(0.05)
    raise AssertionError(f"{name} never reached {states}: {row}")


def test_submit_follow_checkpoints_metrics_download(client, manifest_file, tmp_path) -> None:
    ack = client.submit_experiment(manifest_file, project="demo", experiment_name="run-1")
    assert ack["accepted"] is True and ack["experiment_name"] == "run-1"
    lines = list(client.iter_log_lines("run-1", follow=True))
    assert any("step 400" in line for line in lines)
    final = client.wait_for_experiment("run-1", project="demo", timeout=60)
    assert final["state"] == "COMPLETED"
    checkpoints = client.list_checkpoints("run-1")
    assert max(c["steps"] for c in checkpoints) == 400
    path = client.download_checkpoint("run-1", output_path=tmp_path)
    assert path.parent == tmp_path and path.stat().st_size > 0
    names = client.list_experiment_metric_names("run-1", project="demo")
    assert "train/global_step" in json.dumps(names)
    saved = client.download_experiment_metrics("run-1", tmp_path / "m.csv")
    assert saved.read_text().startswith("train/global_step")
    rows = client.list_experiments("demo")
    assert [r["name"] for r in rows] == ["run-1"]


def test_retried_submit_with_the_same_key_creates_one_experiment(client, manifest_file) -> None:
    first = client.submit_experiment(manifest_file, project="demo", idempotency_key="same-key")
    second = client.submit_experiment(manifest_file, project="demo", idempotency_key="same-key")
    assert first["experiment_id"] == second["experiment_id"]
    assert len(client.list_experiments("demo")) == 1


def test_stop_and_resume(client, manifest_file, job_env) -> None:
    job_env["JOB_STEP_S"] = "0.5"
    manifest = {**MANIFEST, "training": {**MANIFEST["training"], "max_steps": 10_000}}
    client.submit_experiment(manifest, project="demo", experiment_name="long")
    _wait_state(client, "long", {"RUNNING"})
    client.stop_experiment("long")
    assert _wait_state(client, "long", {"STOPPED"})["state"] == "STOPPED"
    with pytest.raises(ArenaAPIError) as info:
        client.stop_experiment("long")
    assert info.value.status_code == 409
    if client.list_checkpoints("long"):
        client.resume_experiment("long", 20_000)
        assert _wait_state(client, "long", {"QUEUED", "STARTING", "RUNNING"})
        client.stop_experiment("long")


def test_refusals_are_mapped(client, srv) -> None:
    with pytest.raises(ArenaAPIError) as info:
        client.get_experiment_status("no-such-run", "demo")
    assert info.value.status_code == 404 and "Traceback" not in str(info.value)
    with pytest.raises(ArenaTrainingError) as refused:
        client.submit_experiment(MANIFEST, project="no-such-project")
    assert refused.value.status_code in (400, 404)
    big = {**MANIFEST, "training": {**MANIFEST["training"], "max_steps": 10**9, "pop_size": 10}}
    with pytest.raises(ArenaTrainingError) as capped:
        client.submit_experiment(big, project="demo")
    assert capped.value.status_code == 422


def test_cli_submit_wait_logs_status_json(srv, isolated_home, manifest_file) -> None:
    key = srv.token
    assert run_cli(isolated_home, srv, "projects", "create", "p", api_key=key).returncode == 0
    out = run_cli(
        isolated_home,
        srv,
        "--json",
        "experiments",
        "submit",
        str(manifest_file),
        "--project",
        "p",
        "--experiment-name",
        "cli-run",
        "--wait",
        api_key=key,
    )
    assert out.returncode == 0, out.stderr
    assert '"COMPLETED"' in out.stdout
    logs = run_cli(isolated_home, srv, "experiments", "logs", "cli-run", "--follow", api_key=key)
    assert logs.returncode == 0 and "step 400" in logs.stdout
    status = run_cli(
        isolated_home,
        srv,
        "experiments",
        "status",
        "cli-run",
        "--project",
        "p",
        "--json",
        api_key=key,
    )
    assert json.loads(status.stdout)["state"] == "COMPLETED"
    table = run_cli(isolated_home, srv, "experiments", "checkpoints", "cli-run", api_key=key)
    assert table.returncode == 0 and table.stdout.splitlines()[0].startswith("steps")


def test_cli_bad_manifest_is_reported_with_its_location(srv, isolated_home, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("algorithm:\n  name: DQN\n  batch_size: -3\nenvironment:\n  name: CartPole-v1\n")
    out = run_cli(isolated_home, srv, "experiments", "submit", str(bad), api_key=srv.token)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert "batch_size" in out.stderr and "bad.yaml:3" in out.stderr
    missing = run_cli(isolated_home, srv, "experiments", "submit", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_log_events_carry_sequence_numbers(client, manifest_file) -> None:
    client.submit_experiment(manifest_file, project="demo", experiment_name="seq")
    client.wait_for_experiment("seq", project="demo", timeout=60)
    with client.stream_experiment_logs("seq") as stream:
        events = [e for e in stream if isinstance(e, LogEvent)]
    seqs = [e.detail["seq"] for e in events]
    assert seqs == sorted(seqs) and len(seqs) >= 3
    tail = list(client.iter_log_lines("seq", since=seqs[-2]))
    assert tail == [events[-1].text]


class LoseFirstAnswer(httpx.BaseTransport):
    """Forwards to the real server, but drops the first submit answer after the server
    has processed it (a connection reset on the way back)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/jobs/submit") and self.lost == 0:
            response.read()
            response.close()
            self.lost += 1
            raise httpx.ReadError("connection reset by peer", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


def test_lost_answers_are_retried_without_duplicates_under_concurrency(
    client, srv, manifest_file
) -> None:
    # No experiment names: the server names them, so a duplicate would be a new row.
    def submit(_: int) -> dict:
        transport = LoseFirstAnswer()
        with ArenaClient(
            api_key=srv.token,
            base_url=srv.base_url,
            verbose=False,
            transport=transport,
            sleep=lambda s: None,
        ) as arena:
            ack = arena.submit_experiment(manifest_file, project="demo")
        assert transport.lost == 1  # the first answer really was lost
        return ack

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=6) as pool:
        acks = list(pool.map(submit, range(12)))
    rows = client.list_experiments("demo")
    assert len({a["experiment_id"] for a in acks}) == 12
    assert sorted(r["name"] for r in rows) == sorted(a["experiment_name"] for a in acks)


def test_arena_trainer_runs_a_real_training_job(tmp_path: Path, monkeypatch) -> None:
    """ArenaTrainer -> server -> `agilerl train` (real DQN on CartPole) -> COMPLETED."""
    from agilerl.arena.trainer import ArenaTrainer

    manifest = {
        "algorithm": {"name": "DQN", "batch_size": 16, "learn_step": 1},
        "environment": {"name": "CartPole-v1", "num_envs": 1},
        "training": {"max_steps": 256, "evo_steps": 128, "pop_size": 2, "learning_delay": 0},
        "network": {
            "latent_dim": 16,
            "encoder_config": {"hidden_size": [16]},
            "head_config": {"hidden_size": [16]},
        },
    }
    with running_server(tmp_path / "real", stop_grace_s=2.0) as server:  # the real worker
        monkeypatch.setenv("ARENA_BASE_URL", server.base_url)
        with ArenaClient(api_key=server.token, verbose=False) as arena:
            arena.create_project("demo")
            trainer = ArenaTrainer.from_manifest(manifest=manifest, client=arena)
            final = trainer.train(
                project="demo", experiment_name="real", wait=True, poll_interval=0.5, timeout=240
            )
            assert final["state"] == "COMPLETED", final
            assert final["steps"] >= 256
            checkpoints = trainer.list_checkpoints("real")
            assert checkpoints and max(c["steps"] for c in checkpoints) >= 256
            log = "\n".join(arena.iter_log_lines("real"))
            assert "Training summary" in log
            names = arena.list_experiment_metric_names("real", project="demo")
            assert "eval/mean_fitness" in names
            assert [e["name"] for e in trainer.list_experiments("demo")] == ["real"]


def test_cli_reports_a_failed_job_with_exit_1(srv, isolated_home, manifest_file, job_env):
    job_env["JOB_MODE"] = "fail"  # the stand-in worker crashes after a checkpoint
    key = srv.token
    assert run_cli(isolated_home, srv, "projects", "create", "p", api_key=key).returncode == 0
    out = run_cli(
        isolated_home,
        srv,
        "experiments",
        "submit",
        str(manifest_file),
        "--project",
        "p",
        "--experiment-name",
        "crash",
        "--wait",
        api_key=key,
    )
    assert out.returncode == 1 and "FAILED" in out.stderr, out.stderr
    logs = run_cli(isolated_home, srv, "experiments", "logs", "crash", "--follow", api_key=key)
    assert logs.returncode == 1
    assert "boom: simulated crash" in logs.stdout
    assert "Traceback" not in logs.stderr
