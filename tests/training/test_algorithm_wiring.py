"""One place wires an algorithm: its registered class, and the generated registry's facts."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import agilerl.algorithms.core.registry as registry
from agilerl.algorithms import DQN, algorithm_class, registered
from agilerl.models import (
    ALGO_REGISTRY,
    DQNSpec,
    ManifestError,
    PPOSpec,
    TrainingManifest,
    TrainingSpec,
)
from agilerl.training.paradigms import PARADIGMS, resolve_paradigm
from agilerl.training.trainer import LocalTrainer, UnsupportedAlgorithmError

REPO = Path(__file__).resolve().parents[2]
PEER = REPO.parent / "shared" / "peer-manifests"
TINY_NET = {"latent_dim": 8, "encoder_config": {"hidden_size": [8]},
            "head_config": {"hidden_size": [8]}}


@pytest.fixture
def private_registry() -> Iterator[dict[str, Any]]:
    """Registrations made in a test stay in the test (modules imported meanwhile keep
    theirs: a module registers its classes only once, when first imported)."""
    before = dict(registry.IMPLEMENTATIONS)
    yield registry.IMPLEMENTATIONS
    for name, cls in list(registry.IMPLEMENTATIONS.items()):
        if name in before and before[name] is not cls:
            registry.IMPLEMENTATIONS[name] = before[name]
        elif name not in before and cls.__module__ == __name__:
            del registry.IMPLEMENTATIONS[name]


def test_a_new_algorithm_needs_only_its_registered_class(private_registry, monkeypatch):
    # RainbowDQN is in the generated registry (off-policy loop); with its implementation
    # hidden, registering a class under its name is all the trainer needs.
    private_registry.pop("RainbowDQN", None)
    monkeypatch.setattr(registry, "_module", lambda name: None)
    with pytest.raises(UnsupportedAlgorithmError, match="not implemented yet"):
        LocalTrainer("RainbowDQN", "CartPole-v1")

    @registered
    class ThrowawayRainbow(DQN):
        algo = "RainbowDQN"  # its hyperparameter names come from RainbowDQN's schema
        double = False
        explored = 0

        @classmethod
        def network_spec_name(cls) -> str:
            return "QNetworkSpec"

        def explore_action(self, obs: Any, vector_step: int, settings: Any = None) -> np.ndarray:
            type(self).explored += 1
            return super().explore_action(obs, vector_step, settings)

    assert algorithm_class("RainbowDQN") is ThrowawayRainbow
    spec = ALGO_REGISTRY["RainbowDQN"](batch_size=16, learn_step=2, net_config=TINY_NET)
    trainer = LocalTrainer(spec, "CartPole-v1", seed=0,
                           training=TrainingSpec(max_steps=64, evo_steps=32, pop_size=2,
                                                 eval_steps=20))
    assert trainer.paradigm == "off_policy" and trainer.memory is not None
    assert all(type(agent) is ThrowawayRainbow for agent in trainer.population)
    population, fitnesses = trainer.train(verbose=False)
    assert len(fitnesses) == 2 and ThrowawayRainbow.explored > 0
    assert len(trainer.memory) > 0 and population[0].steps[-1] >= 64


def test_the_member_trainer_comes_from_the_registry_training_loop(private_registry,
                                                                  monkeypatch):
    calls = []

    def spy(trainer: Any) -> Any:
        calls.append(trainer.paradigm)
        return original(trainer)

    original = PARADIGMS["on_policy"].member_trainer
    monkeypatch.setitem(PARADIGMS, "on_policy",
                        PARADIGMS["on_policy"].__class__(replay_memory=False, member_trainer=spy))
    trainer = LocalTrainer(PPOSpec(learn_step=32, num_envs=2, net_config=TINY_NET),
                           "CartPole-v1", seed=0,
                           training=TrainingSpec(max_steps=32, evo_steps=32, pop_size=1))
    trainer.train(verbose=False)
    assert calls == ["on_policy"] and trainer.memory is None


def hide_implementation(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make registry algorithm ``name`` look as if this version shipped no module for it."""
    monkeypatch.delitem(registry.IMPLEMENTATIONS, name, raising=False)
    real = registry._module
    monkeypatch.setattr(registry, "_module",
                        lambda n: "agilerl.algorithms._not_shipped" if n == name else real(n))


def test_unimplemented_algorithms_are_refused_with_what_trains(monkeypatch):
    hide_implementation(monkeypatch, "MADDPG")
    with pytest.raises(UnsupportedAlgorithmError) as info:
        LocalTrainer("MADDPG", "simple_spread_v3")
    assert "'MADDPG' is not implemented yet" in str(info.value)
    trains = str(info.value).split("LocalTrainer trains: ", 1)[1]
    assert all(name in trains for name in ("DDPG", "DQN", "PPO", "TD3"))


# ---------------------------------------------------------------------- unread settings
@pytest.mark.parametrize(("spec", "field"), [
    (lambda: DQNSpec(cudagraphs=True), "algorithm.cudagraphs = True"),
    (lambda: PPOSpec(rollout_buffer_config={"max_size": 10}), "algorithm.rollout_buffer_config"),
])
def test_settings_nothing_reads_are_refused_naming_the_field(spec, field):
    with pytest.raises(UnsupportedAlgorithmError, match="not implemented in this version") as e:
        LocalTrainer(spec(), "CartPole-v1")
    assert str(e.value).startswith(field)


@pytest.mark.parametrize("field", ["max_seq_len", "bptt_sequence_type"])
def test_recurrent_only_settings_warn_when_changed(field):
    value = {"max_seq_len": 64, "bptt_sequence_type": "fifty_percent_overlap"}[field]
    with pytest.warns(UserWarning, match=f"algorithm.{field} = .* applies to recurrent PPO"):
        resolve_paradigm(PPOSpec(**{field: value}))


def test_recurrent_ppo_reads_its_sequence_settings_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_paradigm(PPOSpec(recurrent=True, max_seq_len=64,
                                        bptt_sequence_type="maximum")) == "on_policy"


def test_default_values_of_those_settings_train_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_paradigm(DQNSpec(cudagraphs=False)) == "off_policy"
        assert resolve_paradigm(PPOSpec(max_seq_len=32, bptt_sequence_type="chunked",
                                        rollout_buffer_config={}, recurrent=False)) == "on_policy"


PEER_FILES = sorted(PEER.glob("**/*.yaml")) if PEER.is_dir() else []


@pytest.mark.skipif(not PEER_FILES, reason="shared/peer-manifests not available")
def test_peer_dqn_and_ppo_manifests_are_all_accepted_recurrent_ppo_included():
    checked = recurrent = 0
    for path in PEER_FILES:
        raw = yaml.safe_load(path.read_text())
        if raw.get("algorithm", {}).get("name") not in ("DQN", "PPO"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # env packages this machine does not have
            try:
                manifest = TrainingManifest.get_validated(str(path), mode="python")
            except ManifestError as exc:  # an id only registered by its own test suite
                assert "is not a registered Gymnasium id" in str(exc)
                continue
        checked += 1
        recurrent += bool(raw["algorithm"].get("recurrent"))
        assert resolve_paradigm(manifest.algorithm) in ("on_policy", "off_policy")
    assert checked >= 10 and recurrent >= 2


# ---------------------------------------------------------------------- defaults
def test_training_code_restates_no_schema_default():
    """Defaults live in schemas/: no literal copy of them in the training code."""
    restated = {"100_000", "100000", "10_000", "10000", "0.999", "0.01"}
    for path in sorted((REPO / "agilerl" / "training").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                    and not isinstance(node.value, bool):
                segment = ast.get_source_segment(path.read_text(), node)
                assert segment not in restated, f"{path.name}:{node.lineno} restates {segment}"


def test_missing_replay_buffer_section_takes_the_schema_default(monkeypatch):
    import agilerl.models as models

    class SmallBuffer(models.ReplayBufferSpec):
        max_size: int = 777

    with pytest.warns(UserWarning, match="100,000 transitions"):
        assert LocalTrainer("DQN", "CartPole-v1").memory.max_size == 100_000
    monkeypatch.setattr(models, "ReplayBufferSpec", SmallBuffer)
    with pytest.warns(UserWarning, match="777 transitions"):
        assert LocalTrainer("DQN", "CartPole-v1").memory.max_size == 777


def test_evo_steps_fallback_is_the_registry_default(monkeypatch):
    trainer = LocalTrainer("DQN", "CartPole-v1", replay_buffer=None)
    monkeypatch.setattr(type(trainer.algorithm_spec), "default_evo_steps", 123)
    assert trainer.evo_steps == 123


def test_registering_needs_a_name_and_replacing_is_logged(private_registry, caplog):
    with pytest.raises(TypeError, match="must set the class attribute 'algo'"):
        registered(type("Nameless", (DQN,), {}))
    replacement = registered(type("OtherDQN", (DQN,), {"algo": "DQN"}))
    assert algorithm_class("DQN") is replacement
    assert "already has an implementation; replacing DQN with OtherDQN" in caplog.text


def test_default_network_comes_from_the_schema():
    """A network built with no section: the MLP seed and the head default of schemas/."""
    import json

    from agilerl.networks.config import default_network

    schema = json.loads((REPO / "schemas" / "sections" / "network.schema.json").read_text())
    defs = schema["$defs"]
    net = default_network()
    assert net["encoder_config"] == {"arch": "mlp", **defs["MlpSpec"]["x-deferred-seed"]}
    assert net["head_config"] == defs["NetworkSpec"]["properties"]["head_config"]["default"]
    net["encoder_config"]["hidden_size"].append(1)  # a copy: the seed itself is unchanged
    assert default_network()["encoder_config"]["hidden_size"] == \
        defs["MlpSpec"]["x-deferred-seed"]["hidden_size"]


def test_a_class_under_an_unregistered_name_is_refused() -> None:
    with pytest.raises(TypeError, match="'NoSuchAlgo' is not a registered algorithm name"):
        registered(type("NoSuchAlgo", (DQN,), {"algo": "NoSuchAlgo"}))
