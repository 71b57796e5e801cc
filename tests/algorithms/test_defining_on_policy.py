"""The defining features of the on-policy algorithms and the neural bandits, each checked
against its textbook definition: GAE as the paper's discounted sum of TD errors, cut at
episode ends (PPO, and per agent in IPPO, from each agent's own rewards and bootstrap
value); recurrent PPO's BPTT replay from zeroed states at episode starts (its first
minibatch sees exactly the rollout policy); NeuralUCB's bonus ``gamma * sqrt(g^T Z^-1 g)``;
NeuralTS's posterior sample ``N(f, (gamma * sqrt(g^T Z^-1 g))^2)``."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.algorithms import IPPO, PPO, NeuralTS, NeuralUCB
from agilerl.algorithms.core.multi_agent import agent_spaces
from agilerl.components.rollout_buffer import RolloutBuffer
from agilerl.envs import multi_agent_probe
from agilerl.envs.memory import make_memory_vector_env
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv
from agilerl.training.experience import train_on_policy_member
from agilerl.training.multi_agent_on_policy import train_multi_agent_on_policy_member

TINY_NET = {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
            "head_config": {"hidden_size": [16]}}


# ---------------------------------------------------------------------- GAE
def textbook_gae(rewards: np.ndarray, values: np.ndarray, ended: np.ndarray,
                 valid: np.ndarray, last_value: np.ndarray, gamma: float,
                 lam: float) -> np.ndarray:
    """Schulman et al. (2016), eq. 16, per sub-env: ``A_t = sum_l (gamma lam)^l delta_{t+l}``
    with ``delta_k = r_k + gamma V_{k+1} - V_k``; the sum stops after the step that ends
    the episode, whose ``delta`` has no ``gamma V_{k+1}``. Invalid steps get 0."""
    steps, envs = rewards.shape
    out = np.zeros((steps, envs))
    for e in range(envs):
        for t in range(steps):
            if not valid[t, e]:
                continue
            total = 0.0
            for k in range(t, steps):
                ends = bool(ended[k, e])
                next_value = 0.0 if ends else (values[k + 1, e] if k + 1 < steps
                                               else last_value[e])
                delta = rewards[k, e] + gamma * next_value - values[k, e]
                total += (gamma * lam) ** (k - t) * delta
                if ends:
                    break
            out[t, e] = total
    return out


def test_gae_is_the_discounted_sum_of_td_errors_within_each_episode() -> None:
    """GAE with lambda, cut at episode ends both in the TD error and in the recursion
    (an episode's advantages never include the next episode's TD errors)."""
    rng = np.random.default_rng(0)
    steps, envs, gamma, lam = 8, 3, 0.9, 0.7
    ended = rng.random((steps, envs)) < 0.3
    # a NEXT_STEP autoreset step (not a transition) may follow an episode end
    valid = np.ones((steps, envs), dtype=bool)
    valid[1:] = ~(ended[:-1] & (rng.random((steps - 1, envs)) < 0.5))
    ended &= valid
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    last = rng.normal(size=envs).astype(np.float32)
    # an episode ends while the next step is a real transition (no autoreset step between)
    assert (ended[:-1] & valid[1:]).any() and (~valid).any()
    buffer = RolloutBuffer(steps, envs, 1, (), np.int64)
    for t in range(steps):
        buffer.add(np.zeros((envs, 1)), np.zeros(envs), 0.0, values[t], rewards[t], ended[t],
                   valid[t])
    buffer.compute_gae(last, gamma, lam)
    expected = textbook_gae(rewards, values, ended, valid, last, gamma, lam)
    np.testing.assert_allclose(buffer.advantages, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(buffer.returns[valid], (expected + values)[valid], rtol=1e-5,
                               atol=1e-6)


# ---------------------------------------------------------------------- IPPO
def test_ippo_computes_each_agents_gae_from_its_own_rewards_and_values() -> None:
    """IPPO's rollouts: every agent's buffer holds its own rewards (a seeker is paid for
    hitting its own target) and its advantages are GAE over its own rewards, values and
    episode ends, bootstrapped from its own value of the last observation."""
    env = PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(early_exit=True)] * 2)
    obs_spaces, action_spaces = agent_spaces(env)
    agent = IPPO(obs_spaces, action_spaces, net_config=TINY_NET, seed=0, learn_step=24,
                 batch_size=32, gamma=0.9, gae_lambda=0.8)
    last_values: list[dict[str, np.ndarray]] = []
    seen: dict[str, dict[str, np.ndarray]] = {}
    get_value = agent.get_value

    def recording_get_value(obs: Any) -> dict[str, np.ndarray]:
        values = get_value(obs)
        last_values.append({a: np.array(v) for a, v in values.items()})
        return values

    def capture(rollouts: Any, masks: Any = None) -> dict[str, float]:
        for a, buffer in rollouts.items():
            seen[a] = {k: getattr(buffer, k)[: buffer.pos].copy() for k in (
                "obs", "actions", "rewards", "values", "ended", "valid", "advantages")}
        return {}

    agent.get_value = recording_get_value  # type: ignore[method-assign]
    agent.learn = capture  # type: ignore[method-assign]
    train_multi_agent_on_policy_member(agent, env, 24, seed=0)
    last = last_values[-1]  # the bootstrap of the rollout's end
    assert set(seen) == {"seeker_0", "seeker_1", "pointer_0"}
    assert len({float(v[0]) for v in last.values()}) == 3  # the agents' values differ
    for a, data in seen.items():
        expected = textbook_gae(data["rewards"], data["values"], data["ended"], data["valid"],
                                last[a], agent.gamma, agent.gae_lambda)
        np.testing.assert_allclose(data["advantages"], expected, rtol=1e-5, atol=1e-5,
                                   err_msg=a)
    for a in ("seeker_0", "seeker_1"):  # the reward of its own action (no bootstrap added)
        data = seen[a]
        plain = data["valid"] & (data["ended"] == 0)
        own = (data["actions"] == data["obs"].argmax(-1)).astype(np.float32)
        np.testing.assert_array_equal(data["rewards"][plain], own[plain], err_msg=a)
    assert not (seen["seeker_0"]["actions"] == seen["seeker_1"]["actions"]).all()


# ---------------------------------------------------------------------- recurrent PPO
def test_recurrent_ppo_learns_from_the_states_the_rollout_acted_from() -> None:
    """The BPTT replay restarts from a zero state where an episode starts inside a
    sequence, as acting did, so the update's first minibatch evaluates exactly the rollout
    policy and values (one epoch, one minibatch): approximate KL 0, nothing clipped, and
    the value loss half the mean squared advantage (``R - V`` with the stored ``V``)."""
    env = make_memory_vector_env(4, delay=3)  # episodes of 4 steps and an autoreset step
    agent = PPO(env.single_observation_space, env.single_action_space, seed=0,
                net_config={"latent_dim": 16,
                            "encoder_config": {"arch": "lstm", "hidden_state_size": 16},
                            "head_config": {"hidden_size": [16]}},
                recurrent=True, max_seq_len=7, num_envs=4, learn_step=96, batch_size=64,
                update_epochs=1, lr=1e-2)
    train_on_policy_member(agent, env, 192, seed=0)  # trained weights, non-zero states
    learn = agent.learn
    metrics: dict[str, float] = {}
    seen: dict[str, Any] = {}

    def first_update(rollout: RolloutBuffer) -> dict[str, float]:
        seen.update(rollout.sequences(7, "chunked"))
        seen["advantages_flat"] = rollout.flat()["advantages"]
        metrics.update(learn(rollout))
        return metrics

    agent.learn = first_update  # type: ignore[method-assign]
    train_on_policy_member(agent, env, 96, seed=3)
    # episodes start inside sequences, with real steps after the start
    assert (seen["starts"][1:] & seen["mask"][1:]).any()
    assert metrics["approx_kl"] == pytest.approx(0.0, abs=1e-9)
    assert metrics["clipfrac"] == 0.0
    assert metrics["policy_loss"] == pytest.approx(0.0, abs=1e-6)
    half_mean_square = 0.5 * float(np.mean(np.square(seen["advantages_flat"], dtype=np.float64)))
    assert metrics["value_loss"] == pytest.approx(half_mean_square, rel=1e-5)


# ---------------------------------------------------------------------- bandits
BANDIT_OBS = spaces.Box(0, 10, (12,), np.float32)


def _context(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 5, (3, 12)).astype(np.float32)


def test_neural_ucb_pulls_the_arm_with_the_highest_scaled_upper_bound() -> None:
    """NeuralUCB's score is ``f(x_a) + gamma * sqrt(g_a^T Z^-1 g_a)``: the bonus is there
    and scaled by the exploration coefficient ``gamma``, and the arm pulled maximises it."""
    agent = NeuralUCB(BANDIT_OBS, spaces.Discrete(3), net_config=TINY_NET, seed=0, gamma=3.0,
                      lamb=0.5)
    for step in range(6):
        context = _context(step)
        mean, features = agent.scores_and_features(context)
        width = agent.confidence_widths(features)
        assert (width > 0).all()
        np.testing.assert_allclose(agent.exploration_scores(mean, width), mean + 3.0 * width,
                                   rtol=1e-12)
        assert agent.get_action(context) == int(np.argmax(mean + 3.0 * width))


def test_neural_ts_samples_each_arm_from_its_posterior() -> None:
    """NeuralTS scores an arm by one draw from ``N(f(x_a), (gamma * width_a)^2)``: over
    many draws the scores' mean is the prediction and their spread the arm's own scaled
    confidence width (not the bound itself, not one spread for every arm)."""
    agent = NeuralTS(BANDIT_OBS, spaces.Discrete(3), net_config=TINY_NET, seed=0, gamma=2.0)
    mean, width = np.array([0.5, -1.0, 2.0]), np.array([0.05, 0.3, 1.5])
    draws = np.stack([agent.exploration_scores(mean, width) for _ in range(4000)])
    spread = 2.0 * width
    np.testing.assert_allclose(draws.mean(0), mean, atol=float(4 * spread.max() / 63))
    np.testing.assert_allclose(draws.std(0), spread, rtol=0.06)


def test_neural_ts_pulls_the_arm_whose_sample_is_highest() -> None:
    """A pull draws from the posterior with the agent's generator: the arm pulled is the
    argmax of ``f + gamma * width * z`` with the generator's next normal draws."""
    agent = NeuralTS(BANDIT_OBS, spaces.Discrete(3), net_config=TINY_NET, seed=0, gamma=5.0)
    pulls, expected = [], []
    for step in range(20):
        context = _context(step)
        mean, features = agent.scores_and_features(context)
        width = agent.confidence_widths(features)
        z = copy.deepcopy(agent.np_rng).standard_normal(3)
        expected.append(int(np.argmax(mean + 5.0 * width * z)))
        pulls.append(agent.get_action(context))
    assert pulls == expected
    assert len(set(pulls)) > 1  # the samples, not the means alone, decide
