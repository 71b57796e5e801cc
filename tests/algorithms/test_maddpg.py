"""MADDPG and MATD3: they learn the multi-agent probe env in seconds (discrete and continuous
agents, agents that leave early, action masks), mutate every agent consistently, delay
actor updates (MATD3), keep departed agents out of their own losses, and round-trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agilerl.algorithms import MADDPG, MATD3
from agilerl.algorithms.core.multi_agent import MultiAgentStepper, agent_spaces
from agilerl.components.multi_agent_replay_buffer import MultiAgentReplayBuffer
from agilerl.envs import multi_agent_probe
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv
from agilerl.hpo.mutation import Mutations
from agilerl.training.multi_agent_off_policy import train_multi_agent_off_policy_member

NET = {
    "latent_dim": 16,
    "encoder_config": {"arch": "mlp", "hidden_size": [32]},
    "head_config": {"hidden_size": [32]},
}
FAST = {"batch_size": 64, "learn_step": 8, "lr_actor": 1e-3, "lr_critic": 1e-3, "gamma": 0.9,
        "tau": 0.05, "O_U_noise": False, "expl_noise": 0.3}


def _env(num_envs: int = 8, **config) -> PettingZooVectorEnv:
    return PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(**config)] * num_envs)


def _agent(cls, env, **kwargs):
    obs, act = agent_spaces(env)
    return cls(obs, act, seed=0, net_config=NET, **{**FAST, **kwargs})


def _random_return(env, episodes_seed: int = 1) -> float:
    """Mean summed-over-agents return of a uniform random policy (4 rounds)."""
    stepper = MultiAgentStepper(env)
    rng = np.random.default_rng(episodes_seed)
    totals = []
    for round_index in range(4):
        stepper.reset(seed=episodes_seed + round_index)
        total = np.zeros(env.num_envs)
        running = np.ones(env.num_envs, dtype=bool)
        while running.any():
            actions = {}
            for agent in env.agents:
                space = env.single_action_space(agent)
                if hasattr(space, "n"):
                    actions[agent] = rng.integers(space.n, size=env.num_envs)
                else:
                    actions[agent] = rng.uniform(space.low, space.high,
                                                 size=(env.num_envs, *space.shape))
            _, rewards, _, _, acted, ended, _ = stepper.step(actions)
            for agent in env.agents:
                total += np.where(acted[agent] & running, rewards[agent], 0.0)
            running &= ~ended
        totals.extend(total.tolist())
    return float(np.mean(totals))


@pytest.mark.parametrize(
    ("cls", "config", "perfect"),
    [
        (MADDPG, {}, 12.0),
        (MATD3, {}, 12.0),
        (MADDPG, {"early_exit": True}, 10.0),  # seeker_1 leaves after 2 of 4 steps
        (MATD3, {"action_masks": True}, 12.0),
    ],
    ids=["maddpg", "matd3", "maddpg-early-exit", "matd3-action-masks"],
)
def test_probe_env_is_learned_in_seconds(cls, config, perfect) -> None:
    """4-step episodes, two discrete seekers and a continuous pointer. The random policy
    earns about half of the best return (measured here); after 2,400 env steps the greedy
    policy must be within 10% of the best, far beyond what chance gives."""
    env = _env(**config)
    random_return = _random_return(env)
    assert random_return < 0.65 * perfect
    agent = _agent(cls, env)
    memory = MultiAgentReplayBuffer(10_000, seed=0)
    for call in range(6):
        train_multi_agent_off_policy_member(agent, env, memory, 400, seed=call)
    fitness = agent.test(env, loop=2, seed=100)
    assert fitness >= 0.9 * perfect, (fitness, random_return)


def test_action_masks_are_honoured_when_acting() -> None:
    env = _env(num_envs=16, action_masks=True)
    agent = _agent(MADDPG, env)
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        for training in (True, False):
            actions = agent.get_action(obs, training=training)
            for seeker in ("seeker_0", "seeker_1"):
                mask = obs[seeker]["action_mask"].astype(bool)
                live = mask.any(axis=1)  # a finished episode's agents observe zero masks
                assert mask[np.arange(16), actions[seeker]][live].all()
        obs, *_ = env.step(agent.get_action(obs))


def _batch(agent, env, steps: int = 64) -> dict:
    memory = MultiAgentReplayBuffer(1_000, seed=0)
    agent.learn_step = 10**6  # fill only
    train_multi_agent_off_policy_member(agent, env, memory, steps, seed=0)
    agent.learn_step = FAST["learn_step"]
    return memory.sample(32, np.random.default_rng(0))


def _weights(network) -> list[torch.Tensor]:
    return [p.detach().clone() for p in network.parameters()]


def _changed(before, network) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, network.parameters(), strict=True))


def test_discrete_agents_store_relaxed_actions_and_act_by_sampling() -> None:
    env = _env()
    agent = _agent(MADDPG, env)
    batch = _batch(agent, env)
    # Seekers (Discrete(2)) store the noisy relaxed vector they acted on; the pointer
    # (Box(1)) its env action.
    stored = np.asarray(batch["action"]["seeker_0"])
    assert stored.shape == (32, 2) and stored.dtype == np.float32
    assert np.all((stored >= 0.0) & (stored <= 1.0))
    assert np.any((stored > 0.0) & (stored < 1.0))  # soft vectors, not one-hot rows
    assert np.asarray(batch["action"]["pointer_0"]).shape == (32, 1)
    # Target actions of discrete agents are relaxed samples, not one-hot argmaxes.
    obs = agent._batch(batch)["next_obs"]["seeker_0"]
    target = agent._target_action("seeker_0", obs)
    assert torch.all((target > 0.0) & (target < 1.0))
    # Acting without exploration samples softmax(logits): one observation, many draws.
    first, _ = env.reset(seed=0)
    draws = {int(agent.get_action(first)["seeker_0"][0]) for _ in range(40)}
    assert len(draws) > 1
    twin = _agent(MADDPG, env)
    np.testing.assert_array_equal(twin.get_action(first)["seeker_0"],
                                  _agent(MADDPG, env).get_action(first)["seeker_0"])


def test_departed_agents_rows_do_not_train_their_own_critic() -> None:
    env = _env()
    agent = _agent(MADDPG, env)
    batch = _batch(agent, env)
    batch["active"]["seeker_1"][:] = False
    critics = {a: _weights(agent.unit_network("critic", a)) for a in agent.agent_ids}
    agent.learn(batch)
    assert not _changed(critics["seeker_1"], agent.unit_network("critic", "seeker_1"))
    assert _changed(critics["seeker_0"], agent.unit_network("critic", "seeker_0"))


@pytest.mark.parametrize(("cls", "settings", "penalty"), [
    (MADDPG, {}, 1e-3),  # the schema's default: MADDPG's original code's
    (MATD3, {}, 1e-3),
    (MADDPG, {"logit_penalty": 0.0}, 0.0),  # the reference's: the critic's value alone
    (MATD3, {"logit_penalty": 0.5}, 0.5),
])
def test_an_actors_loss_is_minus_its_critics_value_plus_the_logit_penalty(
        cls, settings, penalty) -> None:
    env = _env()
    agent = _agent(cls, env, **settings)
    assert agent.logit_penalty == penalty
    batch = agent._batch(_batch(agent, env))
    rng_state = agent.torch_rng.get_state()
    expected = []
    with torch.no_grad():
        for name in agent.agent_ids:
            output = agent.unit_network("actor", name)(batch["obs"][name])
            joint = dict(batch["action"])
            joint[name] = agent.actions[name].policy_action(output, agent.torch_rng)
            critic = agent.unit_network(agent.critic_roles[0], name)  # MATD3: the first
            value = critic(batch["obs"], joint).reshape(-1)
            live = batch["active"][name].reshape(-1)  # 1 where the agent was live
            loss = -(value * live).sum() / live.sum()
            if agent.actions[name].discrete:  # the seekers; the pointer is continuous
                loss = loss + penalty * (output.pow(2).mean(-1) * live).sum() / live.sum()
            expected.append(loss)
    agent.torch_rng.set_state(rng_state)
    loss = agent._actor_step(batch)
    assert loss == pytest.approx(float(torch.stack(expected).mean()), rel=1e-6, abs=1e-7)


def test_matd3_delays_actor_and_target_updates() -> None:
    env = _env()
    agent = _agent(MATD3, env, policy_freq=2)
    batch = _batch(agent, env)
    actor = _weights(agent.unit_network("actor", "pointer_0"))
    target = _weights(agent.unit_network("critic_1_target", "pointer_0"))
    first = agent.learn(batch)
    assert "actor_loss" not in first
    assert not _changed(actor, agent.unit_network("actor", "pointer_0"))
    assert not _changed(target, agent.unit_network("critic_1_target", "pointer_0"))
    second = agent.learn(batch)
    assert "actor_loss" in second
    assert _changed(actor, agent.unit_network("actor", "pointer_0"))
    assert _changed(target, agent.unit_network("critic_1_target", "pointer_0"))


def test_architecture_mutation_applies_to_every_agent_and_mirror() -> None:
    env = _env()
    agent = _agent(MATD3, env)
    mutations = Mutations(0, 1, 0.5, 0, 0, 0, rand_seed=0)
    batch = _batch(agent, env)
    seen = set()
    for _ in range(12):
        seen.add(mutations.mutate(agent, "arch"))
        for role in ("actor", "critic_1"):
            shapes = {
                a: {name: (m["hidden_size"], m.get("in_dim")) for name, m in
                    agent.unit_network(role, a).architecture()["encoders"].items()}
                for a in agent.agent_ids
            }
            hidden = {a: agent.unit_network(role, a).architecture()["heads"] for a in shapes}
            # Every agent's network of a role changed the same way (actors' output widths
            # and encoder inputs differ with their spaces; nothing else does).
            first = agent.agent_ids[0]
            for a in agent.agent_ids[1:]:
                assert [h["hidden_size"] for h in hidden[a].values()] == \
                       [h["hidden_size"] for h in hidden[first].values()]
                if role == "critic_1":
                    assert shapes[a] == shapes[first]
            for a in agent.agent_ids:
                arch = agent.unit_network(role, a).architecture()
                assert agent.unit_network(f"{role}_target", a).architecture() == arch
                if role == "critic_1":
                    assert agent.unit_network("critic_2", a).architecture() == arch
                    assert agent.unit_network("critic_2_target", a).architecture() == arch
        agent.learn(batch)  # the optimizers follow the new networks
    assert seen & {"add_layer", "remove_layer"} and seen & {"add_nodes", "remove_nodes"}


def test_learning_rate_mutation_reaches_every_agents_optimizer() -> None:
    env = _env()
    agent = _agent(MADDPG, env)
    agent.set_hyperparameter("lr_critic", 0.005)
    agent.set_hyperparameter("lr_actor", 0.0005)
    assert agent.optimizers["critic_optimizer"].param_groups[0]["lr"] == 0.005
    assert agent.optimizers["actor_optimizer"].param_groups[0]["lr"] == 0.0005
    critic_params = {id(p) for p in agent.optimizers["critic_optimizer"].param_groups[0]["params"]}
    for a in agent.agent_ids:
        assert all(id(p) in critic_params for p in agent.unit_network("critic", a).parameters())


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
def test_state_round_trip_continues_identically(cls, tmp_path) -> None:
    env = _env()
    agent = _agent(cls, env, O_U_noise=True)
    memory = MultiAgentReplayBuffer(1_000, seed=0)
    train_multi_agent_off_policy_member(agent, env, memory, 160, seed=0)
    assert agent.noise["pointer_0"].state is not None
    agent.save_checkpoint(tmp_path / "agent.pt")
    loaded = cls.load(tmp_path / "agent.pt")
    clone = agent.clone()
    obs, _ = env.reset(seed=3)
    expected = agent.get_action(obs, training=True)  # exploring: the noise state counts
    for other in (loaded, clone):
        actions = other.get_action(obs, training=True)
        for name, batch in expected.items():
            np.testing.assert_array_equal(actions[name], batch)
    assert loaded.learn_counter == agent.learn_counter
