"""A manifest's algorithm spec reaches the algorithm as a spec, validated once (when the
manifest was read); the public constructor still takes keyword hyperparameters."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.algorithms import DQN, PPO, build_algorithm
from agilerl.models import DQNSpec, PPOSpec

OBS = spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = spaces.Discrete(2)


def test_build_algorithm_does_not_validate_the_spec_again(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = DQNSpec(lr=3e-4, gamma=0.95)
    calls: list[object] = []
    monkeypatch.setattr(DQN, "validate_hyperparameters",
                        classmethod(lambda cls, hp: calls.append(hp)))
    agent = build_algorithm(spec, OBS, ACT, seed=0)
    assert calls == []
    assert (agent.lr, agent.gamma) == (3e-4, 0.95)
    assert agent.spec == spec and agent.spec is not spec  # members do not share one spec


def test_the_public_constructor_builds_and_validates_its_spec() -> None:
    agent = DQN(OBS, ACT, lr=3e-4, seed=0)
    assert isinstance(agent.spec, DQNSpec) and agent.lr == 3e-4
    with pytest.raises(ValueError):
        DQN(OBS, ACT, lr=-1.0, seed=0)


def test_a_spec_of_another_algorithm_or_with_keywords_is_refused() -> None:
    with pytest.raises(TypeError, match="DQN takes a DQNSpec as spec=, got PPOSpec"):
        DQN(OBS, ACT, spec=PPOSpec())
    with pytest.raises(TypeError, match="not both"):
        PPO(OBS, ACT, spec=PPOSpec(), lr=1e-3)
