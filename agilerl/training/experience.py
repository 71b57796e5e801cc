"""Per-member experience collection: the "train(member, steps)" half of the population seam.

Each function runs one member for a number of env steps on a Gymnasium >= 1.0 vector env
and learns from what it collects. The env is reset at the start of every call with the
``seed`` the caller gives, and all randomness comes from that seed, the agent's own RNG
state and the buffer contents, so a call's result is a pure function of
(agent state, memory state, seed): a run resumed from a checkpoint repeats it exactly.

Autoreset: both Gymnasium modes are supported (``agilerl.algorithms.core.autoreset``).
In NEXT_STEP mode the step that only resets a finished sub-env is never stored or learned
from; in SAME_STEP mode the final observation from ``info["final_obs"]`` is used as the
transition's ``next_obs``. Episode boundaries never mix observations.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypedDict, TypeVar, cast

import numpy as np
from gymnasium import spaces

from agilerl.algorithms.core.autoreset import Autoreset, VectorEnv
from agilerl.components.replay_buffer import PrioritizedReplayBuffer
from agilerl.components.rollout_buffer import RolloutBuffer

if TYPE_CHECKING:
    import torch

    from agilerl.core.replay_memory import ReplayMemory, TransitionMemory
    from agilerl.core.spaces import ObsEncoder
    from agilerl.core.value_types import Observation, Space
    from agilerl.models.training import TrainingSpec

#: A batch a member learns from: a replay memory's sample (numpy) or a dataset's (torch).
Batch = Mapping[str, "np.ndarray | torch.Tensor"]
#: A recurrent member's state (name -> ``(num_envs, ...)`` tensor); None: not recurrent.
Hidden = dict[str, "torch.Tensor"]


class MemberResult(TypedDict, total=False):
    """What a member call returns (:func:`train_off_policy_member`, ...): ``steps`` and
    ``metrics`` always; the env-stepping loops also the rest."""

    steps: int
    score: float
    episodes: int
    learn_updates: int
    metrics: dict[str, float]
    seconds: float


class TrainedMember(Protocol):
    """What every loop here reads and writes of a member: its env steps and scores."""

    steps: list[int]
    scores: list[float]


class ProgressingMember(TrainedMember, Protocol):
    """A member told where it stands in the run's budget (a learning-rate schedule)."""

    def set_progress(self, progress: float) -> None: ...


class OffPolicyMember(TrainedMember, Protocol):
    """A member as :func:`off_policy_member_run` and :func:`learn_at` drive it (DQN, DDPG,
    ..., and CQN on a dataset)."""

    batch_size: int
    learn_step: int
    obs_encoder: ObsEncoder

    def explore_action(self, obs: Observation, vector_step: int,
                       settings: object = None) -> np.ndarray: ...

    def on_episode_end(self, ended: np.ndarray) -> None: ...

    def learn(self, experiences: Batch) -> dict[str, float]:
        """The update's metrics."""
        ...

    @classmethod
    def exploration_settings(cls, training: TrainingSpec) -> object:
        """How the class explores in a run (e.g. an epsilon schedule), passed back to
        :meth:`explore_action`."""
        ...


class PrioritizedMember(OffPolicyMember, Protocol):
    """An off-policy member that learns from a prioritized memory (Rainbow DQN): the
    manifest rules give a ``PrioritizedReplayBuffer`` to no other."""

    def per_beta(self, progress: float) -> float:
        """The importance-sampling exponent after ``progress`` (0 to 1) of the budget."""
        ...

    def learn_prioritized(self, experiences: Batch) -> tuple[dict[str, float], np.ndarray]:
        """The update's metrics, and the sampled rows' new priorities."""
        ...


class OnPolicyMember(ProgressingMember, Protocol):
    """A member as :func:`on_policy_member_run` drives it (PPO)."""

    learn_step: int
    gamma: float
    gae_lambda: float
    continuous: bool
    action_space: Space
    obs_encoder: ObsEncoder

    def initial_hidden(self, num_envs: int) -> Hidden | None: ...

    def get_action(self, obs: Observation, hidden: Hidden | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...

    def get_value(self, obs: Observation, hidden: Hidden | None = None) -> np.ndarray: ...

    def reset_hidden(self, hidden: Hidden | None, starts: np.ndarray) -> None: ...

    def learn(self, rollout: RolloutBuffer) -> dict[str, float]: ...


_Point = TypeVar("_Point")


class _Episodes:
    """Running returns per sub-env and the returns of episodes completed in this call."""

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.completed: list[float] = []

    def update(self, reward: np.ndarray, ended: np.ndarray, valid: np.ndarray) -> None:
        self.returns += np.where(valid, reward, 0.0)
        if ended.any():
            self.completed.extend(self.returns[ended].tolist())
            self.returns[ended] = 0.0

    def mean(self) -> float:
        return float(np.mean(self.completed)) if self.completed else float("nan")


def _learn_schedule(learn_step: int, num_envs: int) -> tuple[int, int]:
    """(updates per qualifying vector step, vector steps between updates).

    One update per ``learn_step`` env steps: several per vector step when
    ``learn_step < num_envs``, else one every ``learn_step // num_envs`` vector steps.
    """
    if learn_step <= num_envs:
        return max(1, num_envs // learn_step), 1
    return 1, max(1, learn_step // num_envs)


def tell_progress(agent: ProgressingMember, steps_this_call: int, max_steps: int | None) -> None:
    """Before an update: tell ``agent.set_progress`` the member's env steps so far (its
    total before this call plus ``steps_this_call``) over ``max_steps``, the run's budget
    per member, which a learning-rate schedule follows; nothing without a budget."""
    if max_steps:
        agent.set_progress((agent.steps[-1] + steps_this_call) / max_steps)


def mean_metrics(metrics: list[dict[str, float]]) -> dict[str, float]:
    """The mean of every metric over the updates that report it."""
    if not metrics:
        return {}
    keys = dict.fromkeys(k for m in metrics for k in m)  # some updates report more (TD3's actor)
    return {k: float(np.mean([m[k] for m in metrics if k in m])) for k in keys}


def _finish(
    agent: TrainedMember, episodes: _Episodes, env_steps: int, learn: list[dict[str, float]],
    start: float,
) -> MemberResult:
    agent.steps[-1] += env_steps
    score = episodes.mean()
    if episodes.completed:
        agent.scores.append(score)
    return {
        "steps": env_steps,
        "score": score,
        "episodes": len(episodes.completed),
        "learn_updates": len(learn),
        "metrics": mean_metrics(learn),
        "seconds": time.perf_counter() - start,
    }


class LearnPoint(NamedTuple):
    """Where :func:`off_policy_member_run` wants one learning update: sample a batch of
    ``agent.batch_size`` from ``memory`` with ``rng`` and learn from it (``done_steps``,
    ``max_steps``: the progress a prioritized memory's beta follows)."""

    memory: ReplayMemory[Batch]
    """A replay memory, or a dataset's batches."""
    rng: np.random.Generator
    done_steps: int
    max_steps: int | None

    def batch(self, agent: OffPolicyMember) -> Batch:
        """What ``agent.learn`` takes here (a uniform memory's sample)."""
        return self.memory.sample(agent.batch_size, rng=self.rng)


class RolloutPoint(NamedTuple):
    """Where :func:`on_policy_member_run` wants one learning update: ``agent.learn`` on the
    filled ``rollout`` (its advantages computed)."""

    rollout: RolloutBuffer

    def batch(self, agent: object) -> RolloutBuffer:
        """What ``agent.learn`` takes here: the rollout."""
        return self.rollout


def train_off_policy_member(
    agent: OffPolicyMember,
    env: object,
    memory: TransitionMemory,
    steps: int,
    *,
    learning_delay: int = 0,
    exploration: object = None,
    seed: int | None = None,
    max_steps: int | None = None,
) -> MemberResult:
    """Step ``env`` ``steps // num_envs`` times with ``agent``, filling ``memory`` and learning.

    Actions come from ``agent.explore_action(obs, vector_step, exploration)`` (``exploration``:
    the agent class's ``exploration_settings`` of the run, e.g. an epsilon schedule); sub-envs
    whose episode ends are reported with ``agent.on_episode_end(ended_mask)``.

    Learns once per ``agent.learn_step`` env steps when ``len(memory) >= batch_size`` and
    ``len(memory) > learning_delay``, on batches sampled with a generator seeded from
    ``seed``. Returns ``{steps, score, episodes, learn_updates, metrics, seconds}`` (score:
    mean return of episodes completed during the call, NaN if none).

    Transitions go in through ``memory.add_vector_step`` (an n-step memory folds them per
    sub-env; its open windows are stored as truncated episodes when the call ends). A
    prioritized memory is sampled with ``agent.per_beta(progress)``, progress being the
    member's env steps over ``max_steps`` (the run's budget; without one, 1), and gets the
    ``priorities`` the agent's ``learn_prioritized`` returns for the sampled rows.
    """
    run = off_policy_member_run(
        agent, env, memory, steps, learning_delay=learning_delay, exploration=exploration,
        seed=seed, max_steps=max_steps)
    return drive_member_run(run, lambda point: learn_at(agent, point))


def drive_member_run(run: Generator[_Point, dict[str, float], MemberResult],
                     learn: Callable[[_Point], dict[str, float]]) -> MemberResult:
    """Run a member call written as a generator (:func:`off_policy_member_run`,
    :func:`on_policy_member_run`, the offline loop's) to its end, answering every point it
    yields with ``learn(point)`` (the update's metrics); its result."""
    try:
        point = next(run)
        while True:
            point = run.send(learn(point))
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]


def off_policy_member_run(
    agent: OffPolicyMember,
    env: object,
    memory: TransitionMemory,
    steps: int,
    *,
    learning_delay: int = 0,
    exploration: object = None,
    seed: int | None = None,
    max_steps: int | None = None,
) -> Generator[LearnPoint, dict[str, float], MemberResult]:
    """:func:`train_off_policy_member` as a generator that yields a :class:`LearnPoint` at
    every learning update and is sent the update's metrics; it returns the call's result.
    The driver decides how the update is made (one agent's ``learn``, or several members'
    updates batched together, :mod:`agilerl.population.lockstep`)."""
    start = time.perf_counter()
    stepper = Autoreset(cast(VectorEnv, env))  # the run's env, a vector env by construction
    num_envs = stepper.num_envs
    obs = stepper.reset(seed=seed)
    sample_rng = np.random.default_rng(seed)
    episodes = _Episodes(num_envs)
    learn: list[dict[str, float]] = []
    vector_steps = max(1, int(steps) // num_envs)
    first = agent.steps[-1] // num_envs
    for i in range(vector_steps):
        action = agent.explore_action(obs, first + i, exploration)
        new_obs, next_obs, reward, terminated, truncated, valid, _ = stepper.step(action)
        transition = {
            "obs": agent.obs_encoder.storable(obs),
            "action": action,
            "reward": reward,
            "next_obs": agent.obs_encoder.storable(next_obs),
            "done": terminated,
        }
        env_ids, cut = np.arange(num_envs), truncated
        if not valid.all():
            transition = {k: np.asarray(v)[valid] for k, v in transition.items()}
            env_ids, cut = env_ids[valid], truncated[valid]
        memory.add_vector_step(env_ids, cut, **transition)
        ended = (terminated | truncated) & valid
        episodes.update(reward, ended, valid)
        if ended.any():
            agent.on_episode_end(ended)
        obs = new_obs
        if len(memory) >= agent.batch_size and len(memory) > learning_delay:
            per_step, every = _learn_schedule(int(agent.learn_step), num_envs)
            if (first + i) % every == 0:
                done_steps = agent.steps[-1] + (i + 1) * num_envs
                for _ in range(per_step):
                    learn.append((yield LearnPoint(memory, sample_rng, done_steps, max_steps)))
    # The next call resets the env (and the memory is shared by the population): episodes
    # end here for the memory, so no n-step return spans two calls.
    memory.end_streams()
    return _finish(agent, episodes, vector_steps * num_envs, learn, start)


def learn_at(agent: OffPolicyMember, point: LearnPoint) -> dict[str, float]:
    """The update a member run asks for at ``point``: sample a batch, learn from it, and
    give a prioritized memory its new priorities."""
    memory, rng, done_steps, max_steps = point
    if not isinstance(memory, PrioritizedReplayBuffer):
        return agent.learn(point.batch(agent))
    member = cast(PrioritizedMember, agent)  # the only members given a prioritized memory
    progress = done_steps / max_steps if max_steps else 1.0
    batch = memory.sample(member.batch_size, rng, beta=member.per_beta(progress))
    metrics, priorities = member.learn_prioritized(batch)
    memory.update_priorities(batch["indices"], priorities)
    return metrics


def train_on_policy_member(
    agent: OnPolicyMember,
    env: object,
    steps: int,
    *,
    seed: int | None = None,
    on_rollout: Callable[[dict[str, float]], None] | None = None,
    max_steps: int | None = None,
) -> MemberResult:
    """``ceil(steps / learn_step)`` rollouts of ``ceil(learn_step / num_envs)`` vector
    steps, each followed by ``agent.learn(rollout)`` (PPO-style agents).

    The agent must provide ``get_action(obs, hidden) -> (env_action, action, log_prob,
    value)``, ``get_value(obs, hidden)``, ``initial_hidden(num_envs)``, ``gamma`` and
    ``gae_lambda``. Truncated episodes are bootstrapped with ``gamma * V(final_obs)``
    added to their last reward.

    Recurrent agents (``initial_hidden`` not None): the state starts at zero with the env
    reset of this call (so a call stays a pure function of agent state and seed), is
    stored in the rollout at every step, advanced by ``get_action`` and zeroed for a
    sub-env whose next observation starts an episode: after the step that ended it, and
    after a NEXT_STEP autoreset step.

    With ``max_steps`` (the run's budget per member), ``agent.set_progress`` is told, before
    each update, the member's env steps before that rollout over ``max_steps`` (what a
    learning-rate schedule follows).
    """
    def learn(point: RolloutPoint) -> dict[str, float]:
        metrics = agent.learn(point.rollout)
        if on_rollout is not None:
            on_rollout(metrics)
        return metrics

    return drive_member_run(
        on_policy_member_run(agent, env, steps, seed=seed, max_steps=max_steps), learn)


def on_policy_member_run(
    agent: OnPolicyMember, env: object, steps: int, *, seed: int | None = None,
    max_steps: int | None = None,
) -> Generator[RolloutPoint, dict[str, float], MemberResult]:
    """:func:`train_on_policy_member` as a generator that yields a :class:`RolloutPoint`
    at every learning update and is sent the update's metrics; it returns the call's
    result (the driver decides how the update is made, see
    :mod:`agilerl.population.lockstep`)."""
    start = time.perf_counter()
    stepper = Autoreset(cast(VectorEnv, env))  # the run's env, a vector env by construction
    num_envs = stepper.num_envs
    obs = stepper.reset(seed=seed)
    hidden = agent.initial_hidden(num_envs)
    learn_step = int(agent.learn_step)
    horizon = math.ceil(learn_step / num_envs)
    rollouts = math.ceil(int(steps) / learn_step)
    action_space = agent.action_space
    action_shape: tuple[int, ...] = ()
    if agent.continuous:  # a Box (what ``continuous`` says)
        assert isinstance(action_space, spaces.Box)
        action_shape = tuple(action_space.shape)
    buffer = RolloutBuffer(
        horizon,
        num_envs,
        (agent.obs_encoder.shape, agent.obs_encoder.dtype),
        action_shape,
        np.float32 if agent.continuous else np.int64,
    )
    episodes = _Episodes(num_envs)
    learn: list[dict[str, float]] = []
    for r in range(rollouts):
        buffer.reset()
        for _t in range(horizon):
            stored_hidden = _numpy_state(hidden)
            env_action, action, log_prob, value = agent.get_action(obs, hidden)
            new_obs, next_obs, reward, terminated, truncated, valid, _ = stepper.step(env_action)
            ended = (terminated | truncated) & valid
            episodes.update(reward, ended, valid)
            cut = truncated & ~terminated & valid
            if cut.any():
                reward = reward.copy()
                final = agent.obs_encoder.numpy(next_obs)[cut]
                reward[cut] += agent.gamma * agent.get_value(final, _rows(hidden, cut))
            buffer.add(
                agent.obs_encoder.numpy(obs), action, log_prob, value, reward, ended, valid,
                hidden=stored_hidden,
            )  # fmt: skip
            agent.reset_hidden(hidden, ended | ~valid)
            obs = new_obs
        buffer.compute_gae(agent.get_value(obs, hidden), agent.gamma, agent.gae_lambda)
        tell_progress(agent, r * horizon * num_envs, max_steps)
        learn.append((yield RolloutPoint(buffer)))
    return _finish(agent, episodes, rollouts * horizon * num_envs, learn, start)


def _numpy_state(hidden: Hidden | None) -> dict[str, np.ndarray] | None:
    if hidden is None:
        return None
    return {name: state.detach().cpu().numpy() for name, state in hidden.items()}


def _rows(hidden: Hidden | None, mask: np.ndarray) -> Hidden | None:
    if hidden is None:
        return None
    index = np.flatnonzero(mask)
    return {name: state[index] for name, state in hidden.items()}
