"""Greedy episodes of a trained agent in a plain environment, and their statistics.

The agent acts with ``greedy_action`` on one observation at a time (every algorithm takes
one observation as well as a batch: :mod:`agilerl.algorithms.core.single_obs`); a
recurrent policy starts each episode from a zero state. The first episode is reset with
``seed``, the next ones continue from there, so the same seed plays the same episodes.

* Gymnasium: an episode ends when the env terminates or truncates it.
* PettingZoo (parallel): when no agent is left; its return is the sum over agents (as
  training's ``sum_scores``), and each agent's own return is kept.
* Bandit: an "episode" is ``pulls`` greedy pulls; its return is the reward they earn.

``max_steps`` caps every episode (an unfinished one counts with its partial return).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, SupportsFloat, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import torch


@dataclass
class Episode:
    """One evaluated episode."""

    total: float
    length: int
    agent_returns: dict[str, float] = field(default_factory=dict)


@dataclass
class Summary:
    """Mean and spread of the episodes' returns and lengths."""

    mean_return: float
    std_return: float
    mean_length: float


def summarise(episodes: list[Episode]) -> Summary:
    returns = np.array([e.total for e in episodes], dtype=np.float64)
    lengths = np.array([e.length for e in episodes], dtype=np.float64)
    return Summary(float(returns.mean()), float(returns.std()), float(lengths.mean()))


Frame = Callable[[Any], None]
"""Called with the env after every reset and step (to render or record it): the env of
the kind being played, whose rendering the caller knows."""


class Player(Protocol):
    """What playing asks of an agent: a fresh recurrent state (None for a feed-forward
    policy) and its greedy action. That takes one observation (a dict agent id -> value
    for a multi-agent agent), and the state too when the policy is recurrent."""

    def initial_hidden(self, num_envs: int) -> dict[str, torch.Tensor] | None: ...

    @property
    def greedy_action(self) -> Callable[..., object]: ...


@runtime_checkable
class GymEnvLike(Protocol):
    """A plain Gymnasium env, as an episode uses it."""

    def reset(self, *, seed: int | None = None) -> tuple[object, object]: ...

    def step(self, action: object) -> tuple[object, SupportsFloat, object, object, object]: ...


@runtime_checkable
class _Resettable(Protocol):
    def reset(self, *, seed: int | None = None) -> tuple[object, object]: ...


@runtime_checkable
class ParallelEnvLike(Protocol):
    """A plain PettingZoo parallel env, as an episode uses it (``agents`` may be set only
    by ``reset``)."""

    possible_agents: list[str]
    agents: list[str]

    def reset(self, *, seed: int | None = None) -> tuple[object, object]: ...

    def step(self, actions: dict[str, object]
             ) -> tuple[object, Mapping[str, SupportsFloat], object, object, object]: ...


@runtime_checkable
class BanditEnvLike(Protocol):
    """A bandit env: ``reset`` gives a context, ``step`` the next one and the reward."""

    def reset(self, seed: int | None = None) -> object: ...

    def step(self, action: object) -> tuple[object, SupportsFloat]: ...


def play(agent: Player, env: object, kind: str, *, episodes: int, seed: int | None = None,
         max_steps: int | None = None, pulls: int = 100,
         on_frame: Frame | None = None, on_episode: Callable[[Episode], None] | None = None,
         ) -> list[Episode]:
    """``episodes`` greedy episodes of ``agent`` in ``env`` (``kind``: gym, pettingzoo or
    bandit); ``on_episode`` is told of each as soon as it ends."""
    run = {"gym": _gym_episode, "pettingzoo": _pz_episode, "bandit": _bandit_episode}[kind]
    played = []
    for index in range(episodes):
        first_seed = seed if index == 0 else None
        cap = pulls if kind == "bandit" else max_steps
        episode = run(agent, env, first_seed, cap, on_frame or _nothing)
        played.append(episode)
        if on_episode is not None:
            on_episode(episode)
    return played


def _nothing(env: object) -> None:
    return None


def _gym_episode(agent: Player, env: object, seed: int | None, cap: int | None,
                 on_frame: Frame) -> Episode:
    assert isinstance(env, GymEnvLike)  # every kind of env has reset and step
    obs, _ = env.reset(seed=seed)
    on_frame(env)
    hidden = agent.initial_hidden(1)
    total, length, done = 0.0, 0, False
    while not done and (cap is None or length < cap):
        action = agent.greedy_action(obs) if hidden is None else agent.greedy_action(obs, hidden)
        obs, reward, terminated, truncated, _ = env.step(action)
        on_frame(env)
        total += float(reward)
        length += 1
        done = bool(terminated or truncated)
    return Episode(total, length)


def _pz_episode(agent: Player, env: object, seed: int | None, cap: int | None,
                on_frame: Frame) -> Episode:
    assert isinstance(env, _Resettable)  # every kind of env has reset
    obs, _ = env.reset(seed=seed)
    assert isinstance(env, ParallelEnvLike)  # read just below; agents exist once reset
    on_frame(env)
    returns = {a: 0.0 for a in env.possible_agents}
    length = 0
    while env.agents and (cap is None or length < cap):
        actions = agent.greedy_action(obs)
        assert isinstance(actions, Mapping)  # a multi-agent agent acts per agent id
        obs, rewards, _, _, _ = env.step({a: actions[a] for a in env.agents if a in actions})
        on_frame(env)
        for name, reward in rewards.items():
            returns[name] = returns.get(name, 0.0) + float(reward)
        length += 1
    return Episode(float(sum(returns.values())), length, returns)


def _bandit_episode(agent: Player, env: object, seed: int | None, cap: int | None,
                    on_frame: Frame) -> Episode:
    assert isinstance(env, BanditEnvLike)  # every kind of env has reset and step
    context = env.reset(seed=seed)
    total, pulls = 0.0, int(cap or 100)
    for _ in range(pulls):
        context, reward = env.step(agent.greedy_action(context))
        total += float(reward)
    return Episode(total, pulls)
