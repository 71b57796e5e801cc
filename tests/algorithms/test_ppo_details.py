"""PPO specifics: target_kl early stop, update counts, squashed continuous actions, the
annealed learning rate."""

from __future__ import annotations

import numpy as np
import pytest

from agilerl.algorithms import PPO
from agilerl.envs.probe import make_probe_vector_env
from agilerl.networks.flat_params import FlatTraining
from agilerl.training.experience import train_on_policy_member


def _ppo(small_net: dict, env_name: str = "ObsPolicyEnv", **hp) -> tuple[PPO, object]:
    env = make_probe_vector_env(env_name, 4)
    params = dict(lr=1e-2, batch_size=16, learn_step=64, num_envs=4, update_epochs=4)
    params.update(hp)
    agent = PPO(
        env.single_observation_space,
        env.single_action_space,
        net_config=small_net,
        seed=0,
        **params,
    )
    return agent, env


def test_update_count_and_target_kl_early_stop(small_net, monkeypatch):
    counts = {}
    calls: list[int] = []
    original = FlatTraining.adam_step  # (an MLP network steps its flat buffers)

    def counting_step(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FlatTraining, "adam_step", counting_step)
    for target_kl in (None, 0.0):
        agent, env = _ppo(small_net, target_kl=target_kl)
        calls.clear()
        train_on_policy_member(agent, env, 64, seed=0)
        counts[target_kl] = len(calls)
    # 64 steps with one-step episodes under next-step autoreset: 32 valid samples,
    # 2 minibatches of 16 x 4 epochs. With target_kl = 0 the first minibatch (policy still
    # equal to the rollout policy, KL exactly 0) passes and the second one stops the update.
    assert counts[None] == 8
    assert counts[0.0] == 2


def _update_lrs(agent: PPO) -> list[float]:
    """The optimizer's learning rate at each ``learn`` call from now on."""
    seen: list[float] = []
    original = agent.learn

    def recording_learn(rollout, _orig=original):
        seen.append(agent.optimizers["optimizer"].param_groups[0]["lr"])
        return _orig(rollout)

    agent.learn = recording_learn  # type: ignore[method-assign]
    return seen


def test_anneal_lr_decays_linearly_over_the_budget_and_leaves_lr_alone(small_net):
    agent, env = _ppo(small_net, lr=1e-3, anneal_lr=True)
    seen = _update_lrs(agent)
    # 4 rollouts of 64 steps in each of two calls, budget 512 steps per member: the k-th
    # update follows k * 64 steps, so its learning rate is 1e-3 * (1 - k / 8)
    train_on_policy_member(agent, env, 256, seed=0, max_steps=512)
    train_on_policy_member(agent, env, 256, seed=1, max_steps=512)
    assert seen == pytest.approx([1e-3 * (1 - k / 8) for k in range(8)])
    assert agent.lr == 1e-3  # what mutation reads and changes
    # a mutated lr is the value the schedule scales from then on
    agent.set_hyperparameter("lr", 2e-3)
    train_on_policy_member(agent, env, 64, seed=2, max_steps=1024)
    assert seen[-1] == pytest.approx(2e-3 * (1 - 512 / 1024))


def test_an_architecture_mutation_keeps_the_annealed_learning_rate(small_net):
    agent, _ = _ppo(small_net, lr=1e-3, anneal_lr=True)
    agent.set_progress(0.75)
    plan = agent.actor_critic.draw_plan("add_nodes", np.random.default_rng(0), ["ReLU"])
    agent.apply_architecture_mutation("actor_critic", plan)
    assert agent.optimizers["optimizer"].param_groups[0]["lr"] == pytest.approx(2.5e-4)
    assert agent.lr == 1e-3
    # the restart after a change that does not keep the function: fresh moments, same rate
    old = agent.optimizers["optimizer"]
    agent.set_progress(0.5)
    agent.restart_targets_and_optimizers()
    assert agent.optimizers["optimizer"] is not old
    assert agent.optimizers["optimizer"].param_groups[0]["lr"] == pytest.approx(5e-4)


def test_without_anneal_lr_the_learning_rate_stays_constant(small_net):
    agent, env = _ppo(small_net, lr=1e-3)
    seen = _update_lrs(agent)
    train_on_policy_member(agent, env, 256, seed=0, max_steps=512)
    assert seen == [1e-3] * 4


def test_squashed_actions_stay_in_bounds(small_net):
    agent, _ = _ppo(dict(small_net, squash_output=True), "ObsPolicyContEnv", action_std_init=5.0)
    assert agent.actor_critic.arch["extra"]["squash_output"] is True
    env_action, raw, log_prob, value = agent.get_action(np.zeros((64, 1), dtype=np.float32))
    assert env_action.min() >= 0.0 and env_action.max() <= 1.0
    assert np.abs(raw).max() > 1.0  # raw Gaussian samples are what the learner stores


@pytest.mark.slow
def test_ppo_solves_cartpole():
    import gymnasium as gym

    env = gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="vector_entry_point")
    net = {
        "latent_dim": 64,
        "encoder_config": {"arch": "mlp", "hidden_size": [64]},
        "head_config": {"hidden_size": [64]},
    }
    agent = PPO(
        env.single_observation_space,
        env.single_action_space,
        net_config=net,
        seed=0,
        lr=1e-3,
        learn_step=2048,
        num_envs=8,
    )
    best = 0.0
    for generation in range(20):
        train_on_policy_member(agent, env, 10_240, seed=generation)
        best = max(best, agent.test(env, seed=generation))
        if best >= 475:
            break
    assert best >= 475
