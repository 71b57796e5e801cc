"""Which replay memories an algorithm may be given comes from its schema's
``x-agilerl.replay_features``, read in one place by the manifest rule, ``init_buffer`` and
the trainer."""

from __future__ import annotations

import pytest

from agilerl.components.replay_buffer import PrioritizedReplayBuffer
from agilerl.core.errors import UnsupportedAlgorithmError
from agilerl.models import (
    DQNSpec,
    ManifestError,
    RainbowDQNSpec,
    ReplayBufferSpec,
    TrainingManifest,
)
from agilerl.training.build import _check_replay_features


def manifest(algorithm: str, **buffer: object) -> dict[str, object]:
    return {"algorithm": {"name": algorithm}, "environment": {"name": "CartPole-v1"},
            "replay_buffer": {"max_size": 1000, **buffer}}


def test_the_registry_carries_the_schema_features() -> None:
    assert RainbowDQNSpec.replay_features == frozenset({"per", "n_step"})
    assert DQNSpec.replay_features == frozenset()


def test_per_for_an_algorithm_without_the_feature_is_refused_naming_who_has_it() -> None:
    with pytest.raises(ManifestError, match="only supported for Rainbow DQN, not DQN") as info:
        TrainingManifest.get_validated(manifest("DQN", per_buffer=True), mode="python")
    assert info.value.paths == ["replay_buffer.per_buffer"]
    TrainingManifest.get_validated(manifest("RainbowDQN", per_buffer=True), mode="python")


def test_the_rule_follows_the_feature_not_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DQNSpec, "replay_features", frozenset({"per"}))
    TrainingManifest.get_validated(manifest("DQN", per_buffer=True), mode="python")
    memory = ReplayBufferSpec(per_buffer=True).init_buffer(DQNSpec())
    assert isinstance(memory, PrioritizedReplayBuffer)
    _check_replay_features(DQNSpec(), ReplayBufferSpec(per_buffer=True))
    with pytest.raises(UnsupportedAlgorithmError, match="n_step_buffer: DQN does not learn"):
        _check_replay_features(DQNSpec(), ReplayBufferSpec(n_step_buffer=True))


def test_init_buffer_and_the_trainer_build_the_same_prioritized_n_step_memory() -> None:
    from agilerl import LocalTrainer

    raw = manifest("RainbowDQN", per_buffer=True, n_step_buffer=True)
    raw["algorithm"] = {"name": "RainbowDQN", "gamma": 0.9}
    raw["training"] = {"pop_size": 1, "max_steps": 100}
    trained = LocalTrainer.from_manifest(manifest=raw, seed=0).memory
    built = ReplayBufferSpec(per_buffer=True, n_step_buffer=True, max_size=1000).init_buffer(
        RainbowDQNSpec(gamma=0.9))
    for memory in (trained, built):
        assert type(memory) is PrioritizedReplayBuffer and memory.max_size == 1000
        assert (memory.alpha, memory.window.n_step, memory.window.gamma) == (0.5, 3, 0.9)
