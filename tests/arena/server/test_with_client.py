"""The project's own ArenaClient against the server: the contract both sides rely on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import manifest

client_mod = pytest.importorskip("agilerl.arena.client")


@pytest.fixture
def client(server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    srv, _ = server
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for key, value in srv.env().items():
        monkeypatch.setenv(key, value)
    c = client_mod.ArenaClient(verbose=False)
    yield c
    c.close()


def test_client_submit_follow_stop_resume_download(client: Any, tmp_path: Path) -> None:
    from agilerl.arena.errors import ArenaAPIError, ArenaEnvironmentNotFoundError

    assert client.get_user_profile()["first_name"] == "tester"
    assert "local-cpu" in client.list_resources()["tiers"]
    client.create_project("exp", description=None)
    ack = client.submit_experiment(manifest(300, checkpoint_steps=100), project="exp",
                                   experiment_name="via-client", idempotency_key="k-1")
    assert ack["accepted"] is True and ack["experiment_name"] == "via-client"
    again = client.submit_experiment(manifest(300, checkpoint_steps=100), project="exp",
                                     experiment_name="via-client", idempotency_key="k-1")
    assert again["experiment_id"] == ack["experiment_id"]
    lines = list(client.iter_log_lines("via-client", follow=True))
    assert "done" in lines
    row = client.get_experiment_status("via-client")
    assert row["state"] == "COMPLETED"
    assert [r["name"] for r in client.list_experiments("exp")] == ["via-client"]
    assert [c["steps"] for c in client.list_checkpoints("via-client")] == [100, 200, 300]
    target = client.download_checkpoint("via-client", output_path=tmp_path)
    assert target.name == "via-client_step_300.tar.gz" and target.stat().st_size > 0
    metrics = client.download_experiment_metrics("via-client", output_path=tmp_path)
    assert metrics.read_text().startswith("train/global_step,eval/mean_fitness\n")
    with pytest.raises(ArenaAPIError) as err:
        client.stop_experiment("via-client")
    assert err.value.status_code == 409
    client.resume_experiment("via-client", 400)
    final = client.wait_for_experiment("via-client", poll_interval=0.1, timeout=30)
    assert final["state"] == "COMPLETED" and final["attempt"] == 2
    bad = manifest()
    bad["environment"]["name"] = "NoSuchEnv-v0"
    with pytest.raises(ArenaEnvironmentNotFoundError) as err:
        client.submit_experiment(bad, project="exp")
    assert err.value.status_code == 404


def test_client_device_login_against_the_server(server: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    srv, api = server
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ARENA_BASE_URL", srv.base_url)
    monkeypatch.setenv("ARENA_KEYCLOAK_URL", srv.base_url)
    monkeypatch.delenv("ARENA_API_KEY", raising=False)
    seen: list[str] = []

    def approve(url: str, user_code: str | None) -> None:
        seen.append(url)
        code = user_code or url.rsplit("user_code=", 1)[1]
        assert api.post("/api/admin/device/approve", {"user_code": code}).status_code == 200

    client = client_mod.ArenaClient(verbose=False)
    try:
        client.login(timeout=30, open_browser=False, prompt=approve)
        assert seen and seen[0].startswith(f"{srv.base_url}/device?user_code=")
        assert client.get_user_profile()["first_name"] == "tester"
        client.logout()
    finally:
        client.close()
