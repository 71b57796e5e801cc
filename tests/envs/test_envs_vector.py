"""Vector env construction: modes, config/wrappers, seeding, NEXT_STEP autoreset."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from agilerl.envs import (
    AUTORESET_MODE,
    NATIVE_MIN_ENVS,
    ChunkedAsyncVectorEnv,
    gym_env,
    make_single_env,
    make_vector_env,
    vector_mode,
)


def spec(**fields: object) -> SimpleNamespace:
    fields.setdefault("num_envs", 4)
    return SimpleNamespace(**fields)


def test_autoreset_mode_is_next_step() -> None:
    assert AUTORESET_MODE is AutoresetMode.NEXT_STEP


@pytest.mark.parametrize(
    ("fields", "extra", "mode"),
    [
        ({"name": "CartPole-v1", "num_envs": 16}, None, "native"),
        ({"name": "CartPole-v1", "num_envs": 16, "sync": True}, None, "native"),
        (
            {"name": "CartPole-v1", "num_envs": 16, "config": {"sutton_barto_reward": True}},
            None,
            "native",
        ),
        ({"name": "CartPole-v1", "num_envs": 16, "config": {"render_fps_x": 1}, "sync": False},
         None, "async"),
        ({"name": "CartPole-v1", "num_envs": 16, "sync": False}, [lambda env: env], "async"),
        (
            {"name": "CartPole-v1", "num_envs": 16, "wrappers": ["gymnasium.wrappers.ClipReward"],
             "sync": False},
            None,
            "async",
        ),
        # sync unset: a cheap step (timed on a probe copy) steps in this process
        ({"name": "CartPole-v1", "num_envs": 16}, [lambda env: env], "sync"),
        ({"name": "Pendulum-v1", "num_envs": 8}, None, "sync"),
        ({"name": "Pendulum-v1", "num_envs": 8, "sync": None}, None, "sync"),
        # ... and a copy that cannot be built keeps worker processes (whose build reports it)
        ({"name": "CartPole-v1", "num_envs": 16, "config": {"render_fps_x": 1}}, None, "async"),
        ({"name": "CartPole-v1", "num_envs": NATIVE_MIN_ENVS - 1, "sync": True}, None, "sync"),
        ({"name": "CartPole-v1", "num_envs": 1}, None, "sync"),
        ({"name": "Pendulum-v1", "num_envs": 8, "sync": True}, None, "sync"),
        ({"name": "Pendulum-v1", "num_envs": 8, "sync": False}, None, "async"),
        ({"name": "x", "entrypoint": "m:f", "num_envs": 8, "sync": True}, None, "sync"),
    ],
)
def test_vector_mode_rule(fields: dict, extra: list | None, mode: str) -> None:
    assert vector_mode(spec(**fields), extra) == mode


SLOW_ENV = """
import time
import gymnasium
import numpy as np
from gymnasium import spaces


class SlowEnv(gymnasium.Env):
    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, delay=0.0):
        self.delay = delay

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        time.sleep(self.delay)
        return np.zeros(2, np.float32), 0.0, False, False, {}
"""


@pytest.mark.parametrize(("delay", "num_envs", "mode"), [
    (0.0, 8, "sync"),     # nothing to wait for: one process
    (0.001, 4, "async"),  # 4 ms a vector step: worker processes
    (0.001, 1, "sync"),   # one copy never gets a worker process
])
def test_an_unset_sync_follows_the_timed_step(tmp_path, delay, num_envs, mode) -> None:
    (tmp_path / "slow_env.py").write_text(SLOW_ENV)
    fields = {"name": f"slow-{delay}", "entrypoint": "slow_env.py:SlowEnv",
              "path": str(tmp_path), "config": {"delay": delay}, "num_envs": num_envs}
    assert vector_mode(spec(**fields)) == mode
    assert vector_mode(spec(**fields, sync=True)) == "sync"
    assert vector_mode(spec(**fields, sync=False)) == ("async" if num_envs > 1 else "sync")


@pytest.mark.parametrize(
    ("fields", "cls"),
    [
        ({"name": "CartPole-v1", "num_envs": 4}, CartPoleVectorEnv),
        ({"name": "Acrobot-v1", "num_envs": 2, "sync": True}, SyncVectorEnv),
        ({"name": "MountainCar-v0", "num_envs": 2, "sync": False}, ChunkedAsyncVectorEnv),
    ],
)
def test_every_vectoriser_reports_next_step(fields: dict, cls: type) -> None:
    env = make_vector_env(spec(**fields), seed=0)
    try:
        assert isinstance(env, cls)
        assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        obs, _ = env.reset(seed=1)
        assert obs.shape == (fields["num_envs"], *env.single_observation_space.shape)
    finally:
        env.close()


def test_registered_cartpole_one_sync_env_resets() -> None:
    env = make_vector_env(spec(name="CartPole-v1", num_envs=1, sync=True))
    obs, info = env.reset()
    assert isinstance(env, SyncVectorEnv)
    assert obs.shape == (1, 4)
    env.close()


def test_config_and_wrappers_apply_to_registered_ids() -> None:
    # The reference ignores both without an entrypoint (its quirk Q7); we apply them.
    env = make_vector_env(
        spec(
            name="Pendulum-v1",
            num_envs=2,
            sync=True,
            config={"g": 3.5},
            wrappers=[("gymnasium.wrappers.TimeLimit", {"max_episode_steps": 2})],
        )
    )
    assert env.envs[0].unwrapped.g == 3.5
    env.reset(seed=0)
    env.step(np.zeros((2, 1), dtype=np.float32))
    _, _, _, truncated, _ = env.step(np.zeros((2, 1), dtype=np.float32))
    assert truncated.all()
    env.close()


def test_custom_entrypoint_config_and_wrappers(user_env_dir: Path) -> None:
    custom = spec(
        name="Count",
        num_envs=2,
        sync=True,
        entrypoint="envs_pkg.custom:make_count_env",
        path=str(user_env_dir),
        config={"limit": 2, "reward": 0.5},
        wrappers=[["envs_pkg.custom:Tag", {"tag": "a"}], "envs_pkg.custom:Tag"],
    )
    env = make_vector_env(custom, extra_wrappers=[("envs_pkg.custom:Tag", {"tag": "extra"})])
    assert isinstance(env, SyncVectorEnv)
    assert env.envs[0].unwrapped.tags == ["a", "x", "extra"]
    assert env.envs[1].unwrapped.limit == 2
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(np.zeros(2, dtype=np.int64))
    assert reward.tolist() == [0.5, 0.5] and not terminated.any()
    env.close()


def test_next_step_autoreset_semantics(user_env_dir: Path) -> None:
    """The step after a terminal step is a reset step: reward 0, flags false, first obs."""
    custom = spec(
        name="Count",
        num_envs=2,
        sync=False,
        entrypoint="envs_pkg/custom.py:CountEnv",
        path=str(user_env_dir),
        config={"limit": 2},
    )
    env = make_vector_env(custom)
    assert isinstance(env, ChunkedAsyncVectorEnv)  # user file survives the subprocess hand-off
    env.reset(seed=0)
    actions = np.zeros(2, dtype=np.int64)
    rows = [env.step(actions) for _ in range(3)]
    env.close()
    assert rows[1][0][:, 0].tolist() == [2.0, 2.0] and rows[1][2].all()
    obs, reward, terminated, truncated, _ = rows[2]
    assert obs[:, 0].tolist() == [0.0, 0.0]
    assert reward.tolist() == [0.0, 0.0]
    assert not terminated.any() and not truncated.any()


def test_single_env(user_env_dir: Path) -> None:
    env = make_single_env(spec(name="CartPole-v1", config={"sutton_barto_reward": True}))
    assert env.unwrapped._sutton_barto_reward is True
    custom = make_single_env(
        spec(
            name="c", entrypoint="envs_pkg.custom:CountEnv", path=user_env_dir, config={"limit": 9}
        )
    )
    assert custom.limit == 9


def _rollout(env: gym.vector.VectorEnv, seed: int, steps: int = 60) -> list[np.ndarray]:
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(0)
    out = [obs]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(rng.integers(0, 2, size=env.num_envs))
        out += [obs, reward, terminated, truncated]
    env.close()
    return out


@pytest.mark.parametrize("fields", [{"num_envs": 4}, {"num_envs": 3, "sync": True}])
def test_same_seed_same_trajectory(fields: dict) -> None:
    first = _rollout(make_vector_env(spec(name="CartPole-v1", **fields)), seed=7)
    second = _rollout(make_vector_env(spec(name="CartPole-v1", **fields)), seed=7)
    other = _rollout(make_vector_env(spec(name="CartPole-v1", **fields)), seed=8)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert not np.array_equal(first[0], other[0])


def test_seed_argument_makes_unseeded_resets_deterministic() -> None:
    runs = []
    for _ in range(2):
        env = make_vector_env(spec(name="CartPole-v1", num_envs=4), seed=3)
        runs.append((env.reset()[0], env.action_space.sample()))
        env.close()
    assert np.array_equal(runs[0][0], runs[1][0])
    assert np.array_equal(runs[0][1], runs[1][1])


def test_native_and_sync_share_dynamics_and_autoreset() -> None:
    """From the same states and actions, native CartPole matches per-env CartPole exactly.

    (Initial states differ between the two for one seed: the native env draws all sub-envs
    from one generator, a sync env seeds sub-env ``i`` with ``seed + i``.)
    """
    n = 4
    native = make_vector_env(spec(name="CartPole-v1", num_envs=n))
    sync = make_vector_env(
        spec(name="CartPole-v1", num_envs=n, sync=True, wrappers=[]), [lambda e: e]
    )
    assert isinstance(sync, SyncVectorEnv)
    start, _ = native.reset(seed=0)
    sync.reset(seed=0)
    for i, sub in enumerate(sync.envs):
        sub.unwrapped.state = native.unwrapped.state[:, i].copy()
    rng = np.random.default_rng(1)
    done = np.zeros(n, dtype=bool)  # episode ended: later states come from different RNGs
    checked_reset_step = np.zeros(n, dtype=bool)
    for _ in range(40):
        actions = rng.integers(0, 2, size=n)
        a = native.step(actions)
        b = sync.step(actions)
        live = ~done
        np.testing.assert_allclose(a[0][live], b[0][live], rtol=1e-5, atol=1e-6)
        for x, y in zip(a[1:4], b[1:4], strict=True):
            np.testing.assert_array_equal(x[live], y[live])  # reward, terminated, truncated
        resetting = done & ~checked_reset_step
        for result in (a, b):  # the reset step: reward 0, both flags false
            assert (result[1][resetting] == 0).all()
            assert not (result[2][resetting] | result[3][resetting]).any()
        checked_reset_step = checked_reset_step | resetting
        done |= a[2] | a[3]
    native.close()
    sync.close()
    assert checked_reset_step.any(), "the rollout should cross at least one episode boundary"


def test_box2d_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gym_env, "_box2d_installed", lambda: False)
    with pytest.raises(ImportError, match=r"pip install 'agilerl\[box2d\]'"):
        make_vector_env(spec(name="LunarLander-v3"))


def test_bad_num_envs() -> None:
    with pytest.raises(ValueError, match="num_envs"):
        make_vector_env(spec(name="CartPole-v1", num_envs=0))


def test_unknown_id_fails_before_subprocesses_start() -> None:
    with pytest.raises(gym.error.NameNotFound, match="Did you mean: `CartPole`"):
        make_vector_env(spec(name="CartPol-v1", num_envs=4, sync=False))


def test_async_workers_survive_ctrl_c() -> None:
    """Ctrl-C goes to the whole process group; workers leave it to the main process."""
    import os
    import signal
    import time

    env = make_vector_env(spec(name="Pendulum-v1", num_envs=2, sync=False))
    try:
        assert isinstance(env, ChunkedAsyncVectorEnv)
        env.reset(seed=0)
        for process in env.processes:
            os.kill(process.pid, signal.SIGINT)
        time.sleep(0.05)
        obs, *_ = env.step(np.zeros((2, 1), dtype=np.float32))
        assert obs.shape == (2, 3)
        assert all(process.is_alive() for process in env.processes)
    finally:
        env.close()


def test_chunked_async_matches_sync_trajectories() -> None:
    """Sub-env i is seeded seed + i in both, so equal actions give equal trajectories."""
    fields = {
        "name": "CartPole-v1",
        "num_envs": 5,
        "wrappers": ["gymnasium.wrappers.RecordEpisodeStatistics"],
    }
    chunked = make_vector_env(spec(**fields, sync=False))
    sync = make_vector_env(spec(**fields, sync=True))
    assert isinstance(chunked, ChunkedAsyncVectorEnv) and isinstance(sync, SyncVectorEnv)
    assert chunked.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    a_obs, _ = chunked.reset(seed=11)
    b_obs, _ = sync.reset(seed=11)
    np.testing.assert_array_equal(a_obs, b_obs)
    rng = np.random.default_rng(0)
    episodes = 0
    for _ in range(80):
        actions = rng.integers(0, 2, size=5)
        a, b = chunked.step(actions), sync.step(actions)
        for x, y in zip(a[:4], b[:4], strict=True):
            np.testing.assert_array_equal(x, y)
        if "episode" in b[4]:  # infos merged across chunks, masks included
            np.testing.assert_array_equal(a[4]["_episode"], b[4]["_episode"])
            np.testing.assert_array_equal(a[4]["episode"]["r"], b[4]["episode"]["r"])
            episodes += int(b[4]["_episode"].sum())
    chunked.close()
    sync.close()
    assert episodes > 0


def test_chunked_async_worker_error_is_reported(user_env_dir: Path) -> None:
    bad = spec(
        name="Count",
        num_envs=3,
        entrypoint="envs_pkg.custom:BoomEnv",
        path=str(user_env_dir),
    )
    env = make_vector_env(bad)
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match="'Count': sub-env worker process .* raised "
                       "ValueError: boom in step") as info:
        env.step(np.zeros(3, dtype=np.int64))
    assert "Traceback" not in str(info.value) and "boom" in info.value.worker_traceback
    env.close()
    assert not any(process.is_alive() for process in env.processes)
