"""DDPG and TD3: bounded action scaling, action noise, probe learning, learning rates per
optimizer, shared encoders, mutation of the new networks, state round trips."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import DDPG, TD3
from agilerl.algorithms.core.action_noise import ActionNoise, NoiseSettings
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.core.spaces import IncompatibleSpaceError
from agilerl.envs.probe import make_probe_vector_env
from agilerl.hpo.mutation import Mutations
from agilerl.training.experience import train_off_policy_member

OBS_SPACE = spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
PENDULUM_ACTIONS = spaces.Box(-2.0, 2.0, (1,), dtype=np.float32)
ALGOS = [DDPG, TD3]


def _agent(cls, net, action_space=PENDULUM_ACTIONS, **hp):
    return cls(OBS_SPACE, action_space, net_config=net, seed=0, **hp)


# ---------------------------------------------------------------------- action scaling
@pytest.mark.parametrize("cls", ALGOS)
@pytest.mark.parametrize(("low", "high"), [(-2.0, 2.0), (-1.0, 1.0), (0.0, 1.0)])
def test_actions_cover_the_bounds_exactly(cls, low, high, small_net):
    agent = _agent(cls, small_net, spaces.Box(low, high, (2,), dtype=np.float32))
    normalised = np.array([[-1.0, 1.0], [0.0, 0.5]])
    env = agent.to_env_action(normalised)
    np.testing.assert_allclose(env, [[low, high], [(low + high) / 2, low + 0.75 * (high - low)]])
    assert env.dtype == np.float32
    back = agent.to_normalised(torch.as_tensor(env))
    np.testing.assert_allclose(back.numpy(), normalised, atol=1e-6)


@pytest.mark.parametrize("cls", ALGOS)
def test_explored_actions_stay_in_bounds(cls, small_net):
    agent = _agent(cls, small_net, O_U_noise=False, expl_noise=5.0)
    obs = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    action = agent.explore_action(obs, 0)
    assert action.shape == (64, 1)
    assert PENDULUM_ACTIONS.contains(action[0]) and np.all(np.abs(action) <= 2.0)
    assert np.any(np.abs(action) == 2.0)  # large noise is clipped to the bounds


@pytest.mark.parametrize(
    "space",
    [spaces.Discrete(3), spaces.Box(-np.inf, np.inf, (2,), dtype=np.float32)],
    ids=["discrete", "unbounded"],
)
def test_unusable_action_spaces_are_refused(space, small_net):
    with pytest.raises(IncompatibleSpaceError):
        _agent(DDPG, small_net, space)


def test_unbounding_head_activation_is_refused(small_net):
    small_net["head_config"]["output_activation"] = "ReLU"
    with pytest.raises(ValueError, match="output_activation"):
        _agent(DDPG, small_net)


# ---------------------------------------------------------------------- noise
def test_ou_noise_is_correlated_and_resets_per_sub_env():
    settings = NoiseSettings(True, scale=0.3, mean=0.0, theta=0.15, dt=0.01)
    noise = ActionNoise(2)
    rng = np.random.default_rng(0)
    first = noise.sample(3, rng, settings)
    second = noise.sample(3, rng, settings)
    # OU: the next value starts from the previous one (a random walk with small steps)
    assert np.all(np.abs(second - first) < np.abs(first) + 0.3 * 0.1 * 5)
    noise.reset(np.array([True, False, False]))
    assert np.all(noise.state[0] == 0.0) and np.all(noise.state[1:] == second[1:])


def test_gaussian_noise_has_the_configured_mean_and_scale():
    settings = NoiseSettings(False, scale=0.5, mean=0.2, theta=0.15, dt=0.01)
    draws = ActionNoise(1).sample(20000, np.random.default_rng(0), settings)
    assert draws.mean() == pytest.approx(0.2, abs=0.02)
    assert draws.std() == pytest.approx(0.5, abs=0.02)


def test_episode_end_resets_the_agents_noise(small_net):
    agent = _agent(DDPG, small_net, expl_noise=1.0)
    obs = np.zeros((3, 3), dtype=np.float32)
    agent.explore_action(obs, 0)
    assert np.all(agent.noise.state != 0.0)
    agent.on_episode_end(np.array([False, True, False]))
    assert np.all(agent.noise.state[1] == 0.0) and np.all(agent.noise.state[[0, 2]] != 0.0)


# ---------------------------------------------------------------------- probe learning
def _train_probe(cls, env_name, net, steps, **hp):
    env = make_probe_vector_env(env_name, 4)
    params = dict(lr_actor=3e-3, lr_critic=1e-2, batch_size=32, learn_step=1, tau=0.1,
                  gamma=0.9, policy_freq=2, O_U_noise=False, expl_noise=0.5)
    params.update(hp)
    agent = cls(env.single_observation_space, env.single_action_space, net_config=net,
                seed=0, **params)
    train_off_policy_member(agent, env, ReplayBuffer(2000, seed=0), steps, seed=1)
    return agent


@pytest.mark.parametrize("cls", ALGOS)
def test_critic_learns_constant_value(cls, small_net):
    agent = _train_probe(cls, "ConstantRewardContEnv", small_net, 600)
    critic = agent.networks[agent.critic_names[0]]
    with torch.no_grad():
        q = critic(torch.zeros(8, 1), torch.linspace(-1, 1, 8).reshape(8, 1))
    np.testing.assert_allclose(q.numpy(), 1.0, atol=0.15)


@pytest.mark.parametrize("cls", ALGOS)
def test_policy_learns_interior_optimum_within_scaled_bounds(cls, small_net):
    agent = _train_probe(cls, "BoundedObsPolicyContEnv", small_net, 2400)
    action = agent.greedy_action(np.array([[0.0], [1.0]], dtype=np.float32))
    np.testing.assert_allclose(action.reshape(-1), [-1.0, 1.0], atol=0.2)


# ---------------------------------------------------------------------- learning rates
@pytest.mark.parametrize("cls", ALGOS)
def test_each_learning_rate_drives_its_own_optimizer(cls, small_net):
    agent = _agent(cls, small_net, lr_actor=1e-4, lr_critic=1e-3)
    lrs = {n: {g["lr"] for g in o.param_groups} for n, o in agent.optimizers.items()}
    assert lrs == {"actor_optimizer": {1e-4}, "critic_optimizer": {1e-3}}
    agent.set_hyperparameter("lr_actor", 0.005)
    agent.set_hyperparameter("lr_critic", 0.0002)
    assert {g["lr"] for g in agent.optimizers["actor_optimizer"].param_groups} == {0.005}
    assert {g["lr"] for g in agent.optimizers["critic_optimizer"].param_groups} == {0.0002}
    # an architecture mutation rebuilds optimizers with their own rates still
    plan = agent.networks["actor"].draw_plan("add_nodes", np.random.default_rng(0), ["ReLU"])
    agent.apply_architecture_mutation("actor", plan)
    clone = agent.clone()
    for a in (agent, clone):
        assert {g["lr"] for g in a.optimizers["actor_optimizer"].param_groups} == {0.005}
        assert {g["lr"] for g in a.optimizers["critic_optimizer"].param_groups} == {0.0002}


def test_rl_hp_mutation_of_lr_actor_reaches_only_the_actor_optimizer(small_net):
    agent = _agent(TD3, small_net, lr_actor=1e-3, lr_critic=1e-3,
                   hp_config={"lr_actor": {"min": 1e-5, "max": 1e-1}})
    mutations = Mutations(no_mutation=0, architecture=0, new_layer_prob=0, parameters=0,
                          activation=0, rl_hp=1, rand_seed=0)
    mutations.mutation([agent])
    assert agent.mut == "lr_actor" and agent.lr_actor != 1e-3
    assert {g["lr"] for g in agent.optimizers["actor_optimizer"].param_groups} == {agent.lr_actor}
    assert {g["lr"] for g in agent.optimizers["critic_optimizer"].param_groups} == {1e-3}


# ---------------------------------------------------------------------- networks & mutation
def _batch(agent, n=16, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "action": rng.uniform(-2, 2, (n, 1)).astype(np.float32),
        "reward": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "done": np.zeros(n, dtype=bool),
    }


def _encoders_equal(a, b) -> bool:
    sa, sb = a.encoders.state_dict(), b.encoders.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


OPS = ["add_layer", "remove_layer", "add_nodes", "remove_nodes", "activation"]


@pytest.mark.parametrize("cls", ALGOS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("network", ["actor", "critic"])
def test_architecture_mutation_keeps_mirrors_identical_and_agent_working(cls, op, network,
                                                                         small_net):
    small_net["head_config"]["hidden_size"] = [32, 32]
    agent = _agent(cls, small_net)
    name = network if network == "actor" else agent.critic_names[0]
    assert name in agent.mutable_networks()
    plan = agent.networks[name].draw_plan(op, np.random.default_rng(1), ["ReLU", "Tanh"])
    assert plan is not None
    before = agent.networks[name].architecture()
    agent.apply_architecture_mutation(name, plan)
    assert agent.networks[name].architecture() != before
    mirrors = [m for m, src in agent.mirrored_networks.items() if src == name]
    for mirror in mirrors:
        assert agent.networks[mirror].architecture() == agent.networks[name].architecture()
    agent.learn(_batch(agent))
    agent.learn(_batch(agent, seed=1))
    restored = type(agent).from_state(agent.get_state())
    obs = _batch(agent)["obs"]
    np.testing.assert_array_equal(restored.greedy_action(obs), agent.greedy_action(obs))


@pytest.mark.parametrize("cls", ALGOS)
def test_latent_growth_of_the_critic_preserves_its_values(cls, small_net):
    agent = _agent(cls, small_net)
    name = agent.critic_names[0]
    critic = agent.networks[name]
    obs, action = torch.rand(8, 3), torch.rand(8, 1) * 2 - 1
    with torch.no_grad():
        before = critic(obs, action)
    plan = {"target": "latent:encoder", "op": "add_nodes", "nodes": 16, "seed": 5}
    agent.apply_architecture_mutation(name, plan)
    grown = agent.networks[name]
    assert grown.encoder("encoder").arch["out_dim"] == 32
    assert grown.head("q").arch["in_dim"] == 32 + 1
    with torch.no_grad():
        torch.testing.assert_close(grown(obs, action), before)


def test_share_encoders_keeps_one_encoder_through_learning_and_mutation(small_net):
    agent = _agent(TD3, small_net, share_encoders=True, policy_freq=1)
    actor, critic_1, critic_2 = (agent.networks[n] for n in ("actor", "critic_1", "critic_2"))
    assert _encoders_equal(actor, critic_1) and _encoders_equal(critic_2, critic_1)
    actor_head = [p.clone() for p in actor.heads.parameters()]
    agent.learn(_batch(agent))
    assert _encoders_equal(agent.networks["actor"], agent.networks["critic_1"])
    assert _encoders_equal(agent.networks["critic_2"], agent.networks["critic_1"])
    # the actor's own step trains its head (its encoder follows the critic's)
    assert any(not torch.equal(a, b) for a, b in zip(actor_head, actor.heads.parameters(), strict=True))
    plan = agent.networks["actor"].draw_plan("add_layer", np.random.default_rng(0), ["ReLU"])
    plan = {**plan, "target": "encoder:encoder"}
    agent.apply_architecture_mutation("actor", plan)
    for name in ("actor", "critic_1", "critic_2", "actor_target", "critic_1_target"):
        assert len(agent.networks[name].encoder("encoder").arch["hidden_size"]) == 2, name
    assert _encoders_equal(agent.networks["actor"], agent.networks["critic_1"])
    agent.learn(_batch(agent, seed=2))
    assert _encoders_equal(agent.networks["actor"], agent.networks["critic_1"])


def test_td3_actor_updates_are_delayed(small_net):
    agent = _agent(TD3, small_net, policy_freq=3)
    metrics = [agent.learn(_batch(agent, seed=i)) for i in range(6)]
    assert ["actor_loss" in m for m in metrics] == [False, False, True, False, False, True]
    assert all("loss" in m for m in metrics)
