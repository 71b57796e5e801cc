"""The light Arena manifest (spec §6) and the core bridges to it (§4.7)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

import agilerl.arena.models as arena
from agilerl.models import (
    ALGO_REGISTRY,
    DQNSpec,
    GymEnvSpec,
    ManifestError,
    MultiFrequencySelectionSpec,
    MutationSpec,
    TournamentSelectionSpec,
    TrainingManifest,
    TrainingSpec,
)
from agilerl.models import _generated as gen

PPO = {"algorithm": {"name": "PPO", "lr": 0.001}, "environment": {"name": "CartPole-v1"},
       "training": {"max_steps": 1000, "pop_size": 2}}


def test_registry_is_the_eligible_algorithms() -> None:
    assert sorted(arena.ARENA_REGISTRY) == sorted(n for n, e in gen.REGISTRY.items() if e.arena)
    assert set(arena.ARENA_REGISTRY) <= set(ALGO_REGISTRY)


def test_payload_shape() -> None:
    payload = arena.TrainingManifest.get_validated(PPO)
    assert payload["algorithm"]["name"] == "PPO" and payload["algorithm"]["lr"] == 0.001
    assert payload["environment"] == {"name": "CartPole-v1", "num_envs": 16}
    assert payload["mutation"] == {} and payload["tournament_selection"] == {}
    assert payload["network"] == {} and "selection_strategy" not in payload
    with_selection = arena.TrainingManifest.get_validated(
        {**PPO, "selection_strategy": {"strategy": "tournament", "tournament_size": 3}})
    assert with_selection["tournament_selection"] == {"tournament_size": 3, "elitism": True}


def test_unknown_keys_are_dropped_with_a_warning(caplog) -> None:
    data = {**PPO, "algorithm": {"name": "PPO", "lrr": 1}, "extra": 1}
    with caplog.at_level(logging.WARNING):
        payload = arena.TrainingManifest.get_validated(data)
    assert "lrr" not in payload["algorithm"] and "extra" not in payload
    assert "Ignoring unrecognized manifest field(s)" in caplog.text
    assert "algorithm.lrr" in caplog.text


def test_arena_rules() -> None:
    with pytest.raises(ManifestError) as info:
        arena.TrainingManifest.get_validated({**PPO, "selection_strategy": {"tournament_size": 0}})
    assert info.value.paths == ["selection_strategy.tournament_size"]
    with pytest.raises(ManifestError, match="only supports tournament"):
        arena.TrainingManifest.get_validated(
            {**PPO, "selection_strategy": {"strategy": "multi_frequency"}})
    with pytest.raises(KeyError, match="not eligible for Arena"):
        arena.TrainingManifest.get_validated({**PPO, "algorithm": {"name": "CQN"}})
    with pytest.raises(ManifestError, match="environment.name"):
        arena.TrainingManifest.get_validated({**PPO, "environment": {"num_envs": 2}})
    with pytest.raises(ManifestError, match="eval_steps must be greater"):
        arena.TrainingManifest.get_validated({**PPO, "training": {"eval_steps": 3}})
    with pytest.raises(ManifestError, match="cannot both be set"):
        arena.TrainingManifest.get_validated(
            {**PPO, "algorithm": {"name": "PPO", "recurrent": True},
             "network": {"simba": True, "encoder_config": {"hidden_size": 64, "num_blocks": 2},
                         "head_config": {"hidden_size": [32]}}})


def test_llm_network_fills_the_model_and_keeps_lora_under_network() -> None:
    data = {"algorithm": {"name": "DPO"}, "environment": {"name": "HumanLLMs/dpo"},
            "network": {"pretrained_model_name_or_path": "Qwen/Qwen2.5-0.5B",
                        "max_context_length": 2048, "lora_config": {"lora_r": 8}}}
    payload = arena.TrainingManifest.get_validated(data)
    assert payload["algorithm"]["pretrained_model_name_or_path"] == "Qwen/Qwen2.5-0.5B"
    assert payload["algorithm"]["max_model_len"] == 2048
    assert "lora_config" not in payload["algorithm"]
    assert payload["network"]["lora_config"] == {"lora_r": 8}
    with pytest.raises(ManifestError, match="pretrained_model_name_or_path"):
        arena.TrainingManifest.get_validated({**data, "network": None})


def test_errors_point_at_the_file(tmp_path: Path) -> None:
    file = tmp_path / "m.yaml"
    file.write_text("algorithm:\n  name: PPO\n  lr: -1\nenvironment:\n  name: CartPole-v1\n")
    with pytest.raises(ManifestError) as info:
        arena.TrainingManifest.get_validated(file)
    assert f"{file}:3:3" in str(info.value)


# --------------------------------------------------------------------------- core bridges


def test_to_arena_manifest_from_core_object_dict_and_path(peer_manifests_dir: Path, caplog) -> None:
    dqn_yaml = peer_manifests_dir / "tests" / "dqn.yaml"
    core = TrainingManifest.get_validated(dqn_yaml, mode="python")
    with caplog.at_level(logging.WARNING):
        payload = TrainingManifest.to_arena_manifest(core)
    assert "Ignoring" not in caplog.text  # local-only defaults are not sent
    assert payload["tournament_selection"] == {"tournament_size": 2, "elitism": True}
    assert payload["algorithm"]["lr"] == pytest.approx(6.3e-4)
    assert payload["network"]["encoder_config"]["arch"] == "mlp"
    assert TrainingManifest.to_arena_manifest(PPO)["algorithm"]["name"] == "PPO"
    assert TrainingManifest.to_arena_manifest(dqn_yaml, mode="python").algorithm.name == "DQN"


def test_from_trainer_specs_builds_a_validated_manifest() -> None:
    net = {"arch": "mlp", "encoder_config": {"hidden_size": [16]}, "head_config": {"hidden_size": [16]}}
    algo = TrainingManifest.get_validated(
        {"algorithm": {"name": "DQN", "lr": 0.01}, "environment": {"name": "CartPole-v1"},
         "network": net}, mode="python").algorithm
    manifest = TrainingManifest.from_trainer_specs(
        algorithm=algo, environment=GymEnvSpec(name="CartPole-v1", num_envs=2),
        training=TrainingSpec(max_steps=500, pop_size=2),
        mutation={"mutation_sd": 0.2}, selection_strategy=TournamentSelectionSpec())
    assert manifest.algorithm is algo and manifest.algorithm.net_config is not None
    assert manifest.network["encoder_config"]["hidden_size"] == [16]
    assert isinstance(manifest.mutation, MutationSpec) and manifest.mutation.mutation_sd == 0.2
    assert manifest.environment == {"name": "CartPole-v1", "num_envs": 2}
    arena_env = arena.EnvSpec(name="CartPole-v1", num_envs=4)
    foreign = arena.TournamentSelectionSpec(tournament_size=3)
    built = TrainingManifest.from_trainer_specs(algorithm=DQNSpec(), environment=arena_env,
                                                training=TrainingSpec(), selection_strategy=foreign)
    assert type(built.selection_strategy) is TournamentSelectionSpec
    assert built.selection_strategy.tournament_size == 3
    mf = TrainingManifest.from_trainer_specs(
        algorithm=DQNSpec(), environment={"name": "CartPole-v1"},
        training=TrainingSpec(pop_size=8), selection_strategy=MultiFrequencySelectionSpec())
    assert mf.selection_strategy.n_losers == 2


def test_from_trainer_specs_keyword_rules() -> None:
    common = {"algorithm": DQNSpec(), "environment": {"name": "CartPole-v1"}, "training": None}
    with pytest.warns(DeprecationWarning, match="'tournament_selection' argument"):
        m = TrainingManifest.from_trainer_specs(**common, tournament_selection=TournamentSelectionSpec())
    assert isinstance(m.selection_strategy, TournamentSelectionSpec)
    with pytest.raises(ValueError, match="conflicting selection strategies"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TrainingManifest.from_trainer_specs(
            **common, selection_strategy=TournamentSelectionSpec(tournament_size=3),
            tournament_selection=TournamentSelectionSpec(tournament_size=4))
    with pytest.raises(TypeError, match="mutaton"):
        TrainingManifest.from_trainer_specs(**common, mutaton=None)


def test_llm_from_trainer_specs_derives_the_network() -> None:
    algo = TrainingManifest.get_validated(
        {"algorithm": {"name": "DPO"}, "environment": {"dataset": "d"},
         "network": {"pretrained_model_name_or_path": "m", "max_context_length": 512,
                     "lora_config": {"lora_r": 4}}}, mode="python").algorithm
    m = TrainingManifest.from_trainer_specs(algorithm=algo, environment={"dataset": "d"})
    assert m.network["pretrained_model_name_or_path"] == "m"
    assert m.network["max_context_length"] == 512 and m.network["lora_config"]["lora_r"] == 4
    assert "peft_type" not in m.network["lora_config"]
