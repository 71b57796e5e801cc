"""PettingZoo names (mpe2, old pettingzoo.mpe paths, butterfly, classic), missing extras,
the async vector env, and agents joining mid-episode."""

from __future__ import annotations

import importlib.util
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from agilerl.algorithms.core.multi_agent import MultiAgentStepper
from agilerl.core.errors import MissingExtraError, missing_extra
from agilerl.envs import make_pz_single_env, make_pz_vector_env
from agilerl.envs import pettingzoo_env as pz
from agilerl.envs.pettingzoo_env import AsyncPettingZooVectorEnv, PettingZooVectorEnv
from agilerl.models.env_checks import check_module_path


def _spec(name: str, num_envs: int = 2, **fields) -> SimpleNamespace:
    base = {"name": name, "num_envs": num_envs, "entrypoint": None, "path": None,
            "config": None, "wrappers": None, "sync": True}
    return SimpleNamespace(**{**base, **fields})


def test_old_mpe_path_is_mapped_to_mpe2_with_one_notice(monkeypatch) -> None:
    monkeypatch.setattr(pz, "_NOTICED", set())
    old = "pettingzoo.mpe.simple_speaker_listener_v4"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = make_pz_vector_env(_spec(old))
        make_pz_vector_env(_spec(old)).close()
    notices = [str(w.message) for w in caught if "mpe2" in str(w.message)]
    assert notices == [f"environment {old!r}: MPE moved out of PettingZoo into the mpe2 "
                       "package; using 'mpe2.simple_speaker_listener_v4'"]
    assert env.possible_agents == ["speaker_0", "listener_0"]
    env.close()
    assert check_module_path(old) is None  # the manifest check looks at the new path


@pytest.mark.skipif(importlib.util.find_spec("pymunk") is not None, reason="pymunk installed")
def test_missing_butterfly_package_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"pip install 'agilerl\[butterfly\]'") as info:
        make_pz_single_env(_spec("pettingzoo.butterfly.pistonball_v6"))
    assert isinstance(missing_extra(info.value, "this run"), MissingExtraError)


def test_missing_mpe2_names_the_extra(monkeypatch) -> None:
    def no_mpe2(name: str):
        raise ModuleNotFoundError("No module named 'mpe2'", name="mpe2")

    monkeypatch.setattr(pz.importlib, "import_module", no_mpe2)
    with pytest.raises(ImportError, match=r"pip install 'agilerl\[mpe\]'"):
        make_pz_single_env(_spec("mpe2.simple_spread_v3"))


def test_butterfly_cooperative_pong_builds() -> None:
    env = make_pz_vector_env(_spec("pettingzoo.butterfly.cooperative_pong_v6"), seed=0)
    obs, _ = env.reset(seed=0)
    assert env.possible_agents == ["paddle_0", "paddle_1"]
    assert obs["paddle_0"].shape[0] == 2 and obs["paddle_0"].ndim == 4  # batched images
    env.close()


def test_classic_parallel_env_trains_and_turn_based_is_refused() -> None:
    env = make_pz_vector_env(_spec("pettingzoo.classic.rps_v2"), seed=0)
    obs, _ = env.reset(seed=0)
    actions = {a: np.array([0, 1]) for a in env.possible_agents}
    _, rewards, _, _, _ = env.step(actions)
    assert set(rewards) == {"player_0", "player_1"}
    with pytest.raises(AttributeError, match="turn-based"):
        make_pz_single_env(_spec("pettingzoo.classic.tictactoe_v3"))


def test_async_vector_env_matches_sync() -> None:
    config = {"early_exit": True, "action_masks": True}
    sync = make_pz_vector_env(_spec("agilerl.envs.multi_agent_probe", 5, config=config))
    workers = make_pz_vector_env(
        _spec("agilerl.envs.multi_agent_probe", 5, config=config, sync=False))
    assert isinstance(sync, PettingZooVectorEnv)
    assert isinstance(workers, AsyncPettingZooVectorEnv) and len(workers.processes) >= 1
    try:
        first_a, first_b = sync.reset(seed=3)[0], workers.reset(seed=3)[0]
        np.testing.assert_array_equal(first_a["seeker_0"]["action_mask"],
                                      first_b["seeker_0"]["action_mask"])
        rng = np.random.default_rng(0)
        for _ in range(12):
            actions = {a: np.stack([sync.single_action_space(a).sample() for _ in range(5)])
                       for a in sync.possible_agents}
            actions["seeker_0"] = rng.integers(0, 3, 5)
            out_a, out_b = sync.step(actions), workers.step(actions)
            for k in range(1, 4):
                for agent in sync.possible_agents:
                    np.testing.assert_array_equal(out_a[k][agent], out_b[k][agent])
            for agent in sync.possible_agents:
                np.testing.assert_array_equal(out_a[4][agent]["active"],
                                              out_b[4][agent]["active"])
    finally:
        sync.close()
        workers.close()


class _Joining:
    """'a' lives 4 steps; 'b' joins after step 2 and leaves with 'a'. Reward 1 each step."""

    metadata = {"name": "joining"}
    possible_agents = ["a", "b"]

    def __init__(self) -> None:
        from gymnasium import spaces

        self.box, self.disc = spaces.Box(0, 9, (1,), np.float32), spaces.Discrete(2)
        self.agents: list[str] = []
        self.t = 0

    def observation_space(self, agent):
        return self.box

    def action_space(self, agent):
        return self.disc

    def _obs(self):
        return {a: np.array([self.t], np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, ["a"]
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents)
        self.t += 1
        rewards = {a: 1.0 for a in self.agents}
        if self.t == 2:
            self.agents = ["a", "b"]
        done = self.t >= 4
        term = {a: done for a in self.agents}
        trunc = {a: False for a in self.agents}
        obs = self._obs()
        if done:
            self.agents = []
        return obs, rewards, term, trunc, {a: {} for a in obs}

    def close(self):
        return None


def test_agent_joining_mid_episode() -> None:
    env = PettingZooVectorEnv([_Joining])
    stepper = MultiAgentStepper(env)
    stepper.reset(seed=0)
    acted_b, ended = [], []
    for _ in range(6):
        _, rewards, _, _, acted, end, infos = stepper.step(
            {"a": np.array([0]), "b": np.array([0])})
        acted_b.append(bool(acted["b"][0]))
        ended.append(bool(end[0]))
    # b observes from step 2 on, so its actions count from step 3; step 5 resets
    assert acted_b == [False, False, True, True, False, False]
    assert ended == [False, False, False, True, False, False]
