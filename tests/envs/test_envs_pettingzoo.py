"""PettingZoo construction (entrypoint / module ``parallel_env``) and the vector env."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from agilerl.envs import make_pz_single_env, make_pz_vector_env
from agilerl.envs.gym_env import AUTORESET_MODE

PZ_ENV = textwrap.dedent(
    '''
    import numpy as np
    from gymnasium import spaces


    class TwoAgents:
        """'a' lives ``limit_a`` steps, 'b' lives ``limit_b``; obs = [step, agent index]."""

        metadata = {"name": "two_agents"}
        possible_agents = ["a", "b"]

        def __init__(self, limit_a=2, limit_b=3):
            self.limits = {"a": limit_a, "b": limit_b}
            self.agents = []
            self.t = 0
            self.tags = []

        def observation_space(self, agent):
            return spaces.Box(-10, 10, shape=(2,), dtype=np.float32)

        def action_space(self, agent):
            return spaces.Discrete(3)

        def _obs(self):
            return {a: np.array([self.t, i], dtype=np.float32)
                    for i, a in enumerate(self.possible_agents) if a in self.agents}

        def reset(self, seed=None, options=None):
            self.t = 0
            self.agents = list(self.possible_agents)
            return self._obs(), {a: {} for a in self.agents}

        def step(self, actions):
            assert set(actions) == set(self.agents), (actions, self.agents)
            self.t += 1
            obs = self._obs()
            rewards = {a: float(actions[a]) for a in self.agents}
            term = {a: self.t >= self.limits[a] for a in self.agents}
            trunc = {a: False for a in self.agents}
            self.agents = [a for a in self.agents if not term[a]]
            return obs, rewards, term, trunc, {a: {} for a in obs}


    def make(**kwargs):
        return TwoAgents(**kwargs)


    def tag(env, label="x"):
        env.tags.append(label)
        return env
    '''
)


@pytest.fixture
def pz_dir(tmp_path: Path) -> Path:
    (tmp_path / "pz_custom.py").write_text(PZ_ENV)
    return tmp_path


def test_entrypoint_config_and_wrappers(pz_dir: Path) -> None:
    spec = SimpleNamespace(
        name="two",
        num_envs=2,
        entrypoint="pz_custom:make",
        path=str(pz_dir),
        config={"limit_a": 1, "limit_b": 4},
        wrappers=[["pz_custom:tag", {"label": "first"}], "pz_custom:tag"],
    )
    env = make_pz_single_env(spec, extra_wrappers=[("pz_custom:tag", {"label": "extra"})])
    assert env.limits == {"a": 1, "b": 4}
    assert env.tags == ["first", "x", "extra"]


def test_module_parallel_env_with_config() -> None:
    spec = SimpleNamespace(
        name="mpe2.simple_speaker_listener_v4", num_envs=2, config={"max_cycles": 3}
    )
    env = make_pz_vector_env(spec, seed=0)
    assert env.metadata["autoreset_mode"] == AUTORESET_MODE
    obs, info = env.reset(seed=1)
    assert set(obs) == {"speaker_0", "listener_0"}
    assert obs["listener_0"].shape == (2, 11)
    flags = []
    for _ in range(4):
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        _, rewards, terminated, truncated, _ = env.step(actions)
        flags.append((truncated["speaker_0"].all(), rewards["speaker_0"].copy()))
    env.close()
    assert [f[0] for f in flags] == [False, False, True, False]  # max_cycles reached at step 3
    assert (flags[3][1] == 0).all()  # the reset step


def test_missing_parallel_env() -> None:
    with pytest.raises(AttributeError, match="has no 'parallel_env'"):
        make_pz_single_env(SimpleNamespace(name="json", num_envs=1))


def test_agents_leaving_and_next_step_autoreset(pz_dir: Path) -> None:
    spec = SimpleNamespace(
        name="two", num_envs=2, entrypoint="pz_custom:make", path=pz_dir, config={}
    )
    env = make_pz_vector_env(spec)
    obs, info = env.reset(seed=0)
    act = {"a": np.array([1, 2]), "b": np.array([2, 1])}
    np.testing.assert_array_equal(obs["a"], [[0, 0], [0, 0]])

    obs, rew, term, trunc, info = env.step(act)  # t=1
    np.testing.assert_array_equal(rew["a"], [1, 2])
    assert not term["a"].any()

    obs, rew, term, trunc, info = env.step(act)  # t=2: 'a' terminates
    assert term["a"].all() and not term["b"].any()
    np.testing.assert_array_equal(obs["a"][:, 0], [2, 2])

    obs, rew, term, trunc, info = env.step(act)  # t=3: 'a' gone, 'b' terminates
    assert not info["a"]["active"].any() and info["b"]["active"].all()
    np.testing.assert_array_equal(obs["a"], np.zeros((2, 2)))
    np.testing.assert_array_equal(rew["a"], [0, 0])
    assert term["a"].all() and term["b"].all()
    np.testing.assert_array_equal(rew["b"], [2, 1])

    obs, rew, term, trunc, info = env.step(act)  # reset step
    np.testing.assert_array_equal(obs["b"], [[0, 1], [0, 1]])
    assert not any(term[a].any() or trunc[a].any() for a in env.agents)
    assert not any(rew[a].any() for a in env.agents)
