"""Multi-agent on-policy paradigm (IPPO): collect per-agent rollouts, then learn.

As for single-agent members (``agilerl.training.experience``), a call resets the env with
the given seed and everything it does follows from (agent state, seed), so a run resumed
from a checkpoint repeats it exactly. ``ceil(steps / learn_step)`` rollouts of
``ceil(learn_step / num_envs)`` vector steps are collected; each agent has its own
rollout buffer, in which a step counts only where the agent acted as a live agent on a
real (non-autoreset) step (``MultiAgentStepper``). An agent's episode ends when it is
terminated or truncated; truncated ones are bootstrapped with ``gamma * V(final obs)``.

The score of a call is the mean summed-over-agents return of the episodes completed
(the fitness convention of ``agilerl.algorithms.core.multi_agent``); the per-agent mean
returns are reported as metrics ``return/<agent>``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
from gymnasium import spaces

from agilerl.algorithms.core.multi_agent import (
    MultiAgentReturns,
    MultiAgentStepper,
    MultiAgentVectorEnv,
)
from agilerl.components.rollout_buffer import RolloutBuffer
from agilerl.core.member_training import Agent, TrainReport
from agilerl.training.experience import MemberResult, mean_metrics, tell_progress

if TYPE_CHECKING:
    import numpy.typing as npt

    from agilerl.algorithms.ippo import IPPO
    from agilerl.core.value_types import Observation, Space


class MultiAgentOnPolicyMemberTrainer:
    """``train(agent, steps, seed)`` for multi-agent on-policy agents (IPPO); ``max_steps``:
    the run's budget per member, which a learning-rate schedule follows."""

    def __init__(self, env: object, max_steps: int | None = None) -> None:
        self.env = env
        self.max_steps = max_steps

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        result = train_multi_agent_on_policy_member(cast("IPPO", agent), self.env, steps, seed=seed,
                                                    max_steps=self.max_steps)
        return TrainReport(steps=int(result["steps"]), score=float(result["score"]),
                           metrics=dict(result["metrics"]))


def _box_shape(space: Space) -> tuple[int, ...]:
    """The action shape of a continuous unit (its action space is a Box)."""
    assert isinstance(space, spaces.Box)
    return tuple(space.shape)


def _arms(space: Space) -> int:
    """The actions of a masked agent (its action space is Discrete)."""
    assert isinstance(space, spaces.Discrete)
    return int(space.n)


def _buffers(agent: IPPO, horizon: int, num_envs: int) -> dict[str, RolloutBuffer]:
    buffers = {}
    for unit, agents in agent.units.items():
        encoder, continuous = agent.obs_encoders[unit], agent.continuous[unit]
        shape = _box_shape(agent.unit_action_space(unit)) if continuous else ()
        for a in agents:
            buffers[a] = RolloutBuffer(horizon, num_envs, (encoder.shape, encoder.dtype), shape,
                                       np.float32 if continuous else np.int64)
    return buffers


def train_multi_agent_on_policy_member(
    agent: IPPO, env: object, steps: int, *, seed: int | None = None,
    max_steps: int | None = None,
) -> MemberResult:
    """Collect and learn for ``steps`` env steps (see the module docstring); returns
    ``{steps, score, episodes, learn_updates, metrics, seconds}``. With ``max_steps``
    (the run's budget per member), ``agent.set_progress`` is told, before each update, the
    member's env steps before that rollout over ``max_steps``."""
    start = time.perf_counter()
    # the run's env, a multi-agent vector env by construction
    stepper = MultiAgentStepper(cast(MultiAgentVectorEnv, env))
    num_envs, agent_ids = stepper.num_envs, stepper.agent_ids
    obs = stepper.reset(seed=seed)
    learn_step = int(agent.learn_step)
    horizon = math.ceil(learn_step / num_envs)
    rollouts = math.ceil(int(steps) / learn_step)
    buffers = _buffers(agent, horizon, num_envs)
    masked = {a for a, m in agent.action_masks(obs).items() if m is not None}
    masks = {a: np.zeros((horizon, num_envs, _arms(agent.action_spaces[a])), dtype=bool)
             for a in masked}
    returns = MultiAgentReturns(agent_ids, num_envs)
    learned: list[dict[str, float]] = []
    for r in range(rollouts):
        for buffer in buffers.values():
            buffer.reset()
        for t in range(horizon):
            env_actions, actions, log_probs, values = agent.get_action(obs)
            step_masks = agent.action_masks(obs)
            next_obs, rewards, terminated, truncated, acted, ended, _ = stepper.step(env_actions)
            returns.update(rewards, acted, ended)
            bootstrap = _truncation_bootstrap(agent, next_obs, terminated, truncated, acted)
            for a in agent_ids:
                done = (np.asarray(terminated[a]) | np.asarray(truncated[a])) & acted[a]
                reward = np.asarray(rewards[a], dtype=np.float32) + bootstrap.get(a, 0.0)
                buffers[a].add(agent.agent_obs_numpy(a, obs), actions[a], log_probs[a],
                               values[a], reward, done, acted[a])
                if a in masked:
                    mask = step_masks[a]
                    assert mask is not None  # a masked agent's observations carry its mask
                    masks[a][t] = mask
            obs = next_obs
        last = agent.get_value(obs)
        for a in agent_ids:
            buffers[a].compute_gae(last[a], agent.gamma, agent.gae_lambda)
        tell_progress(agent, r * horizon * num_envs, max_steps)
        learned.append(agent.learn(buffers, masks or None))
    env_steps = rollouts * horizon * num_envs
    agent.steps[-1] += env_steps
    score = returns.score(agent.sum_scores)
    if returns.completed:
        agent.scores.append(score)
    metrics = mean_metrics(learned)
    metrics.update({f"return/{a}": r for a, r in returns.mean_per_agent().items()})
    return {
        "steps": env_steps, "score": score, "episodes": len(returns.completed),
        "learn_updates": len(learned), "metrics": metrics,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip


def _truncation_bootstrap(
    agent: IPPO, next_obs: Mapping[str, Observation], terminated: Mapping[str, npt.ArrayLike],
    truncated: Mapping[str, npt.ArrayLike], acted: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """``gamma * V(final obs)`` for the agents truncated (not terminated) at this step."""
    cut = {a: np.asarray(truncated[a]) & ~np.asarray(terminated[a]) & acted[a] for a in acted}
    if not any(c.any() for c in cut.values()):
        return {}
    values = agent.get_value(next_obs)
    return {a: np.where(c, agent.gamma * values[a], 0.0).astype(np.float32)
            for a, c in cut.items() if c.any()}
