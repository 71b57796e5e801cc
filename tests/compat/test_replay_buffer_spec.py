"""``ReplayBufferSpec`` as the reference's public API has it: its fields and aliases, and
``init_buffer``/``init_n_step_buffer`` building our replay memories."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from agilerl.components.replay_buffer import (
    MultiStepReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)
from agilerl.models import (
    DDPGSpec,
    DQNSpec,
    MADDPGSpec,
    NStepBufferArgs,
    PerBufferArgs,
    RainbowDQNSpec,
    ReplayBufferSpec,
    TrainingManifest,
)


def _plain(buffer: object) -> bool:
    return type(buffer) is ReplayBuffer


def test_defaults_and_aliases() -> None:
    spec = ReplayBufferSpec()
    assert spec.max_size == 100_000 and spec.standard_buffer is True
    assert spec.n_step_buffer is False and isinstance(spec.n_step_buffer_args, NStepBufferArgs)
    assert spec.per_buffer is False and isinstance(spec.per_buffer_args, PerBufferArgs)
    assert ReplayBufferSpec(memory_size=25_000).max_size == 25_000
    assert ReplayBufferSpec.model_validate({"memory_size": 75_000, "per_buffer": True}).max_size \
        == 75_000
    for bad in (0, -5):
        with pytest.raises(ValidationError):
            ReplayBufferSpec(max_size=bad)


def test_manifest_section_is_the_same_class() -> None:
    manifest = TrainingManifest.get_validated({
        "algorithm": {"name": "DQN"}, "environment": {"name": "CartPole-v1"},
        "replay_buffer": {"memory_size": 500}}, mode="python")
    assert isinstance(manifest.replay_buffer, ReplayBufferSpec)
    assert manifest.replay_buffer.init_buffer(manifest.algorithm).max_size == 500


@pytest.mark.parametrize("algo", [DQNSpec, DDPGSpec])
def test_standard_buffer(algo) -> None:
    buffer = ReplayBufferSpec(max_size=2048).init_buffer(algo(), device="cpu")
    assert _plain(buffer) and buffer.max_size == 2048


def test_n_step_buffer_uses_the_algorithms_gamma_and_n() -> None:
    buffer = ReplayBufferSpec(n_step_buffer=True, max_size=512).init_buffer(DQNSpec(gamma=0.95))
    assert isinstance(buffer, MultiStepReplayBuffer)
    assert (buffer.gamma, buffer.n_step, buffer.max_size) == (0.95, 3, 512)
    custom = ReplayBufferSpec(n_step_buffer=True, n_step_buffer_args=NStepBufferArgs(n_step=5))
    assert custom.init_buffer(DQNSpec()).n_step == 5


def test_n_step_without_gamma_is_refused() -> None:
    with pytest.raises(ValueError, match="Gamma must be specified"):
        ReplayBufferSpec(n_step_buffer=True).init_buffer(SimpleNamespace(agent_type="single_agent"))


def test_per_buffer_is_rainbow_only() -> None:
    spec = ReplayBufferSpec(per_buffer=True, per_buffer_args=PerBufferArgs(alpha=0.7),
                            max_size=4096)
    buffer = spec.init_buffer(RainbowDQNSpec())
    assert isinstance(buffer, PrioritizedReplayBuffer)
    assert (buffer.alpha, buffer.max_size) == (0.7, 4096)
    assert ReplayBufferSpec(per_buffer=True).init_buffer(RainbowDQNSpec()).alpha == 0.5
    for algo in (DQNSpec(), DDPGSpec()):
        with pytest.raises(ValueError, match="only supported for Rainbow DQN"):
            spec.init_buffer(algo)


def test_per_wins_and_n_step_becomes_the_secondary_memory() -> None:
    spec = ReplayBufferSpec(per_buffer=True, n_step_buffer=True)
    assert isinstance(spec.init_buffer(RainbowDQNSpec()), PrioritizedReplayBuffer)
    assert isinstance(spec.init_n_step_buffer(RainbowDQNSpec()), MultiStepReplayBuffer)
    with pytest.raises(ValueError, match="Gamma must be specified"):
        spec.init_n_step_buffer(SimpleNamespace())
    n_step_only = ReplayBufferSpec(n_step_buffer=True)
    assert isinstance(n_step_only.init_buffer(RainbowDQNSpec()), MultiStepReplayBuffer)
    assert n_step_only.init_n_step_buffer(RainbowDQNSpec()) is None


def test_multi_agent_gets_a_plain_buffer_whatever_the_flags() -> None:
    spec = ReplayBufferSpec(n_step_buffer=True, per_buffer=True, max_size=10_000)
    buffer = spec.init_buffer(MADDPGSpec(), device="cpu")
    assert _plain(buffer) and buffer.max_size == 10_000
