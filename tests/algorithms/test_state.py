"""Same seed -> same result; get_state/set_state, clone and checkpoint round trips."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import DQN, PPO, RLAlgorithm, build_algorithm
from agilerl.algorithms.core.exploration import EpsilonSchedule
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.envs.probe import make_probe_vector_env
from agilerl.hpo.mutation import Mutations
from agilerl.training.experience import (
    train_off_policy_member,
    train_on_policy_member,
)

EPS = EpsilonSchedule(1.0, 0.1, 0.995)


def _weights(agent: RLAlgorithm) -> dict[str, torch.Tensor]:
    return {f"{n}.{k}": v for n, net in agent.networks.items() for k, v in net.state_dict().items()}


def _assert_same(a: RLAlgorithm, b: RLAlgorithm) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


def _dqn_run(net: dict, seed: int) -> DQN:
    env = make_probe_vector_env("ObsPolicyEnv", 4)
    agent = DQN(
        env.single_observation_space,
        env.single_action_space,
        net_config=net,
        seed=seed,
        batch_size=16,
        learn_step=4,
    )
    memory = ReplayBuffer(500, seed=seed)
    for generation in range(2):
        train_off_policy_member(agent, env, memory, 200, exploration=EPS, seed=100 + generation)
    return agent


def _ppo_run(net: dict, seed: int, env_name: str = "ObsPolicyContEnv") -> PPO:
    env = make_probe_vector_env(env_name, 4)
    agent = PPO(
        env.single_observation_space,
        env.single_action_space,
        net_config=net,
        seed=seed,
        batch_size=32,
        learn_step=64,
        num_envs=4,
    )
    train_on_policy_member(agent, env, 256, seed=7)
    return agent


def test_same_seed_same_weights_dqn(small_net):
    a, b = _dqn_run(small_net, 3), _dqn_run(small_net, 3)
    _assert_same(a, b)
    assert a.steps == b.steps == [400] and a.scores == b.scores
    c = _dqn_run(small_net, 4)
    assert any(not torch.equal(v, _weights(c)[k]) for k, v in _weights(a).items())


@pytest.mark.parametrize("env_name", ["ObsPolicyEnv", "ObsPolicyContEnv"])
def test_same_seed_same_weights_ppo(small_net, env_name):
    _assert_same(_ppo_run(small_net, 1, env_name), _ppo_run(small_net, 1, env_name))


def test_state_round_trip_continues_identically(small_net):
    """Training from a restored state equals training the original (exact resume)."""
    env = make_probe_vector_env("ObsPolicyEnv", 4)
    agent = DQN(
        env.single_observation_space,
        env.single_action_space,
        net_config=small_net,
        seed=0,
        batch_size=16,
        learn_step=4,
    )
    memory = ReplayBuffer(500, seed=0)
    train_off_policy_member(agent, env, memory, 200, exploration=EPS, seed=1)
    Mutations(0, 1, 0.5, 0, 0, 0, rand_seed=0).mutation(
        [agent]
    )  # architecture differs from a fresh build

    saved_state, saved_memory = agent.get_state(), memory.state_dict()
    restored = DQN.from_state(saved_state)
    memory2 = ReplayBuffer(1, seed=99)
    memory2.load_state_dict(saved_memory)

    train_off_policy_member(agent, env, memory, 200, exploration=EPS, seed=2)
    train_off_policy_member(restored, env, memory2, 200, exploration=EPS, seed=2)
    _assert_same(agent, restored)
    assert agent.steps == restored.steps


def test_checkpoint_load_acts_and_clone_is_independent(tmp_path, small_net):
    agent = _ppo_run(small_net, 0)
    agent.fitness.append(1.5)
    path = tmp_path / "elite.pt"
    agent.save_checkpoint(path)
    loaded = RLAlgorithm.load(path)
    assert isinstance(loaded, PPO) and loaded.fitness == [1.5]
    obs = np.array([[0.0], [1.0]], dtype=np.float32)
    assert np.array_equal(loaded.greedy_action(obs), agent.greedy_action(obs))
    assert loaded.get_action(obs)[0].shape == (2, 1)

    clone = agent.clone(index=3)
    assert clone.index == 3 and agent.index == 0
    with torch.no_grad():
        next(clone.actor_critic.parameters()).add_(1.0)
    assert not torch.equal(
        next(clone.actor_critic.parameters()), next(agent.actor_critic.parameters())
    )


def test_an_algorithms_load_refuses_another_algorithms_file(tmp_path, small_net):
    """``DQN.load`` gives a DQN or says why not; only the shared base class builds
    whichever algorithm a file holds."""
    from agilerl.checkpoint import CheckpointError

    path = tmp_path / "ppo-elite.pt"
    PPO(spaces.Box(-1.0, 1.0, (1,), np.float32), spaces.Discrete(2), net_config=small_net,
        seed=0).save_checkpoint(path)
    with pytest.raises(CheckpointError, match=r"ppo-elite\.pt holds a PPO agent, not a DQN"):
        DQN.load(path)
    assert isinstance(PPO.load(path), PPO) and isinstance(RLAlgorithm.load(path), PPO)


def test_hyperparameters_come_from_the_spec(small_net):
    from agilerl.models.algorithms import DQNSpec, PPOSpec

    env = make_probe_vector_env("ObsPolicyEnv", 2)
    dqn = DQN(env.single_observation_space, env.single_action_space, net_config=small_net)
    defaults = DQNSpec()
    assert (dqn.lr, dqn.batch_size, dqn.learn_step, dqn.gamma, dqn.tau, dqn.double) == (
        defaults.lr, defaults.batch_size, defaults.learn_step, defaults.gamma, defaults.tau, defaults.double,
    )  # fmt: skip
    with pytest.raises(ValueError, match="batch_size"):
        DQN(
            env.single_observation_space,
            env.single_action_space,
            net_config=small_net,
            batch_size=0,
        )
    spec = PPOSpec(lr=3e-3, learn_step=64)
    agent = build_algorithm(
        spec,
        env.single_observation_space,
        env.single_action_space,
        index=2,
        net_config=small_net,
        device="cpu",
        seed=0,
    )
    assert (
        isinstance(agent, PPO) and agent.index == 2 and agent.lr == 3e-3 and agent.learn_step == 64
    )
    assert agent.optimizers["optimizer"].param_groups[0]["lr"] == 3e-3


def test_network_random_seed_gives_identical_initial_weights(small_net):
    env = make_probe_vector_env("ObsPolicyEnv", 2)
    spaces_ = (env.single_observation_space, env.single_action_space)
    a = DQN(*spaces_, net_config=dict(small_net, random_seed=5), seed=1)
    b = DQN(*spaces_, net_config=dict(small_net, random_seed=5), seed=2)
    c = DQN(*spaces_, net_config=small_net, seed=2)
    _assert_same(a, b)
    assert not torch.equal(next(a.actor.parameters()), next(c.actor.parameters()))


def test_bad_hyperparameter_names_are_reported(small_net):
    env = make_probe_vector_env("ObsPolicyEnv", 2)
    spaces_ = (env.single_observation_space, env.single_action_space)
    with pytest.raises(TypeError, match="'lrr'"):
        DQN(*spaces_, net_config=small_net, lrr=0.1)
    with pytest.raises(ValueError, match="'ent_coef'.*mutable hyperparameters: batch_size, lr"):
        DQN(*spaces_, net_config=small_net, hp_config={"ent_coef": {"min": 0, "max": 1}})
    agent = PPO(*spaces_, net_config=small_net, hp_config={"ent_coef": {"min": 0, "max": 1}})
    assert agent.hp_config["ent_coef"]["grow_factor"] > 1  # filled from the RLHyperparameter spec


def _tensor_pointers(agent: RLAlgorithm) -> set[int]:
    pointers = {p.data_ptr() for net in agent.networks.values() for p in net.parameters()}
    for optimizer in agent.optimizers.values():
        for state in optimizer.state.values():
            pointers |= {t.data_ptr() for t in state.values()}
    return pointers


def _state_pointers(obj) -> set[int]:  # type: ignore[no-untyped-def]
    if isinstance(obj, torch.Tensor):
        return {obj.data_ptr()}
    if isinstance(obj, dict):
        return set().union(*(_state_pointers(v) for v in obj.values())) if obj else set()
    if isinstance(obj, (list, tuple)):
        return set().union(*(_state_pointers(v) for v in obj)) if obj else set()
    return set()


def test_set_state_copies_so_two_agents_loaded_from_one_state_stay_independent(small_net):
    """Loading never aliases the caller's state: one state may fill several slots."""
    env = make_probe_vector_env("ObsPolicyEnv", 4)
    source = DQN(
        env.single_observation_space, env.single_action_space, net_config=small_net, seed=0,
        batch_size=16, learn_step=4,
    )  # fmt: skip
    train_off_policy_member(source, env, ReplayBuffer(500, seed=0), 200, exploration=EPS, seed=1)
    state = source.get_state()
    frozen = {k: v.clone() for k, v in state["optimizers"]["optimizer"]["state"][0].items()}

    first = DQN.from_state(state)
    second = DQN.from_state(state)
    assert not _tensor_pointers(first) & _state_pointers(state)
    assert not _tensor_pointers(first) & _tensor_pointers(second)

    # training one of them changes neither the other nor the state both came from
    before = {
        k: v.clone() for k, v in second.optimizers["optimizer"].state_dict()["state"][0].items()
    }
    train_off_policy_member(first, env, ReplayBuffer(500, seed=3), 200, exploration=EPS, seed=2)
    after = second.optimizers["optimizer"].state_dict()["state"][0]
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(
        torch.equal(frozen[k], state["optimizers"]["optimizer"]["state"][0][k]) for k in frozen
    )
    _assert_same(second, DQN.from_state(state))
