"""Refusals with the right status and ``error_code``, limits, idempotency and concurrency."""

from __future__ import annotations

import json
import sqlite3
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from .conftest import manifest

JOBS = "/api/cli/v1/experiments/jobs"


def _err(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["ok"] is False and body["error_code"] == code, body
    assert body["error"]
    return dict(body)


def test_404s(server: Any) -> None:
    _, api = server
    _err(api.http.get(f"{JOBS}/status", params={"experiment_name": "ghost"}), 404,
         "EXPERIMENT_NOT_FOUND")
    _err(api.http.get(f"{JOBS}/logs", params={"experiment_name": "ghost"}), 404,
         "EXPERIMENT_NOT_FOUND")
    _err(api.post(f"{JOBS}/stop", {"experiment_name": "ghost"}), 404, "EXPERIMENT_NOT_FOUND")
    _err(api.submit_raw({"manifest": manifest(), "project": "nope"}), 404, "PROJECT_NOT_FOUND")
    _err(api.http.get("/api/cli/v1/experiments/list", params={"project": "nope"}), 404,
         "PROJECT_NOT_FOUND")
    man = manifest()
    man["environment"]["name"] = "NoSuchEnv-v0"
    body = _err(api.submit_raw({"manifest": man}), 404, "ENVIRONMENT_NOT_FOUND")
    # The reference client promotes this message to ArenaEnvironmentNotFoundError.
    assert body["error"] == "Environment 'NoSuchEnv-v0' not found"
    _err(api.http.get("/api/cli/v1/no-such-route"), 404, "NOT_FOUND")


def test_409s(server: Any) -> None:
    _, api = server
    api.submit(experiment_name="twin")
    _err(api.submit_raw({"manifest": manifest(), "experiment_name": "twin"}), 409,
         "NAME_CONFLICT")
    assert api.post("/api/cli/v1/projects/create", {"name": "p"}).status_code == 201
    _err(api.post("/api/cli/v1/projects/create", {"name": "p"}), 409, "PROJECT_EXISTS")
    api.submit(experiment_name="in-p", project="p")
    resp = api.http.request("DELETE", "/api/cli/v1/projects/delete", json={"name": "p"})
    _err(resp, 409, "PROJECT_NOT_EMPTY")
    api.wait("twin", {"COMPLETED"})
    _err(api.post(f"{JOBS}/stop", {"experiment_name": "twin"}), 409, "INVALID_STATE")


def test_413_for_bodies_and_uploads(make_server: Any) -> None:
    _, api = make_server(max_body_bytes=10_000, max_upload_bytes=20_000)
    big = manifest()
    big["algorithm"]["padding"] = "x" * 20_000
    _err(api.submit_raw({"manifest": big}), 413, "PAYLOAD_TOO_LARGE")
    files = {"reward_file": ("reward.py", b"#" * 30_000, "text/x-python")}
    resp = api.http.post(f"{JOBS}/submit", data={"manifest": json.dumps(manifest())},
                         files=files)
    _err(resp, 413, "PAYLOAD_TOO_LARGE")

    def chunks() -> Any:  # no Content-Length: counted while read
        for _ in range(30):
            yield b" " * 1000

    resp = api.http.post("/api/cli/v1/projects/create", content=chunks(),
                         headers={"content-type": "application/json"})
    _err(resp, 413, "PAYLOAD_TOO_LARGE")
    assert api.http.get("/api/users/current").status_code == 200  # server still fine


def test_422_manifest_errors_are_located(server: Any) -> None:
    _, api = server
    bad = manifest()
    bad["training"]["max_steps"] = -5
    body = _err(api.submit_raw({"manifest": bad}), 422, "MANIFEST_INVALID")
    assert any(e.startswith("training.max_steps:") for e in body["errors"]), body
    body = _err(api.submit_raw({"manifest": {"environment": {"name": "CartPole-v1"}}}), 422,
                "MANIFEST_INVALID")
    assert any(e.startswith("algorithm") for e in body["errors"]), body
    _err(api.submit_raw({"manifest": "not an object"}), 422, "MANIFEST_INVALID")
    _err(api.submit_raw({"no_manifest": 1}), 422, "INVALID_REQUEST")
    _err(api.submit_raw({"manifest": manifest(), "num_nodes": 0}), 422, "INVALID_REQUEST")
    _err(api.submit_raw({"manifest": manifest(), "experiment_name": "../../etc"}), 422,
         "INVALID_REQUEST")
    for raw in (b"{not json", b'{"manifest": {"training": {"max_steps": NaN}}}'):
        resp = api.http.post(f"{JOBS}/submit", content=raw,
                             headers={"content-type": "application/json"})
        _err(resp, 400, "INVALID_JSON")
    _err(api.post(f"{JOBS}/resume", {"experiment_name": "x", "max_steps": "many"}), 422,
         "INVALID_REQUEST")


def test_422_custom_code_paths_and_budget(make_server: Any) -> None:
    _, api = make_server(max_total_steps=50_000)
    for env in ({"name": "Mine-v0", "entrypoint": "my_env:MyEnv"},
                {"name": "my_pkg.envs:Custom-v0"},
                {"name": "CartPole-v1", "wrappers": ["my_mod:Wrap"]}):
        man = manifest(1000)
        man["environment"] = {**env, "num_envs": 1}
        body = _err(api.submit_raw({"manifest": man}), 422, "CUSTOM_CODE_DISABLED")
        assert all("refused" in e for e in body["errors"])
    files = {"reward_file": ("reward.py", b"def reward(q, a, c): return 1.0", "text/x-python")}
    resp = api.http.post(f"{JOBS}/submit", data={"manifest": json.dumps(manifest(1000))},
                         files=files)
    _err(resp, 422, "CUSTOM_CODE_DISABLED")

    for path in ("/etc/passwd", "../../outside", "~/x", "ok/../../out"):
        man = manifest(1000, checkpoint_path=path)
        body = _err(api.submit_raw({"manifest": man}), 422, "PATH_OUTSIDE_EXPERIMENT")
        assert body["errors"][0].startswith("training.checkpoint_path:")
    inside = api.submit_raw({"manifest": manifest(1000, checkpoint_path="ckpt/here")})
    assert inside.status_code == 200

    body = _err(api.submit_raw({"manifest": manifest(10_000)}), 422, "BUDGET_EXCEEDED")
    assert "20000 training" in body["error"]  # pop_size 2 x max_steps 10000


def test_budget_counts_every_field_that_multiplies_work(make_server: Any) -> None:
    _, api = make_server(max_total_steps=100_000, max_envs=8)

    def man(**training: Any) -> dict[str, Any]:
        m = manifest(1000, **{"evo_steps": 100, "eval_steps": 30, "eval_loop": 1, **training})
        m["environment"]["num_envs"] = 2
        return m

    # 2 agents x 1000 = 2000 training; 2 x 10 generations x 1 x 30 x 2 = 1200 evaluation
    assert api.submit_raw({"manifest": man()}).status_code == 200
    for field, value in (("eval_loop", 200), ("eval_steps", 3000), ("evo_steps", 1),
                         ("pop_size", 100)):
        body = _err(api.submit_raw({"manifest": man(**{field: value})}), 422,
                    "BUDGET_EXCEEDED")
        assert any(f"training.{field}: {value}" in line for line in body["errors"]), body
        assert body["limit"] == 100_000
    many_envs = man()
    many_envs["environment"]["num_envs"] = 8  # within max_envs, but 4x the evaluation
    many_envs["training"]["eval_steps"] = 700
    body = _err(api.submit_raw({"manifest": many_envs}), 422, "BUDGET_EXCEEDED")
    assert any("environment.num_envs: 8" in line for line in body["errors"]), body
    many_envs["environment"]["num_envs"] = 9
    body = _err(api.submit_raw({"manifest": many_envs}), 422, "BUDGET_EXCEEDED")
    assert body["errors"] == ["environment.num_envs: 9 > 8"]
    unbounded = man()
    del unbounded["training"]["eval_steps"]  # episodes to termination: counted as 1000 steps
    unbounded["training"]["eval_loop"] = 3  # 2 x 10 x 3 x 1000 x 2 = 120000 evaluation steps
    body = _err(api.submit_raw({"manifest": unbounded}), 422, "BUDGET_EXCEEDED")
    assert any("eval_steps: null (counted as 1000)" in line for line in body["errors"])


def test_custom_code_allowed_when_opted_in(make_server: Any) -> None:
    srv, api = make_server(allow_custom_code=True)
    man = manifest(1000)
    man["environment"] = {"name": "Mine-v0", "entrypoint": "my_env:MyEnv", "num_envs": 1}
    assert api.submit_raw({"manifest": man}).status_code == 200
    files = {"reward_file": ("reward.py", b"def reward(q, a, c): return 1.0", "text/x-python")}
    resp = api.http.post(f"{JOBS}/submit", files=files, data={
        "manifest": json.dumps(manifest(300)), "experiment_name": "with-reward",
        "resource_id": "arena-medium", "num_nodes": "1"})
    assert resp.status_code == 200, resp.text
    events = [json.loads(line) for line in resp.text.splitlines()]
    warnings = [e["message"] for e in events if e["kind"] == "warning"]
    assert any("arena-medium" in w for w in warnings)
    row = api.status("with-reward")
    folder = srv.data_dir / "experiments" / str(row["id"])
    assert (folder / "reward.py").read_bytes() == b"def reward(q, a, c): return 1.0"
    assert row["resource_id"] == "local-cpu" and row["num_nodes"] == 1
    man["environment"]["path"] = "/abs/dir"
    _err(api.submit_raw({"manifest": man}), 422, "PATH_OUTSIDE_EXPERIMENT")


def test_more_than_one_node_is_refused_by_a_slot_server(server: Any) -> None:
    _, api = server
    body = _err(api.submit_raw({"manifest": manifest(), "num_nodes": 2,
                                "experiment_name": "two-nodes"}), 422, "INVALID_REQUEST")
    assert "num_nodes=2" in body["error"] and "--ray-address" in body["error"], body
    assert any(e.startswith("num_nodes:") for e in body["errors"]), body
    listed = api.http.get("/api/cli/v1/experiments/list").json()["data"]
    assert all(r["name"] != "two-nodes" for r in listed)


def test_429_active_jobs_per_user(make_server: Any) -> None:
    _, api = make_server(max_active_jobs_per_user=2, extra_env={"JOB_STEP_S": "0.2"})
    api.submit(manifest(100_000, checkpoint_steps=100), experiment_name="a")
    api.submit(manifest(100_000, checkpoint_steps=100), experiment_name="b")
    body = _err(api.submit_raw({"manifest": manifest()}), 429, "TOO_MANY_JOBS")
    assert body["limit"] == 2
    api.post(f"{JOBS}/stop", {"experiment_name": "a"})
    api.wait("a", {"STOPPED"})
    assert api.submit_raw({"manifest": manifest(), "experiment_name": "c"}).status_code == 200
    api.post(f"{JOBS}/stop", {"experiment_name": "b"})
    api.post(f"{JOBS}/stop", {"experiment_name": "c"})


def test_idempotent_retry_creates_one_experiment(server: Any) -> None:
    srv, api = server
    key = str(uuid.uuid4())
    first = api.submit(key=key)
    second = api.submit(key=key)
    assert second["experiment_id"] == first["experiment_id"]
    assert second["experiment_name"] == first["experiment_name"]
    assert first["created"] is True and second["created"] is False
    other = api.submit(key=str(uuid.uuid4()))
    assert other["experiment_id"] != first["experiment_id"]
    assert len(api.http.get("/api/cli/v1/experiments/list").json()["data"]) == 2
    # The same key from another user is that user's own key.
    token = api.post("/api/admin/tokens", {"user": "carol"}).json()["data"]["token"]
    resp = httpx.post(f"{srv.base_url}{JOBS}/submit", json={"manifest": manifest()},
                      headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key})
    carol = json.loads(resp.text.splitlines()[-1])["detail"]
    assert carol["experiment_id"] != first["experiment_id"] and carol["created"] is True


def test_100_concurrent_submissions_none_lost_none_duplicated(make_server: Any) -> None:
    srv, api = make_server(job_command=["/bin/true"], max_active_jobs_per_user=1000)
    keys = [str(uuid.uuid4()) for _ in range(100)]
    # Every key is sent twice, concurrently: 200 requests, 100 experiments expected.
    work = keys + keys

    limits = httpx.Limits(max_connections=32)
    with httpx.Client(base_url=srv.base_url, headers=api.http.headers, timeout=60,
                      limits=limits) as shared:

        def send(key: str) -> int:
            resp = shared.post(f"{JOBS}/submit", json={"manifest": manifest()},
                               headers={"Idempotency-Key": key})
            assert resp.status_code == 200, resp.text
            return int(json.loads(resp.text.splitlines()[-1])["detail"]["experiment_id"])

        with ThreadPoolExecutor(max_workers=32) as pool:
            ids = list(pool.map(send, work))
    by_key: dict[str, set[int]] = {}
    for key, exp_id in zip(work, ids, strict=True):
        by_key.setdefault(key, set()).add(exp_id)
    assert all(len(v) == 1 for v in by_key.values())  # a retry never duplicates
    assert len(set(ids)) == 100  # no two keys share an experiment: none lost
    rows = api.http.get("/api/cli/v1/experiments/list").json()["data"]
    assert len(rows) == 100
    db = sqlite3.connect(srv.data_dir / "arena.sqlite3")
    try:
        (count,) = db.execute("SELECT COUNT(*) FROM experiments").fetchone()
        (queued,) = db.execute(
            "SELECT COUNT(*) FROM transitions WHERE to_state = 'QUEUED'").fetchone()
    finally:
        db.close()
    assert count == 100 and queued == 100


def test_generated_names_never_collide(server: Any, monkeypatch: Any) -> None:
    from agilerl.arena.server import submission

    _, api = server
    draws = iter(["aa", "aa", "aa", "bb"])
    monkeypatch.setattr(submission.secrets, "token_hex", lambda n: next(draws))
    first = api.submit()["experiment_name"]
    second = api.submit()["experiment_name"]
    assert first == "dqn-cartpole-v1-aa" and second == "dqn-cartpole-v1-bb"


def test_json_nested_too_deep_is_400_invalid_json(server: Any) -> None:
    from agilerl.arena.server.jsondepth import MAX_JSON_DEPTH

    _, api = server
    headers = {"content-type": "application/json"}
    for depth in (MAX_JSON_DEPTH + 1, 5_000, 100_000):
        nested = "[" * depth + "]" * depth
        for path in (f"{JOBS}/submit", f"{JOBS}/stop", "/api/cli/v1/projects/create"):
            resp = api.http.post(path, content='{"manifest": {"algorithm": ' + nested + "}}",
                                 headers=headers)
            _err(resp, 400, "INVALID_JSON")
        resp = api.http.post(f"{JOBS}/submit", data={"manifest": '{"a": ' + nested + "}"})
        _err(resp, 400, "INVALID_JSON")
    # brackets inside strings do not count, and the limit itself is accepted
    ok = manifest()
    ok["algorithm"]["name"] = "[" * 500
    resp = api.submit_raw({"manifest": ok})
    assert resp.status_code == 422 and resp.json()["error_code"] == "MANIFEST_INVALID"
    inner = MAX_JSON_DEPTH - 2
    resp = api.http.post(f"{JOBS}/stop", headers=headers,
                         content='{"experiment_name": "x", "project": ' + "[" * inner + "]" * inner + "}")
    assert resp.json()["error_code"] == "INVALID_REQUEST"
    assert api.http.get("/api/users/current").status_code == 200
