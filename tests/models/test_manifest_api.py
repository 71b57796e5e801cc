"""``TrainingManifest`` behaviours (spec §8.1) and registry facts."""

from __future__ import annotations

import copy
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import agilerl.models as models
from agilerl.models import (
    ALGO_REGISTRY,
    AgentType,
    ManifestError,
    MultiFrequencySelectionSpec,
    TournamentSelectionSpec,
    TrainingManifest,
)
from agilerl.models import _generated as gen

DQN_MANIFEST = {
    "algorithm": {"name": "DQN", "lr": 0.001},
    "environment": {"name": "CartPole-v1", "num_envs": 2},
    "training": {"max_steps": 100, "pop_size": 2},
}
NETWORK = {"arch": "mlp", "latent_dim": 32, "encoder_config": {"hidden_size": [32]},
           "head_config": {"hidden_size": [32]}}
RL_NAMES = ["DQN", "RainbowDQN", "DDPG", "TD3", "PPO", "CQN", "NeuralTS", "NeuralUCB", "IPPO",
            "MADDPG", "MATD3"]


def manifest(**sections):
    data = copy.deepcopy(DQN_MANIFEST)
    for key, value in sections.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def error_paths(data) -> list[str]:
    with pytest.raises(ManifestError) as info:
        TrainingManifest.get_validated(data)
    return info.value.paths


def test_json_mode_omits_absent_optional_sections() -> None:
    out = TrainingManifest.get_validated(manifest())
    assert {"mutation", "selection_strategy", "network", "replay_buffer"}.isdisjoint(out)
    assert out["algorithm"]["name"] == "DQN" and out["algorithm"]["tau"] == 0.001
    assert "hp_config" not in out["algorithm"] and "actor_network" not in out["algorithm"]


def test_unknown_keys_are_errors_naming_their_path() -> None:
    assert error_paths(manifest(algorithm={"name": "DQN", "lrr": 0.1})) == ["algorithm.lrr"]
    assert error_paths({**manifest(), "extra": 1}) == ["extra"]
    assert error_paths(manifest(selection_strategy={"elitsm": True})) == ["selection_strategy.elitsm"]
    assert error_paths(manifest(tournament_selection={"elitsm": True})) == ["tournament_selection.elitsm"]


def test_alias_spellings_and_runtime_fields_are_accepted() -> None:
    data = manifest(algorithm={"name": "DQN", "cudagraphs": False, "actor_network": None},
                    training={"population_size": 3, "metrics_interval": 50, "max_steps": 100},
                    replay_buffer={"memory_size": 50_000})
    m = TrainingManifest.get_validated(data, mode="python")
    assert m.training.pop_size == 3 and m.training.evo_steps == 50
    assert m.replay_buffer.max_size == 50_000
    assert TrainingManifest.get_validated(data)["training"]["pop_size"] == 3


def test_legacy_selection_key() -> None:
    four = {"max_steps": 100, "pop_size": 4}
    m = TrainingManifest.get_validated(manifest(tournament_selection={"tournament_size": 3},
                                                training=four), mode="python")
    assert isinstance(m.selection_strategy, TournamentSelectionSpec)
    out = TrainingManifest.get_validated(manifest(tournament_selection={"tournament_size": 3},
                                                  training=four))
    assert "tournament_selection" not in out and out["selection_strategy"]["tournament_size"] == 3
    with pytest.warns(DeprecationWarning, match="tournament_selection is deprecated"):
        assert m.tournament_selection is m.selection_strategy
    assert "tournament_selection" not in TrainingManifest.model_fields
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dumped = m.model_dump(by_alias=True)
    assert "tournament_selection" in dumped and "selection_strategy" not in dumped


def test_deprecated_property_is_none_when_unset_or_mf() -> None:
    unset = TrainingManifest.get_validated(manifest(), mode="python")
    mf = TrainingManifest.get_validated(manifest(
        training={"pop_size": 8, "max_steps": 100},
        selection_strategy={"strategy": "multi_frequency"}), mode="python")
    with pytest.warns(DeprecationWarning):
        assert unset.tournament_selection is None
    with pytest.warns(DeprecationWarning):
        assert mf.tournament_selection is None


def test_eager_network_is_normalised_with_defaults() -> None:
    out = TrainingManifest.get_validated(manifest(network=NETWORK))
    network = out["network"]
    assert "arch" not in network and "name" not in network
    assert network["encoder_config"]["arch"] == "mlp"
    for key in ("layer_norm", "init_layers", "output_vanish"):
        assert key in network["encoder_config"]
    assert "arch" not in network["head_config"]
    m = TrainingManifest.get_validated(manifest(network=NETWORK), mode="python")
    assert isinstance(m.algorithm.net_config, models.QNetworkSpec)
    assert isinstance(m.algorithm.net_config.encoder_config, models.MlpSpec)


@pytest.mark.parametrize("arch,encoder", [
    ("mlp", {"hidden_size": [32]}),
    ("cnn", {"channel_size": [16], "kernel_size": [3], "stride_size": [1]}),
    ("lstm", {"hidden_state_size": 32}),
    ("simba", {"hidden_size": 32, "num_blocks": 2}),
    ("multiinput", {"latent_dim": 16}),
])
def test_each_arch_resolves_eagerly(arch: str, encoder: dict) -> None:
    net = {"arch": arch, "encoder_config": encoder, "head_config": {"hidden_size": [32]}}
    m = TrainingManifest.get_validated(manifest(algorithm={"name": "PPO"}, network=net),
                                       mode="python")
    assert m.network["encoder_config"]["arch"] == arch
    assert isinstance(m.algorithm.net_config, models.StochasticActorSpec)
    assert m.algorithm.net_config.encoder_config.arch == arch


def test_deferred_network_stays_raw() -> None:
    net = {"encoder_config": {"hidden_size": [32]}, "head_config": {"hidden_size": [32]}}
    m = TrainingManifest.get_validated(manifest(network=net), mode="python")
    assert m.algorithm.net_config == net and "arch" not in m.algorithm.net_config
    assert m.network == net


def test_empty_network_means_no_network() -> None:
    """``network: {}`` is how an Arena payload says "unset": the same as no section."""
    m = TrainingManifest.get_validated(manifest(network={}), mode="python")
    assert m.network is None and m.algorithm.net_config is None
    assert TrainingManifest.get_validated(manifest(network={})) == \
        TrainingManifest.get_validated(manifest())
    # A partial network is a network: the encoder is inferred, the head takes its default.
    partial = TrainingManifest.get_validated(manifest(network={"latent_dim": 16}), mode="python")
    assert partial.network == {"latent_dim": 16}


def test_simba_false_with_mlp_is_fine() -> None:
    TrainingManifest.get_validated(manifest(network={**NETWORK, "simba": False}))


@pytest.mark.parametrize("network", [
    {"simba": True, "encoder_config": {"hidden_size": 64, "num_blocks": 2},
     "head_config": {"hidden_size": [32]}},
    {"arch": "simba", "encoder_config": {"hidden_size": 64, "num_blocks": 2},
     "head_config": {"hidden_size": [32]}},
])
def test_recurrent_and_simba_conflict(network: dict) -> None:
    bad = manifest(algorithm={"name": "PPO", "recurrent": True}, network=network)
    with pytest.raises(ManifestError, match="cannot both be set"):
        TrainingManifest.get_validated(bad)
    TrainingManifest.get_validated(manifest(algorithm={"name": "PPO"}, network=network))
    TrainingManifest.get_validated(manifest(algorithm={"name": "PPO", "recurrent": True},
                                            network={**NETWORK, "arch": "lstm",
                                                     "encoder_config": {"hidden_state_size": 32}}))


@pytest.mark.parametrize("name", RL_NAMES)
def test_model_validate_dispatches_every_rl_name(name: str) -> None:
    env = {"name": "mpe2.simple_speaker_listener_v4"} if name in ("IPPO", "MADDPG", "MATD3") \
        else {"name": "CartPole-v1", "minari_dataset_id": "cartpole-v0"} if name == "CQN" \
        else {"features": "f.csv", "targets": "t.csv"} if name.startswith("Neural") \
        else {"name": "Pendulum-v1"} if name in ("DDPG", "TD3") \
        else {"name": "CartPole-v1"}
    data = {"algorithm": {"name": name}, "environment": env}
    m = TrainingManifest.model_validate(data) if not name.startswith("Neural") else \
        TrainingManifest.from_document(_doc(data), check_environment=False)
    assert type(m.algorithm) is ALGO_REGISTRY[name]


def _doc(data):
    from agilerl.models.loading import LocatedDocument

    return LocatedDocument(data=data)


@pytest.mark.parametrize("check_environment", [True, False])
def test_a_bandit_table_of_a_type_no_reader_takes_is_refused_where_it_is_named(
        check_environment: bool) -> None:
    """Refused when the manifest is validated, not when the environment is built; instead
    of (not besides) the file's absence."""
    data = {"algorithm": {"name": "NeuralUCB"},
            "environment": {"features": "f.xlsx", "targets": "t.csv"}}
    with pytest.raises(ManifestError) as caught:
        TrainingManifest.from_document(_doc(data), check_environment=check_environment)
    features = [e["msg"] for e in caught.value.errors() if e["loc"] == ("environment", "features")]
    assert features == ["Unsupported file type '.xlsx' for 'f.xlsx': use one of .csv, .parquet, "
                        ".pq, .h5, .hdf5."]


def test_llm_specs_validate_and_merge_the_network() -> None:
    grpo = {"algorithm": {"name": "GRPO", "group_size": 4, "max_model_len": 10,
                          "pretrained_model_name_or_path": "old/model"},
            "environment": {"env_type": "multiturn", "env_name": "game:X-v0"},
            "network": {"pretrained_model_name_or_path": "Qwen/Qwen2.5-0.5B",
                        "max_context_length": 2048, "lora_config": {"lora_r": 8}}}
    m = TrainingManifest.get_validated(grpo, mode="python")
    assert m.algorithm.pretrained_model_name_or_path == "Qwen/Qwen2.5-0.5B"
    assert m.algorithm.max_model_len == 2048 and m.algorithm.lora_config["lora_r"] == 8
    assert m.env_spec.env_type == "multiturn"
    dpo = {"algorithm": {"name": "DPO", "pretrained_model_name_or_path": "m",
                         "micro_batch_size_per_gpu": 2},
           "environment": {"dataset": "HumanLLMs/Human-Like-DPO-Dataset"}}
    m = TrainingManifest.get_validated(dpo, mode="python")
    assert m.algorithm.micro_batch_size_per_gpu == 2 and m.algorithm.mini_batch_size is None
    assert m.env_spec.env_type == "preference"
    assert type(m.env_spec) is models.LLMEnvSpec
    no_model = {"algorithm": {"name": "DPO"}, "environment": {"dataset": "d"}}
    with pytest.raises(ManifestError, match="pretrained_model_name_or_path"):
        TrainingManifest.get_validated(no_model)


def test_missing_and_unknown_algorithm_names() -> None:
    with pytest.raises(ManifestError, match="name"):
        TrainingManifest.get_validated(manifest(algorithm={"lr": 0.1}))
    with pytest.raises(KeyError, match="Dqn") as info:
        TrainingManifest.get_validated(manifest(algorithm={"name": "Dqn"}))
    assert isinstance(info.value, ValueError)
    issue = info.value.issues[0]
    assert issue.path == "algorithm.name" and issue.suggestion == "DQN"
    assert "RainbowDQN" in issue.message


def test_sections_defaults_and_missing_environment() -> None:
    m = TrainingManifest.get_validated({"algorithm": {"name": "DQN"},
                                        "environment": {"name": "CartPole-v1"}}, mode="python")
    assert m.mutation is None and m.selection_strategy is None and m.replay_buffer is None
    assert m.network is None and m.algorithm.net_config is None
    assert (m.training.max_steps, m.training.pop_size, m.training.hpo) == (1_000_000, 1, True)
    assert m.algorithm.batch_size == 128
    assert error_paths({"algorithm": {"name": "DQN"}}) == ["environment"]


def test_environment_is_kept_as_written_and_checked_strictly() -> None:
    m = TrainingManifest.get_validated(manifest(environment={"name": "CartPole-v1",
                                                             "entrypoint": None}), mode="python")
    assert m.environment == {"name": "CartPole-v1", "entrypoint": None}
    assert type(m.env_spec) is models.GymEnvSpec
    # Stricter than the reference, which ignores unknown environment keys.
    assert error_paths(manifest(environment={"name": "CartPole-v1", "custom": 1})) == [
        "environment.custom"]


def test_reference_dqn_test_manifest_values(peer_manifests_dir: Path) -> None:
    m = TrainingManifest.get_validated(peer_manifests_dir / "tests" / "dqn.yaml", mode="python")
    algo = m.algorithm
    assert isinstance(algo, models.DQNSpec)
    assert (algo.batch_size, algo.tau, algo.double) == (128, 0.001, False)
    assert algo.lr == pytest.approx(6.3e-4)
    assert isinstance(m.mutation, models.MutationSpec)
    assert m.network["encoder_config"]["arch"] == "mlp"
    assert m.replay_buffer.max_size == 100_000
    assert isinstance(m.selection_strategy, TournamentSelectionSpec)
    assert (m.training.pop_size, m.training.eps_start, m.training.eps_end) == (4, 1.0, 0.1)


def test_env_specs_follow_the_agent_type(peer_manifests_dir: Path, peer_data_cwd: Path) -> None:
    tests = peer_manifests_dir / "tests"
    bandit = TrainingManifest.get_validated(tests / "neural_ts.yaml", mode="python").env_spec
    assert type(bandit) is models.BanditEnvSpec and bandit.name == "IRIS"
    offline = TrainingManifest.get_validated(tests / "cqn.yaml", mode="python").env_spec
    assert type(offline) is models.OfflineEnvSpec and offline.minari_dataset_id == "cartpole-v0"
    pz = TrainingManifest.get_validated(tests / "maddpg.yaml", mode="python").env_spec
    assert type(pz) is models.PzEnvSpec
    assert (pz.name, pz.num_envs) == ("mpe2.simple_speaker_listener_v4", 16)
    for name, rows in (("cispo_quant_bench.yaml", 128), ("cispo_quant_bench_qwen.yaml", 64)):
        m = TrainingManifest.get_validated(
            peer_manifests_dir / "configs" / "llm_finetuning" / name, mode="python")
        assert m.algorithm.chunk_rows == rows


def test_relative_data_files_resolve_against_the_manifest_folder(repo_root: Path,
                                                                 tmp_path: Path,
                                                                 monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    m = TrainingManifest.get_validated(repo_root / "configs" / "training" / "neural_ts.yaml",
                                       mode="python")
    spec = m.env_spec
    assert Path(spec.features).is_file() and Path(spec.features).is_absolute()
    assert m.environment["features"] == "data/blobs_features.csv"


def test_recurrent_ppo_serialises_its_registry_name() -> None:
    m = TrainingManifest.get_validated(manifest(algorithm={"name": "PPO", "recurrent": True}),
                                       mode="python")
    assert m.algorithm.display_name == "Recurrent PPO"
    out = TrainingManifest.get_validated(manifest(algorithm={"name": "PPO", "recurrent": True}))
    assert out["algorithm"]["name"] == "PPO"
    assert TrainingManifest.get_validated(out)["algorithm"]["recurrent"] is True


def test_caller_mapping_is_not_mutated_and_strings_are_paths(tmp_path: Path) -> None:
    data = manifest(network=NETWORK)
    before = copy.deepcopy(data)
    TrainingManifest.get_validated(data)
    assert data == before
    with pytest.raises(FileNotFoundError):
        TrainingManifest.get_validated(str(tmp_path / "missing.yaml"))


def test_yaml_exponent_floats_are_numbers(tmp_path: Path) -> None:
    file = tmp_path / "m.yaml"
    file.write_text("algorithm:\n  name: DQN\n  lr: 1e-4\nenvironment:\n  name: CartPole-v1\n")
    assert TrainingManifest.get_validated(file)["algorithm"]["lr"] == 1e-4


def test_an_unregistered_gym_id_is_an_error() -> None:
    with pytest.raises(ManifestError, match="'NoSuchImage-v0' is not a registered Gymnasium id"):
        TrainingManifest.get_validated(manifest(environment={"name": "NoSuchImage-v0"}))


def test_an_id_registered_by_the_program_is_accepted(dummy_image_registered: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainingManifest.get_validated(manifest(environment={"name": dummy_image_registered}))


def test_local_checks_warn_when_they_cannot_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    from agilerl.models import env_checks

    # as where ale-py is not installed
    find_spec, ids = env_checks.importlib.util.find_spec, env_checks.gymnasium_ids
    monkeypatch.setattr(env_checks.importlib.util, "find_spec",
                        lambda name, *a: None if name == "ale_py" else find_spec(name, *a))
    monkeypatch.setattr(env_checks, "gymnasium_ids", lambda: {
        k: v for k, v in (ids() or {}).items() if not k.startswith("ALE/")})
    with pytest.warns(models.ManifestWarning, match="ale_py package"):
        TrainingManifest.get_validated(manifest(algorithm={"name": "PPO"},
                                                environment={"name": "ALE/Breakout-v5"}))


def test_model_validate_and_constructor_report_like_get_validated() -> None:
    with pytest.raises(ManifestError) as info:
        TrainingManifest.model_validate(manifest(training={"pop_size": 0}))
    assert info.value.paths == ["training.pop_size"]
    assert info.value.issues[0].location is None
    with pytest.raises(ManifestError):
        TrainingManifest(**manifest(training={"pop_size": 0}))
    built = TrainingManifest(**manifest())
    assert isinstance(built.algorithm, models.DQNSpec)


# --------------------------------------------------------------------------- registry


def test_registry_facts() -> None:
    assert set(RL_NAMES) <= set(ALGO_REGISTRY) and set(ALGO_REGISTRY) == set(gen.REGISTRY)
    dqn, cqn, ts, grpo, dpo = (ALGO_REGISTRY[n] for n in ("DQN", "CQN", "NeuralTS", "GRPO", "DPO"))
    assert dqn.agent_type is AgentType.SingleAgent and dqn.off_policy and dqn.default_evo_steps == 10_000
    assert cqn.agent_type is AgentType.OfflineAgent and cqn.offline and cqn.default_evo_steps == 5_000
    assert ts.agent_type is AgentType.BanditAgent and ts.bandit and ts.default_evo_steps == 500
    assert grpo.agent_type is AgentType.LLMAgent and grpo.default_evo_steps == 5
    assert (grpo.env_type, dpo.env_type) == ("reasoning", "preference")
    assert ALGO_REGISTRY["PPO"].network_spec is models.StochasticActorSpec
    assert ALGO_REGISTRY["DQN"].network_spec is models.QNetworkSpec
    assert ALGO_REGISTRY["MADDPG"].env_spec is models.PzEnvSpec
    assert issubclass(ALGO_REGISTRY["IPPO"], models.MultiAgentRLAlgorithmSpec)
    assert issubclass(grpo, models.LLMAlgorithmSpec) and issubclass(dqn, models.RLAlgorithmSpec)
    assert [a.value for a in AgentType] == ["single_agent", "multi_agent", "llm_agent",
                                            "offline_agent", "bandit_agent"]


def test_reregistering_warns_once(caplog) -> None:
    original = ALGO_REGISTRY["DQN"]

    class OtherDQN(original):  # type: ignore[misc,valid-type]
        pass

    try:
        with caplog.at_level(logging.WARNING, logger="agilerl.models.algo"):
            models.register_algorithm("DQN", OtherDQN)
        assert len([r for r in caplog.records if "already registered" in r.message]) == 1
        assert ALGO_REGISTRY["DQN"] is OtherDQN
    finally:
        ALGO_REGISTRY["DQN"] = original


def test_network_arch_is_resolvable() -> None:
    assert models.network_arch_is_resolvable({"arch": "mlp"})
    assert models.network_arch_is_resolvable({"encoder_config": {"arch": "cnn"}})
    assert not models.network_arch_is_resolvable({"encoder_config": {"hidden_size": [1]}})
    assert not models.network_arch_is_resolvable({})
    assert not models.network_arch_is_resolvable(None)


def test_mf_selection_in_a_manifest() -> None:
    data = manifest(training={"population_size": 16, "max_steps": 100},
                    selection_strategy={"strategy": "multi_frequency"})
    m = TrainingManifest.get_validated(data, mode="python")
    assert isinstance(m.selection_strategy, MultiFrequencySelectionSpec)
    out = TrainingManifest.get_validated(data)["selection_strategy"]
    assert (out["n_winners"], out["n_survivors"], out["n_open_for_migration"], out["n_losers"]) == (2, 0, 2, 4)
    assert out["strategy"] == "multi_frequency" and out["evolution_frequency_ratios"] == [1, 5]
    legacy = TrainingManifest.get_validated(
        {**manifest(training={"pop_size": 16, "max_steps": 100}),
         "tournament_selection": {"strategy": "multi_frequency"}}, mode="python")
    assert legacy.selection_strategy == m.selection_strategy


def test_importing_models_is_light() -> None:
    code = ("import sys, agilerl.models; "
            "print(any(m in sys.modules for m in ('torch', 'gymnasium', 'pettingzoo')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_settings_that_would_be_ignored_warn() -> None:
    with pytest.warns(models.ManifestWarning, match="does not use a replay buffer"):
        TrainingManifest.get_validated(manifest(algorithm={"name": "PPO"},
                                                replay_buffer={"max_size": 10}))
    with pytest.warns(models.ManifestWarning, match="max_wall_seconds only applies"):
        TrainingManifest.get_validated(manifest(training={"max_wall_seconds": 60}))
    llm = {"algorithm": {"name": "DPO", "pretrained_model_name_or_path": "m"},
           "environment": {"dataset": "d"}, "training": {"target_score": 1.0, "eval_loop": 1}}
    with pytest.warns(models.ManifestWarning, match="not supported by LLM fine-tuning are ignored: target_score"):
        TrainingManifest.get_validated(llm)


def test_sections_may_be_spec_objects() -> None:
    import agilerl.arena.models as arena

    algo = models.DQNSpec(lr=0.01)
    m = TrainingManifest(algorithm=algo, environment=models.GymEnvSpec(name="CartPole-v1"),
                         training=models.TrainingSpec(pop_size=2),
                         selection_strategy=TournamentSelectionSpec(tournament_size=2))
    assert m.algorithm is algo and m.training.pop_size == 2
    foreign = TrainingManifest.model_validate({"algorithm": arena.PPOSpec(lr=0.002),
                                               "environment": {"name": "CartPole-v1"}})
    assert isinstance(foreign.algorithm, models.PPOSpec) and foreign.algorithm.lr == 0.002


@pytest.mark.parametrize(("section", "both"), [
    ("training", {"pop_size": 2, "population_size": 4}),
    ("training", {"evo_steps": 100, "metrics_interval": 200}),
    ("replay_buffer", {"max_size": 1000, "memory_size": 2000}),
])
def test_two_spellings_of_one_setting_are_refused_naming_both(section, both) -> None:
    data = manifest(**{section: both})
    with pytest.raises(ManifestError) as caught:
        TrainingManifest.get_validated(data, mode="python")
    first, second = sorted(both)
    assert f"'{first}'" in str(caught.value) and f"'{second}'" in str(caught.value)
    assert "spellings of the same setting" in str(caught.value)


def test_a_manifest_error_is_a_pydantic_validation_error() -> None:
    # Code written against the reference library catches pydantic's ValidationError.
    import pickle

    from pydantic import ValidationError

    from agilerl.models import ManifestError, TrainingManifest

    with pytest.raises(ValidationError) as caught:
        TrainingManifest.model_validate({"algorithm": {"name": "DQN", "lr": 2.0},
                                         "environment": {"name": "CartPole-v1"}})
    error = caught.value
    assert isinstance(error, ManifestError) and isinstance(error, ValueError)
    [entry] = error.errors()
    assert entry["loc"] == ("algorithm", "lr") and entry["type"] == "manifest"
    assert str(error).startswith("invalid manifest (1 problem)")
    copied = pickle.loads(pickle.dumps(error))  # crosses process boundaries intact
    assert type(copied) is type(error) and copied.issues == error.issues
    assert str(copied) == str(error)


def test_the_registry_answers_the_reference_librarys_calls(caplog) -> None:
    from agilerl.models import ALGO_REGISTRY, PPOSpec
    from agilerl.models.algo import AlgorithmSpec, RegistryEntry

    assert ALGO_REGISTRY.get("PPO") == RegistryEntry(spec_cls=PPOSpec)
    assert ALGO_REGISTRY["PPO"] is PPOSpec and issubclass(PPOSpec, AlgorithmSpec)
    with pytest.raises(KeyError, match="No registry entry for algorithm 'ppo'. Registered: .*PPO"):
        ALGO_REGISTRY.get("ppo")

    class MyPPOSpec(PPOSpec):
        pass

    try:
        with caplog.at_level(logging.WARNING):
            ALGO_REGISTRY.add("PPO", MyPPOSpec)
        assert ALGO_REGISTRY.get("PPO").spec_cls is MyPPOSpec
        assert "already registered" in caplog.text
    finally:
        ALGO_REGISTRY["PPO"] = PPOSpec
