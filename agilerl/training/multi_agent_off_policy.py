"""Multi-agent off-policy paradigm (MADDPG, MATD3): act jointly, store joint transitions, learn.

One call trains one member for a number of env steps on a PettingZoo vector env
(:class:`agilerl.envs.pettingzoo_env.PettingZooVectorEnv`: observations, rewards and flags
are dicts agent id -> batch over sub-envs). As in the single-agent off-policy loop
(:mod:`agilerl.training.experience`), the env is reset at the start of every call with the
caller's seed, and everything else comes from the agent's and the memory's own state, so a
call is a pure function of (agent state, memory state, seed) and resumes exactly.

* **Autoreset.** The PettingZoo vector envs reset a finished sub-env on the next step
  (``NEXT_STEP``): that step ignores the actions and returns the new episode's first
  observations. Its rows are not transitions and never reach the memory, so no stored
  transition mixes two episodes. A sub-env's episode ends when every agent is terminated
  or truncated (an agent absent mid-episode counts as terminated).
* **Agents that leave early.** ``active`` (from the env's ``info[agent]["active"]``) is
  stored with each transition: whether the agent was live at the observation. An
  inactive agent's rows still feed the other agents' centralised critics (its zero
  observation and unused action), but not its own losses.
* **Scores.** An episode's score is the sum over agents of their returns (the fitness the
  population is selected on, see the algorithms); each agent's own mean return is
  reported as the metric ``return/<agent>``.
* **Learning** follows the single-agent schedule: one update per ``learn_step`` env steps
  once the memory holds ``batch_size`` transitions and more than ``learning_delay``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
from numpy.typing import ArrayLike

from agilerl.algorithms.core.multi_agent import (
    NEXT_MASK,
    MultiAgentReturns,
    MultiAgentStepper,
    MultiAgentVectorEnv,
)
from agilerl.components.multi_agent_replay_buffer import MultiAgentReplayBuffer
from agilerl.core.member_training import Agent, TrainReport
from agilerl.training.experience import MemberResult, _learn_schedule, mean_metrics

if TYPE_CHECKING:
    from agilerl.algorithms.maddpg import MADDPG
    from agilerl.models.training import TrainingSpec


def train_multi_agent_off_policy_member(
    agent: MADDPG,
    env: object,
    memory: MultiAgentReplayBuffer,
    steps: int,
    *,
    learning_delay: int = 0,
    seed: int | None = None,
) -> MemberResult:
    """Step ``env`` ``steps // num_envs`` times with ``agent``, filling ``memory`` and learning.

    The agent provides ``agent_ids``, ``act(obs, explore=True) -> ({agent: env actions},
    {agent: actions to store})``,
    ``storable(obs) -> {agent: rows}``, ``storable_masks(obs) -> {agent: masks}``,
    ``on_episode_end(mask)``, ``learn(batch)``,
    ``batch_size``, ``learn_step`` and ``steps``. Returns ``{steps, score, episodes,
    learn_updates, metrics, seconds}`` (score: mean summed return of the episodes
    completed during the call, NaN if none).
    """
    start = time.perf_counter()
    agents = list(agent.agent_ids)
    # the run's env, a multi-agent vector env by construction
    stepper = MultiAgentStepper(cast(MultiAgentVectorEnv, env))
    num_envs = stepper.num_envs
    obs = stepper.reset(seed=seed)
    sample_rng = np.random.default_rng(seed)
    returns = MultiAgentReturns(agents, num_envs)
    learn: list[dict[str, float]] = []
    vector_steps = max(1, int(steps) // num_envs)
    first = agent.steps[-1] // num_envs
    per_step, every = _learn_schedule(int(agent.learn_step), num_envs)
    for i in range(vector_steps):
        action, stored_action = agent.act(obs, explore=True)
        next_obs, reward, terminated, _, acted, ended, _ = stepper.step(action)
        # A sub-env whose step was real has at least one agent that acted in it.
        valid = np.any([acted[a] for a in agents], axis=0)
        # Masked agents: the next observation's masks, which limit the target actions.
        next_masks = agent.storable_masks(next_obs)
        transition: dict[str, Mapping[str, ArrayLike]] = {
            "obs": agent.storable(obs), "action": stored_action,
            "next_obs": agent.storable(next_obs),
            "reward": {a: np.asarray(reward[a], dtype=np.float32) for a in agents},
            "done": {a: np.asarray(terminated[a], dtype=bool) for a in agents},
            "active": acted,
        }
        if next_masks:
            transition[NEXT_MASK] = next_masks
        memory.add(transition, valid=valid)
        returns.update(reward, acted, ended)
        if ended.any():
            agent.on_episode_end(ended)
        obs = next_obs
        if len(memory) >= agent.batch_size and len(memory) > learning_delay \
                and (first + i) % every == 0:
            for _ in range(per_step):
                learn.append(agent.learn(memory.sample(agent.batch_size, sample_rng)))
    env_steps = vector_steps * num_envs
    agent.steps[-1] += env_steps
    score = returns.score(agent.sum_scores)
    if returns.completed:
        agent.scores.append(score)
    per_agent = {f"return/{a}": r for a, r in returns.mean_per_agent().items()}
    return {
        "steps": env_steps,
        "score": score,
        "episodes": len(returns.completed),
        "learn_updates": len(learn),
        "metrics": {**mean_metrics(learn), **per_agent},
        "seconds": time.perf_counter() - start,
    }


class MultiAgentOffPolicyMemberTrainer:
    """``train(agent, steps, seed)`` for MADDPG-style agents: act jointly, store, learn."""

    def __init__(self, env: object, memory: MultiAgentReplayBuffer,
                 training: TrainingSpec) -> None:
        self.env = env
        self.memory = memory
        self.learning_delay = int(training.learning_delay)

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        result = train_multi_agent_off_policy_member(
            cast("MADDPG", agent), self.env, self.memory, steps, learning_delay=self.learning_delay, seed=seed,
        )
        return TrainReport(steps=int(result["steps"]), score=float(result["score"]),
                           metrics=dict(result["metrics"]))
