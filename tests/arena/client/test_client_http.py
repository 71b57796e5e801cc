"""ArenaClient over a scripted HTTP transport: auth header, retries, 401, errors, endpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agilerl.arena import client as client_module
from agilerl.arena.errors import (
    ArenaAPIError,
    ArenaAuthError,
    ArenaConfigError,
    ArenaEnvironmentNotFoundError,
    ArenaTrainingError,
    ArenaValidationError,
)
from agilerl.arena.retry import RetryPolicy

from .conftest import BASE, Recorder, fail, fresh_jwt, ndjson, ok

SUBMIT = "/api/cli/v1/experiments/jobs/submit"
STATUS = "/api/cli/v1/experiments/jobs/status"


def accepted(name: str = "exp-1") -> httpx.Response:
    return ndjson(
        {"kind": "status", "stage": "validation", "status": "running", "message": "checking"},
        {
            "kind": "status",
            "stage": "submission",
            "status": "completed",
            "message": "Job submitted",
            "detail": {"accepted": True, "experiment_id": 1, "experiment_name": name},
        },
    )


@pytest.fixture
def plain_manifest(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Skip the light-model validation: these tests are about the HTTP exchange."""
    monkeypatch.setattr(client_module, "manifest_payload", lambda m: dict(m))
    return {"algorithm": {"name": "DQN"}, "environment": {"name": "CartPole-v1"}}


# -- credentials and decoding ------------------------------------------------------------
def test_bearer_header_and_envelope_unwrap(make_client, server: Recorder) -> None:
    server.add("GET", "/api/users/current", ok({"first_name": "Ada", "email": "a@x"}))
    profile = make_client().get_user_profile()
    assert profile == {"first_name": "Ada", "email": "a@x"}
    assert server.last().headers["authorization"] == "Bearer arena_pat_test_secret"


def test_envelope_with_ok_false_is_left_alone_and_text_is_text(make_client, server) -> None:
    server.add("GET", "/api/users/credits", httpx.Response(200, json={"ok": False, "x": 1}))
    server.add("POST", "/api/cli/v1/experiments/jobs/stop", httpx.Response(200, text="Ok"))
    client = make_client()
    assert client.get_credits() == {"ok": False, "x": 1}
    assert client.stop_experiment("  exp ") == "Ok"
    assert json.loads(server.last().content) == {"experiment_name": "exp"}


def test_no_credential_fails_before_any_request(make_client, server: Recorder) -> None:
    client = make_client(api_key=None)
    with pytest.raises(ArenaAuthError, match="Not signed in"):
        client.list_projects()
    assert server.requests == []


def test_env_api_key_is_used(make_client, server, monkeypatch) -> None:
    monkeypatch.setenv("ARENA_API_KEY", "arena_pat_env_key")
    server.add("GET", "/api/cli/v1/projects", ok([]))
    make_client(api_key=None).list_projects()
    assert server.last().headers["authorization"] == "Bearer arena_pat_env_key"


def test_base_url_from_environment(make_client) -> None:
    assert make_client().base_url == BASE


# -- retries -----------------------------------------------------------------------------
def test_get_retries_connection_errors_with_full_jitter(make_client, server, sleeps) -> None:
    boom = httpx.ConnectError("refused")
    server.add("GET", "/api/cli/v1/projects", boom, boom, boom, ok([{"name": "p"}]))
    assert make_client().list_projects() == [{"name": "p"}]
    assert len(server.requests) == 4
    assert len(sleeps) == 3
    for attempt, delay in enumerate(sleeps):  # each wait lies in [0, base * 2**attempt)
        assert 0.0 <= delay < 0.5 * 2**attempt


def test_get_gives_up_after_the_retry_budget(make_client, server, sleeps) -> None:
    server.add("GET", "/api/cli/v1/projects", httpx.ConnectError("refused"))
    with pytest.raises(ArenaAPIError) as info:
        make_client().list_projects()
    assert info.value.status_code == 0
    assert "Network error communicating with Arena" in str(info.value)
    assert len(server.requests) == 4 and len(sleeps) == 3


def test_get_retries_5xx_but_not_4xx(make_client, server, sleeps) -> None:
    server.add("GET", "/api/cli/v1/resources/list", fail(503, "busy"), ok({"tiers": {}}))
    assert make_client().list_resources() == {"tiers": {}}
    server.add("GET", "/api/cli/v1/projects", fail(404, "nope"))
    with pytest.raises(ArenaAPIError) as info:
        make_client().list_projects()
    assert info.value.status_code == 404
    assert len([r for r in server.requests if r.url.path == "/api/cli/v1/projects"]) == 1


def test_retry_after_is_honoured_up_to_the_cap(make_client, server, sleeps) -> None:
    busy = httpx.Response(503, json={"error": "busy"}, headers={"Retry-After": "3"})
    server.add("GET", "/api/cli/v1/projects", busy, ok([]))
    make_client().list_projects()
    assert sleeps == [3.0]


def test_non_idempotent_post_is_never_retried(make_client, server, sleeps) -> None:
    server.add("POST", "/api/cli/v1/experiments/jobs/resume", fail(503, "busy"), ok({}))
    with pytest.raises(ArenaAPIError) as info:
        make_client().resume_experiment("exp", 100)
    assert info.value.status_code == 503
    server.add("POST", "/api/cli/v1/projects/create", httpx.ConnectError("x"), ok({}))
    with pytest.raises(ArenaAPIError):
        make_client().create_project("p")
    assert sleeps == []
    assert len(server.requests) == 2


def test_delete_is_retried_and_carries_a_json_body(make_client, server, sleeps) -> None:
    server.add("DELETE", "/api/cli/v1/projects/delete", fail(502, "gateway"), ok({"deleted": 1}))
    assert make_client().delete_project("p") == {"deleted": 1}
    assert [json.loads(r.content) for r in server.requests] == [{"name": "p"}, {"name": "p"}]


def test_submit_sends_an_idempotency_key_and_retries_with_the_same_key(
    make_client, server, sleeps, plain_manifest
) -> None:
    server.add("POST", SUBMIT, httpx.ConnectError("reset"), fail(502, "bad gateway"), accepted())
    ack = make_client().submit_experiment(plain_manifest, project="demo")
    assert ack["experiment_name"] == "exp-1"
    keys = {r.headers["idempotency-key"] for r in server.requests}
    assert len(server.requests) == 3 and len(keys) == 1
    body = json.loads(server.last().content)
    assert body == {
        "manifest": plain_manifest,
        "resource_id": None,
        "num_nodes": None,
        "project": "demo",
        "experiment_name": None,
    }


def test_each_submit_gets_its_own_key_unless_given(make_client, server, plain_manifest) -> None:
    server.add("POST", SUBMIT, accepted())
    client = make_client()
    client.submit_experiment(plain_manifest)
    client.submit_experiment(plain_manifest)
    client.submit_experiment(plain_manifest, idempotency_key="k-1")
    keys = [r.headers["idempotency-key"] for r in server.requests]
    assert keys[0] != keys[1] and keys[2] == "k-1"


def test_submit_retries_a_stream_cut_mid_answer(make_client, server, plain_manifest) -> None:
    class Cut(httpx.SyncByteStream):
        def __iter__(self):
            yield b'{"kind":"status","stage":"validation","status":"running","message":"x"}\n'
            raise httpx.ReadError("connection reset")

    server.add("POST", SUBMIT, httpx.Response(200, stream=Cut()), accepted("again"))
    ack = make_client().submit_experiment(plain_manifest)
    assert ack["experiment_name"] == "again"
    assert len({r.headers["idempotency-key"] for r in server.requests}) == 1


# -- 401 handling -------------------------------------------------------------------------
def _store_tokens(home: Path, access: str, refresh: str = "refresh-1") -> None:
    folder = home / ".arena"
    folder.mkdir(mode=0o700, exist_ok=True)
    (folder / "credentials.json").write_text(
        json.dumps({"access_token": access, "refresh_token": refresh})
    )


def test_401_refreshes_once_and_resends(make_client, server, isolated_home) -> None:
    _store_tokens(isolated_home, fresh_jwt("old"))
    new_access = fresh_jwt("new")
    server.add(
        "POST",
        "/realms/arena/protocol/openid-connect/token",
        httpx.Response(200, json={"access_token": new_access, "refresh_token": "refresh-2"}),
    )
    server.add("GET", "/api/cli/v1/projects", fail(401, "expired"), ok([]))
    assert make_client(api_key=None).list_projects() == []
    sent = [r.headers["authorization"] for r in server.requests if r.url.path.endswith("projects")]
    assert sent[1] == f"Bearer {new_access}" and sent[0] != sent[1]
    stored = json.loads((isolated_home / ".arena" / "credentials.json").read_text())
    assert stored["refresh_token"] == "refresh-2"
    form = server.last("/realms/arena/protocol/openid-connect/token").content.decode()
    assert "grant_type=refresh_token" in form


def test_second_401_means_session_expired(make_client, server, isolated_home) -> None:
    _store_tokens(isolated_home, fresh_jwt())
    server.add(
        "POST",
        "/realms/arena/protocol/openid-connect/token",
        httpx.Response(200, json={"access_token": fresh_jwt("n"), "refresh_token": "r"}),
    )
    server.add("GET", "/api/cli/v1/projects", fail(401, "no"))
    with pytest.raises(ArenaAuthError, match="Session expired"):
        make_client(api_key=None).list_projects()
    assert len([r for r in server.requests if r.url.path.endswith("projects")]) == 2


def test_rejected_refresh_says_so(make_client, server, isolated_home) -> None:
    _store_tokens(isolated_home, fresh_jwt())
    server.add(
        "POST",
        "/realms/arena/protocol/openid-connect/token",
        httpx.Response(400, json={"error": "invalid_grant"}),
    )
    server.add("GET", "/api/cli/v1/projects", fail(401, "no"))
    with pytest.raises(ArenaAuthError, match="Token refresh failed"):
        make_client(api_key=None).list_projects()


def test_invalid_api_key_message_names_no_secret(make_client, server) -> None:
    server.add("GET", "/api/cli/v1/projects", fail(401, "bad token arena_pat_test_secret"))
    with pytest.raises(ArenaAuthError) as info:
        make_client().list_projects()
    assert "Invalid API key" in str(info.value)
    assert "arena_pat_test_secret" not in str(info.value)
    assert "arena_pat_test_secret" not in repr(info.value)


def test_api_key_falls_back_to_stored_login(make_client, server, isolated_home) -> None:
    access = fresh_jwt("me")
    _store_tokens(isolated_home, access)
    server.add("GET", "/api/cli/v1/projects", fail(401, "bad key"), ok([]))
    assert make_client().list_projects() == []
    assert server.requests[1].headers["authorization"] == f"Bearer {access}"


# -- error mapping ------------------------------------------------------------------------
def test_error_class_depends_on_path(make_client, server, plain_manifest) -> None:
    server.add("POST", SUBMIT, fail(422, "pop_size * max_steps exceeds the cap"))
    with pytest.raises(ArenaTrainingError) as info:
        make_client().submit_experiment(plain_manifest)
    assert info.value.status_code == 422
    assert "TrainingError (422): pop_size * max_steps exceeds the cap" in str(info.value)
    server.add("POST", SUBMIT, fail(404, "Environment 'Foo' not found"))
    with pytest.raises(
        ArenaEnvironmentNotFoundError, match=r"list_environments\(include_arena=True\)"
    ):
        make_client().submit_experiment(plain_manifest)
    server.add("POST", "/api/cli/v1/environments/validate", fail(422, "bad env"))
    with pytest.raises(ArenaValidationError):
        make_client().validate_environment("foo")


def test_in_stream_failure_raises_the_path_error(make_client, server, plain_manifest) -> None:
    server.add(
        "POST",
        SUBMIT,
        ndjson(
            {
                "kind": "status",
                "stage": "submission",
                "status": "failed",
                "message": "Too many running jobs",
                "detail": {"error_code": "JOB_REJECTED", "limit": 2},
            }
        ),
    )
    with pytest.raises(ArenaTrainingError) as info:
        make_client().submit_experiment(plain_manifest)
    assert info.value.error_code == "JOB_REJECTED"
    assert "Limit: 2" in str(info.value)


def test_list_experiments_needs_a_project(make_client, server) -> None:
    with pytest.raises(ArenaConfigError, match="No project specified"):
        make_client().list_experiments()
    assert server.requests == []


# -- endpoints ----------------------------------------------------------------------------
def test_query_parameters(make_client, server) -> None:
    server.add("GET", "/api/cli/v1/environments", ok({}))
    server.add("GET", "/api/cli/v1/environments/exists", ok({"exists": True}))
    server.add(
        "GET",
        "/api/cli/v1/experiments/metrics",
        httpx.Response(200, text="a,b\n1,2\n", headers={"content-type": "text/csv"}),
    )
    client = make_client()
    client.list_environments(include_arena=True)
    assert server.last().url.query == b"name=&include_arena=true"
    assert client.environment_exists("CartPole", version=None) is True
    assert server.last().url.query == b"name=CartPole&version="
    client.preview_experiment_metrics_csv("e", preview_rows=5, metrics=["a", "b"])
    assert server.last().url.query == b"experiment_name=e&preview_rows=5&metric=a&metric=b"


def test_status_uses_the_default_project(make_client, server, isolated_home) -> None:
    (isolated_home / ".arena").mkdir()
    (isolated_home / ".arena" / "config.json").write_text('{"default_project": "demo"}')
    server.add("GET", STATUS, ok({"name": "e", "state": "RUNNING"}))
    assert make_client().get_experiment_status("e")["state"] == "RUNNING"
    assert server.last().url.params["project"] == "demo"


def test_wait_for_experiment_polls_until_terminal(make_client, server, sleeps) -> None:
    server.add(
        "GET",
        STATUS,
        ok({"state": "QUEUED"}),
        ok({"state": "RUNNING"}),
        ok({"state": "COMPLETED", "steps": 10}),
    )
    row = make_client().wait_for_experiment("e", poll_interval=1.0)
    assert row == {"state": "COMPLETED", "steps": 10}
    assert len(sleeps) == 2 and all(s <= 1.0 for s in sleeps)


def test_streaming_requests_have_no_read_timeout(make_client, server) -> None:
    seen: list[Any] = []

    def logs(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return ndjson({"kind": "log", "message": "hello", "detail": {"seq": 1}})

    server.add("GET", "/api/cli/v1/experiments/jobs/logs", logs)
    server.add(
        "GET", "/api/cli/v1/projects", lambda r: seen.append(r.extensions["timeout"]) or ok([])
    )
    client = make_client(request_timeout=7)
    assert list(client.iter_log_lines("e", follow=True)) == ["hello"]
    assert server.last().url.params["follow"] == "true"
    client.list_projects()
    assert seen[0] == {"connect": 7, "read": None, "write": 7, "pool": 7}
    assert seen[1]["read"] == 7


def test_checkpoint_download_never_escapes_the_folder(make_client, server, tmp_path) -> None:
    evil = {"content-disposition": 'attachment; filename="../../etc/passwd"'}
    server.add(
        "GET",
        "/api/cli/v1/experiments/jobs/checkpoints/download",
        httpx.Response(200, content=b"CKPT", headers=evil),
    )
    out = tmp_path / "dl"
    out.mkdir()
    path = make_client().download_checkpoint("e", output_path=out)
    assert path == out / "passwd" and path.read_bytes() == b"CKPT"
    with pytest.raises(FileExistsError):
        make_client().download_checkpoint("e", output_path=out)
    assert [p.name for p in out.iterdir()] == ["passwd"]


def test_metrics_download_refuses_to_overwrite_before_downloading(
    make_client, server, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    csv = httpx.Response(200, text="step,score\n1,2\n", headers={"content-type": "text/csv"})
    server.add("GET", "/api/cli/v1/experiments/metrics", csv)
    client = make_client()
    path = client.download_experiment_metrics("exp")
    assert path == Path("exp_metrics.csv") and path.read_text() == "step,score\n1,2\n"
    with pytest.raises(FileExistsError):
        client.download_experiment_metrics("exp")
    assert len(server.requests) == 1


def test_environment_upload_is_multipart(make_client, server, tmp_path) -> None:
    src = tmp_path / "my_env"
    src.mkdir()
    (src / "env.py").write_text("class E: pass\n")
    (src / "requirements.txt").write_text("numpy\n")
    done = {
        "kind": "status",
        "stage": "validation",
        "status": "completed",
        "message": "ok",
        "detail": {"validated": True},
    }
    server.add("POST", "/api/cli/v1/environments/create-and-validate", ndjson(done))
    assert make_client().validate_environment("my-env", source=src) == {"validated": True}
    request = server.last()
    assert request.headers["content-type"].startswith("multipart/form-data")
    body = request.content
    assert b'name="version"\r\n\r\nv1' in body
    assert b'filename="my_env.tar.gz"' in body
    assert b'filename="requirements.txt"' in body and b"numpy" in body
    assert b'filename="env_config.yaml"' in body  # empty placeholder


def test_repr_hides_the_credential(make_client) -> None:
    client = make_client(api_key="arena_pat_abc_topsecret")
    assert "topsecret" not in repr(client)
    assert "topsecret" not in repr(client._auth)
    assert "authenticated" in repr(client)


def test_retry_policy_is_bounded() -> None:
    policy = RetryPolicy(retries=5, base=1.0, cap=4.0)
    for attempt in range(10):
        assert 0 <= policy.delay(attempt) <= 4.0


def test_no_secret_reaches_the_logs(make_client, server, isolated_home, caplog) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    old_access, new_access = fresh_jwt("old"), fresh_jwt("new")
    _store_tokens(isolated_home, old_access, refresh="refresh-secret-1")
    server.add(
        "POST",
        "/realms/arena/protocol/openid-connect/token",
        httpx.Response(200, json={"access_token": new_access, "refresh_token": "refresh-2"}),
    )
    server.add("GET", "/api/cli/v1/projects", fail(401, "expired"), fail(503, "x"), ok([]))
    make_client(api_key=None).list_projects()
    assert caplog.records  # the retry was logged...
    for secret in (old_access, new_access, "refresh-secret-1", "refresh-2"):
        assert secret not in caplog.text  # ...without any credential


def test_an_expiring_token_is_refreshed_before_the_request(
    make_client, server, isolated_home
) -> None:
    import time as _time

    from .conftest import make_jwt

    _store_tokens(isolated_home, make_jwt(_time.time() + 3600))
    client = make_client(api_key=None)
    client._auth._tokens["access_token"] = make_jwt(_time.time() + 30)  # lapses within a minute
    new_access = fresh_jwt("new")
    server.add(
        "POST",
        "/realms/arena/protocol/openid-connect/token",
        httpx.Response(200, json={"access_token": new_access, "refresh_token": "r2"}),
    )
    server.add("GET", "/api/cli/v1/projects", ok([]))
    client.list_projects()
    assert server.last("/api/cli/v1/projects").headers["authorization"] == f"Bearer {new_access}"
    assert len([r for r in server.requests if r.url.path.endswith("projects")]) == 1


def test_configure_sets_defaults_but_the_environment_wins(monkeypatch) -> None:
    from agilerl.arena.client import ArenaClient

    monkeypatch.delenv("ARENA_BASE_URL")
    assert ArenaClient.configure(base_url="http://configured.test/") is ArenaClient
    with ArenaClient(api_key="k") as arena:
        assert arena.base_url == "http://configured.test"
        assert arena.settings.keycloak_url == "http://configured.test"  # self-hosted: same host
    monkeypatch.setenv("ARENA_BASE_URL", "http://env.test")
    with ArenaClient(api_key="k") as arena:
        assert arena.base_url == "http://env.test"
    monkeypatch.setenv("ARENA_KEYCLOAK_URL", "http://auth.test")
    with ArenaClient(api_key="k") as arena:
        assert arena.settings.keycloak_url == "http://auth.test"


def test_hosted_service_is_the_default(monkeypatch) -> None:
    from agilerl.arena.client import ArenaClient

    monkeypatch.delenv("ARENA_BASE_URL")
    with ArenaClient(api_key="k") as arena:
        assert arena.base_url == "https://arena.agilerl.com"
        assert arena.settings.keycloak_url == "https://auth.arena.agilerl.com"


def test_a_bad_base_url_is_a_config_error(monkeypatch) -> None:
    from agilerl.arena.client import ArenaClient

    monkeypatch.setenv("ARENA_BASE_URL", "arena.example.com")
    with pytest.raises(ArenaConfigError, match="ARENA_BASE_URL must start with http"):
        ArenaClient(api_key="k")


def test_threads_sharing_a_client_refresh_once(make_client, server, isolated_home) -> None:
    import threading

    old, new = fresh_jwt("old"), fresh_jwt("new")
    _store_tokens(isolated_home, old)
    refreshes: list[int] = []

    def token(request: httpx.Request) -> httpx.Response:
        refreshes.append(1)
        return httpx.Response(200, json={"access_token": new, "refresh_token": "r2"})

    def projects(request: httpx.Request) -> httpx.Response:
        if request.headers["authorization"] == f"Bearer {old}":
            barrier.wait()  # every thread holds a 401 before anyone refreshes
            return fail(401, "expired")
        return ok([])

    server.add("POST", "/realms/arena/protocol/openid-connect/token", token)
    server.add("GET", "/api/cli/v1/projects", projects)
    client = make_client(api_key=None)
    barrier = threading.Barrier(8, timeout=10)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            client.list_projects()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == [] and len(refreshes) == 1
