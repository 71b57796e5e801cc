"""Budget bypasses: manifests within the step budget that would still write hundreds of MB
of checkpoints, repeat every update thousands of times, or build networks no slot can
hold. Each is refused at submit with a 422 ``BUDGET_EXCEEDED`` naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from agilerl.arena.server import cli

from ..conftest import manifest

PPO = {"name": "PPO", "batch_size": 32, "learn_step": 64, "lr": 0.001}


def _with(**sections: dict[str, Any]) -> dict[str, Any]:
    man = manifest()
    for name, fields in sections.items():
        man[name] = {**man.get(name, {}), **fields}
    return man


def _refused(api: Any, man: dict[str, Any], field: str) -> dict[str, Any]:
    resp = api.submit_raw({"manifest": man})
    assert resp.status_code == 422, resp.text[:500]
    body = resp.json()
    assert body["error_code"] == "BUDGET_EXCEEDED", body
    assert field in body["error"], body
    assert any(line.startswith(field) for line in body["errors"]), body
    return dict(body)


@pytest.mark.parametrize(("man", "field"), [
    (_with(training={"checkpoint_steps": 1}), "training.checkpoint_steps"),
    ({**_with(), "algorithm": {**PPO, "update_epochs": 10000}}, "algorithm.update_epochs"),
    (_with(network={"encoder_config": {"hidden_size": [65536], "max_mlp_nodes": 65536}}),
     "network.encoder_config.hidden_size[0]"),
    (_with(network={"encoder_config": {"hidden_size": [64], "max_hidden_layers": 1000}}),
     "network.encoder_config.max_hidden_layers"),
    (_with(network={"encoder_config": {"hidden_size": [4096, 4096],
                                       "max_mlp_nodes": 4096}}), "training.pop_size"),
], ids=["checkpoint-every-step", "update-epochs", "wide", "deep", "many-weights"])
def test_budget_bypasses_are_refused_naming_the_field(make_server: Any, man: dict[str, Any],
                                                      field: str) -> None:
    srv, api = make_server(max_checkpoints_per_job=100)  # the server's default
    _refused(api, man, field)
    assert not any((srv.data_dir / "experiments").iterdir())


def test_checkpoint_count_follows_the_server_setting(make_server: Any) -> None:
    _, api = make_server(max_checkpoints_per_job=4)
    body = _refused(api, _with(training={"checkpoint_steps": 50}), "training.checkpoint_steps")
    assert body["limit"] == 4 and "< 100" in body["errors"][0]  # 400 steps / 4
    done = api.submit(_with(training={"checkpoint_steps": 100}))
    assert api.wait(done["experiment_name"], {"COMPLETED"})["state"] == "COMPLETED"


def test_ordinary_manifests_are_within_every_limit(server: Any) -> None:
    _, api = server
    api.submit(manifest())
    api.submit(_with(network={"encoder_config": {"hidden_size": [256, 256]},
                              "head_config": {"hidden_size": [64]}}))
    api.submit({**_with(), "algorithm": {**PPO, "update_epochs": 10}})


def test_resume_is_held_to_the_same_limits(make_server: Any) -> None:
    _, api = make_server(max_checkpoints_per_job=100)
    done = api.submit(_with(training={"checkpoint_steps": 100}))
    api.wait(done["experiment_name"], {"COMPLETED"})
    resp = api.post("/api/cli/v1/experiments/jobs/resume",
                    {"experiment_name": done["experiment_name"], "max_steps": 20_000})
    assert resp.status_code == 422 and resp.json()["error_code"] == "BUDGET_EXCEEDED"
    assert "training.checkpoint_steps" in resp.json()["error"]


def test_serve_flags_set_the_limits(tmp_path: Any) -> None:
    args = cli._parser().parse_args([
        "serve", "--data-dir", str(tmp_path), "--max-checkpoints", "7", "--max-epochs", "9",
        "--max-network-width", "512", "--max-network-depth", "8",
        "--max-network-params", "1000", "--user-disk-quota-mb", "3",
        "--quota-check-interval", "2.5"])
    cfg = cli._config(args)
    assert (cfg.max_checkpoints_per_job, cfg.max_epochs, cfg.max_network_width,
            cfg.max_network_depth, cfg.max_network_params) == (7, 9, 512, 8, 1000)
    assert cfg.user_disk_quota_bytes == 3 << 20 and cfg.quota_check_interval_s == 2.5


def test_networks_are_sized_at_what_mutation_may_grow_them_to() -> None:
    from agilerl.arena.server.network_budget import layer_specs

    network = {"encoder_config": {"hidden_size": [64, 64]},  # schema bounds: 6 x 256
               "head_config": {"hidden_size": [32], "max_mlp_nodes": 1024,
                               "max_hidden_layers": 3},
               "simba": {"hidden_size": 128, "num_blocks": 2, "max_blocks": 2}}
    found = {s.where: (s.depth, s.width) for s in layer_specs(network)}
    assert found == {"network.encoder_config.hidden_size": (6, 256),
                     "network.head_config.hidden_size": (3, 1024),
                     "network.simba.hidden_size": (2, 256)}
