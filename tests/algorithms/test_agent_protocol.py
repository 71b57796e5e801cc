"""Every algorithm is what the population backends and mutation are typed against: an
``Agent``, and for RL algorithms an ``EvolvableAgent`` (agilerl.core.member_training)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.algorithms import CQN, DDPG, DQN, IPPO, MADDPG, PPO, TD3, NeuralUCB, RainbowDQN
from agilerl.algorithms.core.llm_base import LLMAlgorithm
from agilerl.core.member_training import Agent, EvolvableAgent
from agilerl.hpo.mutation import Mutations

BOX = spaces.Box(-1.0, 1.0, (3,), np.float32)


def single_agent(cls: type) -> object:
    action = spaces.Box(-1.0, 1.0, (1,), np.float32) if cls in (DDPG, TD3) else spaces.Discrete(2)
    return cls(BOX, action, seed=0)


@pytest.mark.parametrize("cls", [DQN, RainbowDQN, CQN, PPO, DDPG, TD3, NeuralUCB])
def test_single_agent_algorithms_are_evolvable_agents(cls: type) -> None:
    assert isinstance(single_agent(cls), EvolvableAgent)


@pytest.mark.parametrize("cls", [IPPO, MADDPG])
def test_multi_agent_algorithms_are_evolvable_agents(cls: type) -> None:
    agent = cls({"a": BOX, "b": BOX}, {"a": spaces.Discrete(2), "b": spaces.Discrete(2)},
                seed=0)
    assert isinstance(agent, EvolvableAgent)


AGENT_METHODS = [name for name in vars(Agent) if not name.startswith("_")
                 and (callable(vars(Agent)[name]) or isinstance(vars(Agent)[name], property))]


@pytest.mark.parametrize("cls", [DQN, RainbowDQN, CQN, PPO, DDPG, TD3, NeuralUCB, IPPO, MADDPG,
                                 LLMAlgorithm])
def test_every_agent_method_is_implemented_not_the_protocols_stub(cls: type) -> None:
    """The algorithms subclass Agent (MemberState does), so hasattr alone would find the
    protocol's empty bodies: each method must come from the algorithm's own classes."""
    assert {"test", "get_state", "clone", "hyperparameters"} <= set(AGENT_METHODS)
    defined_by = {name: next(k for k in cls.__mro__ if name in vars(k)) for name in AGENT_METHODS}
    assert [name for name, owner in defined_by.items() if owner is Agent] == []


def test_llm_members_do_not_evolve_networks() -> None:
    assert not hasattr(LLMAlgorithm, "apply_architecture_mutation")


def test_a_network_mutation_of_a_member_without_networks_is_refused() -> None:
    mutations = Mutations(no_mutation=0.0, architecture=1.0, parameters=0.0, activation=0.0,
                          rl_hp=0.0, new_layer_prob=0.2, rand_seed=0)
    member = SimpleNamespace(index=0, device="cpu", hp_config={}, steps=[0], scores=[],
                             fitness=[], mut="None")
    with pytest.raises(TypeError, match="'arch' mutation needs networks to mutate"):
        mutations.mutate(member, "arch")  # type: ignore[arg-type]
