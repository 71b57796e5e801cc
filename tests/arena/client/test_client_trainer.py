"""ArenaTrainer: building the Arena payload and driving the client."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import httpx
import pytest
import yaml

from agilerl.arena.trainer import ArenaTrainer

from .conftest import Recorder, ndjson, ok

SUBMIT = "/api/cli/v1/experiments/jobs/submit"
MANIFEST = {
    "algorithm": {"name": "DQN", "batch_size": 64, "lr": 0.001},
    "environment": {"name": "CartPole-v1", "num_envs": 4},
    "training": {"max_steps": 2000, "evo_steps": 500, "pop_size": 2},
    "tournament_selection": {"tournament_size": 2, "elitism": True},
    "network": {
        "latent_dim": 32,
        "encoder_config": {"hidden_size": [64]},
        "head_config": {"hidden_size": [64]},
    },
}


def accepted(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    return ndjson(
        {
            "kind": "status",
            "stage": "submission",
            "status": "completed",
            "message": "Job submitted",
            "detail": {
                "accepted": True,
                "experiment_id": 3,
                "experiment_name": body["experiment_name"] or "auto-1",
                "project": body["project"],
            },
        }
    )


EXISTS = "/api/cli/v1/environments/exists"
ENVS = "/api/cli/v1/environments"


@pytest.fixture
def arena(make_client, server: Recorder):
    server.add("POST", SUBMIT, accepted)
    server.add("GET", EXISTS, ok({"exists": True}))  # a built-in id on that server
    server.add("GET", ENVS, ok({}))
    return make_client()


def submitted(server: Recorder) -> dict:
    return json.loads(server.last(SUBMIT).content)


def test_from_manifest_file_submits_the_arena_payload(arena, server, tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(MANIFEST))
    trainer = ArenaTrainer.from_manifest(manifest=path, client=arena)
    ack = trainer.train(project="demo", experiment_name="e1", resource_id="local", num_nodes=1)
    assert ack["experiment_name"] == "e1" and ack["accepted"] is True
    body = submitted(server)
    assert {k: body[k] for k in ("project", "experiment_name", "resource_id", "num_nodes")} == {
        "project": "demo",
        "experiment_name": "e1",
        "resource_id": "local",
        "num_nodes": 1,
    }
    payload = body["manifest"]
    assert payload["algorithm"]["name"] == "DQN" and payload["algorithm"]["batch_size"] == 64
    assert payload["environment"]["name"] == "CartPole-v1"
    assert payload["tournament_selection"]["tournament_size"] == 2
    assert "selection_strategy" not in payload
    assert payload["network"] == MANIFEST["network"]  # passed through as written
    assert {"mutation", "tournament_selection", "network"} <= set(payload)
    assert payload["training"]["max_steps"] == 2000


def test_sections_always_present_and_string_environment(arena) -> None:
    trainer = ArenaTrainer("DQN", "CartPole-v1", {"max_steps": 1000}, client=arena)
    payload = trainer.to_manifest()
    assert payload["mutation"] == {} or isinstance(payload["mutation"], dict)
    assert payload["tournament_selection"] == {} or isinstance(
        payload["tournament_selection"], dict
    )
    assert payload["network"] == {}
    assert payload["environment"]["name"] == "CartPole-v1"
    assert payload["environment"]["num_envs"] == 16


def test_wait_returns_the_final_status(arena, server) -> None:
    status = "/api/cli/v1/experiments/jobs/status"
    server.add("GET", status, ok({"state": "RUNNING"}), ok({"state": "COMPLETED", "steps": 9}))
    trainer = ArenaTrainer("DQN", "CartPole-v1", client=arena)
    final = trainer.train(project="demo", experiment_name="w", wait=True, poll_interval=0.01)
    assert final == {"state": "COMPLETED", "steps": 9}
    assert server.last(status).url.params["experiment_name"] == "w"


def test_delegation(arena, server) -> None:
    server.add("POST", "/api/cli/v1/experiments/jobs/resume", ok({"state": "QUEUED"}))
    server.add("GET", "/api/cli/v1/experiments/list", ok([{"name": "a"}]))
    server.add("GET", "/api/cli/v1/experiments/jobs/checkpoints", ok([{"steps": 5}]))
    trainer = ArenaTrainer("DQN", "CartPole-v1", client=arena)
    assert trainer.resume_from_checkpoint("a", 5000) == {"state": "QUEUED"}
    assert json.loads(server.last().content) == {"experiment_name": "a", "max_steps": 5000}
    assert trainer.list_experiments("demo") == [{"name": "a"}]
    assert trainer.list_checkpoints("a") == [{"steps": 5}]
    assert server.last().url.params["experiment_name"] == "a"


def test_multi_frequency_selection_is_refused(arena) -> None:
    with pytest.raises(ValueError, match="only supports tournament selection"):
        ArenaTrainer(
            "DQN", "CartPole-v1", client=arena, selection_strategy={"strategy": "multi_frequency"}
        )


def test_unknown_algorithm_and_foreign_objects(arena) -> None:
    with pytest.raises(KeyError, match="NotAnAlgo"):
        ArenaTrainer("NotAnAlgo", "CartPole-v1", client=arena)
    with pytest.raises(TypeError, match="serialized manifest"):
        ArenaTrainer.from_manifest(manifest=object(), client=arena)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected"):
        ArenaTrainer("DQN", "CartPole-v1", client=arena, bogus=1)


def test_invalid_manifest_is_refused_before_sending(arena, server) -> None:
    bad = {**MANIFEST, "algorithm": {"name": "DQN", "batch_size": 0}}
    with pytest.raises(ValueError, match="batch_size"):
        ArenaTrainer.from_manifest(manifest=bad, client=arena)
    assert server.requests == []


def test_legacy_tournament_selection_argument_warns(arena) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = ArenaTrainer(
            "DQN", "CartPole-v1", client=arena, tournament_selection={"tournament_size": 3}
        )
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert trainer.to_manifest()["tournament_selection"]["tournament_size"] == 3


def test_spec_objects_are_accepted(arena) -> None:
    from agilerl.arena import models

    algo = models.DQNSpec(batch_size=16)
    trainer = ArenaTrainer(
        algo, "CartPole-v1", client=arena, training=models.TrainingSpec(max_steps=500)
    )
    payload = trainer.to_manifest()
    assert payload["algorithm"]["name"] == "DQN" and payload["algorithm"]["batch_size"] == 16
    assert payload["training"]["max_steps"] == 500


def test_reference_manifest_round_trips(arena, peer_manifests_dir) -> None:
    trainer = ArenaTrainer.from_manifest(
        manifest=peer_manifests_dir / "configs" / "dqn" / "dqn.yaml", client=arena
    )
    payload = trainer.to_manifest()
    assert payload["algorithm"]["name"] == "DQN"
    assert payload["network"]["encoder_config"]["hidden_size"] == [128]
    assert trainer.train(project="demo")["accepted"] is True


def test_core_manifest_object_is_refused_by_from_manifest(arena) -> None:
    from agilerl.models import TrainingManifest as CoreManifest

    core = CoreManifest.get_validated(
        {k: v for k, v in MANIFEST.items() if k != "network"}, mode="python"
    )
    with pytest.raises(TypeError, match="serialized manifest"):
        ArenaTrainer.from_manifest(manifest=core, client=arena)


def test_public_import_paths_name_the_same_class() -> None:
    import agilerl
    from agilerl.training.trainer import ArenaTrainer as FromTraining

    assert agilerl.ArenaTrainer is ArenaTrainer is FromTraining


def test_arena_trainer_is_a_trainer_with_the_spec_attributes(arena) -> None:
    from agilerl.arena.models.env import EnvSpec
    from agilerl.arena.models.hpo import MutationSpec, TournamentSelectionSpec
    from agilerl.arena.models.training import ReplayBufferSpec, TrainingSpec
    from agilerl.models import DQNSpec as LocalDQNSpec
    from agilerl.training.trainer import LocalTrainer, Trainer

    assert issubclass(ArenaTrainer, Trainer) and issubclass(LocalTrainer, Trainer)
    env = EnvSpec(name="CartPole-v1", num_envs=8)
    selection = TournamentSelectionSpec(tournament_size=3, elitism=True)
    mutation, buffer = MutationSpec(mutation_sd=0.05), ReplayBufferSpec(max_size=5000)
    training = TrainingSpec(max_steps=200, evo_steps=50, pop_size=3)
    trainer = ArenaTrainer("DQN", env, training, mutation=mutation,
                           selection_strategy=selection, replay_buffer=buffer, client=arena)
    assert isinstance(trainer, Trainer)
    assert isinstance(trainer.algorithm_spec, LocalDQNSpec)  # a name resolves as in Trainer
    assert trainer.env_spec is env and trainer.training_spec is training
    assert trainer.selection_strategy_spec is selection and trainer.mutation_spec is mutation
    assert trainer.replay_buffer_spec is buffer and trainer._client is arena is trainer.client
    payload = trainer.to_manifest()
    assert payload["environment"] == {"name": "CartPole-v1", "num_envs": 8}
    assert payload["tournament_selection"]["tournament_size"] == 3
    assert payload["replay_buffer"]["max_size"] == 5000
    assert payload["training"]["pop_size"] == 3 and payload["mutation"]["mutation_sd"] == 0.05
    assert payload["algorithm"] == {**payload["algorithm"], "name": "DQN"}
    named = ArenaTrainer("PPO", "CartPole-v1", client=arena)
    assert isinstance(named.env_spec, EnvSpec) and named.env_spec.name == "CartPole-v1"


def test_a_spec_objects_net_config_travels_as_the_network_section(arena) -> None:
    from agilerl.models import DQNSpec
    from agilerl.models.networks import MlpSpec, QNetworkSpec

    algo = DQNSpec(net_config=QNetworkSpec(encoder_config=MlpSpec(hidden_size=[64]),
                                           head_config=MlpSpec(hidden_size=[32])))
    network = ArenaTrainer(algo, "CartPole-v1", client=arena).to_manifest()["network"]
    assert network["encoder_config"]["hidden_size"] == [64]
    assert network["head_config"]["hidden_size"] == [32]


def test_deprecated_tournament_argument_is_accepted_with_a_warning(arena) -> None:
    from agilerl.arena.models.hpo import TournamentSelectionSpec

    selection = TournamentSelectionSpec(tournament_size=4)
    with pytest.warns(DeprecationWarning, match="'tournament' argument of ArenaTrainer"):
        trainer = ArenaTrainer("DQN", "CartPole-v1", client=arena, tournament=selection)
    assert trainer.selection_strategy_spec is selection
    assert trainer.to_manifest()["tournament_selection"]["tournament_size"] == 4
    with pytest.raises(ValueError, match="conflicting"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ArenaTrainer("DQN", "CartPole-v1", client=arena, tournament=selection,
                     selection_strategy=TournamentSelectionSpec(tournament_size=2))


def test_from_manifest_keeps_arena_spec_objects(arena) -> None:
    from agilerl.arena.models import DQNSpec, EnvSpec, TournamentSelectionSpec

    trainer = ArenaTrainer.from_manifest(manifest=MANIFEST, client=arena)
    assert isinstance(trainer.algorithm_spec, DQNSpec) and trainer.algorithm_spec.batch_size == 64
    assert isinstance(trainer.env_spec, EnvSpec) and trainer.env_spec.num_envs == 4
    assert isinstance(trainer.selection_strategy_spec, TournamentSelectionSpec)
    from agilerl.arena.payload import manifest_payload

    sent = manifest_payload(MANIFEST)  # what `arena experiments submit` sends for the file
    assert trainer.to_manifest() == {**sent, "mutation": sent.get("mutation") or {}}


def test_arena_models_submodules_re_export_the_light_models() -> None:
    import importlib

    import agilerl.arena.models as arena_models

    names = {
        "algo": ["ARENA_REGISTRY", "AlgoSpec", "RLAlgorithmSpec", "MultiAgentRLAlgorithmSpec",
                 "LLMAlgorithmSpec", "register"],
        "env": ["EnvSpec", "LLMEnvType"],
        "hpo": ["MutationSpec", "MutationProbabilities", "RLHyperparameter",
                "TournamentSelectionSpec"],
        "networks": ["MlpSpec", "CnnSpec", "LstmSpec", "SimbaSpec", "MultiInputSpec",
                     "NetworkSpec", "QNetworkSpec", "RainbowQNetworkSpec",
                     "ContinuousQNetworkSpec", "DeterministicActorSpec",
                     "StochasticActorSpec", "ValueNetworkSpec", "LoraConfigDict",
                     "CosineLRScheduleConfig", "VLLMConfig", "FinetuningNetworkSpec"],
        "training": ["TrainingSpec", "ReplayBufferSpec", "NStepBufferArgs", "PerBufferArgs"],
    }
    for module_name, wanted in names.items():
        module = importlib.import_module(f"agilerl.arena.models.{module_name}")
        for name in wanted:
            value = getattr(module, name)
            assert getattr(arena_models, name, value) is value, (module_name, name)
    from agilerl.arena.models.algorithms.grpo import GRPOSpec
    from agilerl.arena.models.algorithms.rainbow_dqn import RainbowDQNSpec

    algorithms = importlib.import_module("agilerl.arena.models.algorithms")
    assert GRPOSpec is arena_models.GRPOSpec and RainbowDQNSpec is arena_models.RainbowDQNSpec
    assert set(algorithms.__all__) == {c.__name__ for c in arena_models.ARENA_REGISTRY.values()}


def test_register_adds_a_custom_arena_algorithm() -> None:
    from agilerl.arena.models import TrainingManifest
    from agilerl.arena.models.algo import ARENA_REGISTRY, RLAlgorithmSpec, register

    @register()
    class MyAlgoSpec(RLAlgorithmSpec):
        lr: float = 0.1

    try:
        assert ARENA_REGISTRY["MyAlgo"] is MyAlgoSpec
        payload = TrainingManifest.get_validated(
            {"algorithm": {"name": "MyAlgo", "lr": 0.2}, "environment": {"name": "CartPole-v1"}})
        assert payload["algorithm"]["name"] == "MyAlgo" and payload["algorithm"]["lr"] == 0.2
    finally:
        del ARENA_REGISTRY["MyAlgo"]


def _custom(version: str | None = None) -> dict:
    env = {"name": "LineWorld", "num_envs": 2}
    if version:
        env["version"] = version
    return {**MANIFEST, "environment": env}


def test_an_unregistered_environment_is_refused_before_submitting(arena, server) -> None:
    from agilerl.arena.errors import ArenaEnvironmentNotFoundError

    server.add("GET", EXISTS, ok({"exists": False}))
    trainer = ArenaTrainer.from_manifest(manifest=_custom(), client=arena)
    with pytest.raises(ArenaEnvironmentNotFoundError) as info:
        trainer.train(project="demo")
    assert "arena env validate LineWorld --source DIR" in str(info.value.cli_hint)
    assert "not registered" in info.value.message
    assert not [r for r in server.requests if r.url.path == SUBMIT]


def test_an_upload_that_failed_validation_is_refused_naming_the_command(arena, server) -> None:
    from agilerl.arena.errors import ArenaValidationError

    server.add("GET", ENVS, ok({"LineWorld": {"v1": {"validated": True, "profiled": True},
                                              "v2": {"validated": False, "profiled": False}}}))
    with pytest.raises(ArenaValidationError) as info:  # the newest version, v2
        ArenaTrainer.from_manifest(manifest=_custom(), client=arena).train(project="demo")
    assert "arena env validate LineWorld --version v2" in str(info.value.cli_hint)
    assert server.last(EXISTS).url.params["name"] == "LineWorld"
    assert not [r for r in server.requests if r.url.path == SUBMIT]
    ack = ArenaTrainer.from_manifest(manifest=_custom("v1"), client=arena).train(project="demo")
    assert ack["accepted"] is True and submitted(server)["manifest"]["environment"]["version"] == "v1"
