"""The fast AEC-to-parallel step gives exactly what PettingZoo's conversion gives: on MPE
envs over whole episodes, and on a turn-based env whose agents die mid-episode and whose
``observe`` draws from its generator."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import AgentSelector, wrappers
from pettingzoo.utils.conversions import aec_to_parallel

from agilerl.envs.parallel_step import FastParallelStep, fast_parallel_step


class _Dying(AECEnv):
    """Two agents; ``b`` dies after 3 cycles, the episode is truncated after 6; every
    observation carries a draw from the env's generator."""

    metadata = {"name": "dying_v0", "is_parallelizable": True}

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["a", "b"]
        self._spaces = {a: spaces.Discrete(3) for a in self.possible_agents}

    def observation_space(self, agent):
        return spaces.Box(-10.0, 10.0, (2,), np.float64)

    def action_space(self, agent):
        return self._spaces[agent]

    def observe(self, agent):
        return np.array([self.cycles, self.np_random.normal()])

    def reset(self, seed=None, options=None):
        if seed is not None or not hasattr(self, "_np_random"):
            self.np_random, _ = np.random.default_rng(seed), None
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {"cycle": 0} for a in self.agents}
        self.cycles, self.moves = 0, {}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.reset()

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self.moves[agent] = action
        if self._selector.is_last():
            self.cycles += 1
            for a in self.agents:
                self.rewards[a] = float(self.moves[a]) - self.cycles
                self.infos[a] = {"cycle": self.cycles}
            if self.cycles == 3 and "b" in self.agents:
                self.terminations["b"] = True
            if self.cycles >= 6:
                self.truncations = {a: True for a in self.agents}
            self._selector.reinit(self.agents)
        else:
            self._clear_rewards()
        self.agent_selection = self._selector.next()
        self._deads_step_first()


def _wrapped_dying():
    return aec_to_parallel(wrappers.OrderEnforcingWrapper(
        wrappers.AssertOutOfBoundsWrapper(_Dying())))


def _mpe(name: str):
    from mpe2 import simple_speaker_listener_v4, simple_spread_v3

    return {"spread": simple_spread_v3, "speaker_listener": simple_speaker_listener_v4}[
        name].parallel_env(max_cycles=10)


def _same(a, b) -> bool:
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


@pytest.mark.parametrize("make", [lambda: _mpe("spread"), lambda: _mpe("speaker_listener"),
                                  _wrapped_dying])
def test_fast_step_equals_the_conversions_step(make) -> None:
    plain, fast = make(), make()
    step = fast_parallel_step(fast)
    assert step is not None
    rng = np.random.default_rng(0)
    steps = episodes = 0
    fewest = len(plain.possible_agents)
    while episodes < 4:
        seed = int(rng.integers(1000))
        assert _same(plain.reset(seed=seed), fast.reset(seed=seed))
        while plain.agents:
            actions = {a: plain.action_space(a).sample() for a in plain.agents}
            want = plain.step(dict(actions))
            got = step(dict(actions))
            assert _same(got, want), steps
            assert fast.agents == plain.agents
            fewest = min(fewest, len(plain.agents) or fewest)
            steps += 1
        episodes += 1
    assert steps > 20
    if make is _wrapped_dying:
        assert fewest == 1  # an agent died mid-episode


def test_an_action_outside_its_space_is_refused_as_by_the_wrapper() -> None:
    env = _wrapped_dying()
    env.reset(seed=0)
    step = fast_parallel_step(env)
    assert step is not None
    with pytest.raises(AssertionError, match="action is not in action space"):
        step({"a": 7, "b": 0})


class _UsersWrapper(wrappers.BaseWrapper):
    """A wrapper of the user's (its step may do anything)."""


def test_other_envs_are_stepped_as_they_are() -> None:
    order, bounds = wrappers.OrderEnforcingWrapper, wrappers.AssertOutOfBoundsWrapper
    assert fast_parallel_step(aec_to_parallel(order(_UsersWrapper(_Dying())))) is None
    assert fast_parallel_step(aec_to_parallel(order(bounds(_UsersWrapper(_Dying()))))) is None
    assert fast_parallel_step(_wrapped_dying().aec_env) is None  # not a parallel env


def test_a_vector_env_stepping_this_way_still_pickles_and_steps_alike() -> None:
    import pickle

    from agilerl.envs.pettingzoo_env import PettingZooVectorEnv

    env = PettingZooVectorEnv([lambda: _mpe("spread")] * 2)
    assert all(isinstance(step, FastParallelStep) for step in env._steps)
    copy = pickle.loads(pickle.dumps(env))  # PettingZoo's envs unpickle as new ones
    assert _same(copy.reset(seed=3), env.reset(seed=3))
    actions = {a: np.array([1, 2]) for a in env.agents}
    assert _same(copy.step(dict(actions)), env.step(dict(actions)))
