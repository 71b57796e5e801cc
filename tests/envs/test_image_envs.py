"""Image environments: the shipped DummyImage-v0 probe (known to train and validate) and
Atari through ale-py with its preprocessing chosen by ``environment.config``."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from agilerl.envs import make_vector_env, vector_mode
from agilerl.envs.image_probe import DummyImageEnv


def _spec(name: str, num_envs: int = 2, sync: bool = True, config=None, wrappers=None):
    return SimpleNamespace(name=name, num_envs=num_envs, sync=sync, config=config,
                           wrappers=wrappers, entrypoint=None, path=None)


def test_dummy_image_rewards_naming_the_bright_half():
    env = DummyImageEnv()
    obs, _ = env.reset(seed=0)
    total = 0.0
    for _ in range(DummyImageEnv.episode_steps):
        assert obs.shape == (3, 32, 32) and obs.dtype == np.uint8
        bright_right = obs[:, :, 16:].mean() > obs[:, :, :16].mean()
        obs, reward, terminated, _, _ = env.step(int(bright_right))
        total += reward
    assert total == DummyImageEnv.episode_steps and terminated


def test_dummy_image_is_registered_for_training():
    env = make_vector_env(_spec("DummyImage-v0", 3), seed=0)
    try:
        assert env.single_observation_space.shape == (3, 32, 32)
    finally:
        env.close()


def test_the_manifest_check_knows_shipped_ids_without_torch():
    code = ("import sys\nfrom agilerl.models.env_checks import check_gym_id\n"
            "print(check_gym_id('DummyImage-v0'), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["None", "False"]


# ---------------------------------------------------------------------------- Atari
ale_py = pytest.importorskip("ale_py")


@pytest.mark.parametrize(("num_envs", "sync", "mode"),
                         [(2, True, "sync"), (4, True, "native")])
def test_atari_frames_are_preprocessed_the_same_natively_and_per_env(num_envs, sync, mode):
    spec = _spec("ALE/Breakout-v5", num_envs, sync)
    assert vector_mode(spec) == mode
    env = make_vector_env(spec, seed=0)
    try:
        assert env.single_observation_space.shape == (4, 84, 84)  # stacked grey 84x84
        obs, _ = env.reset(seed=0)
        obs, *_ = env.step(env.action_space.sample())
        assert obs.shape == (num_envs, 4, 84, 84) and obs.dtype == np.uint8
    finally:
        env.close()


def test_atari_preprocessing_options_come_from_the_manifest_config():
    config = {"grayscale": False, "stack_num": 2, "img_height": 64, "img_width": 48,
              "frameskip": 2, "repeat_action_probability": 0.0}
    env = make_vector_env(_spec("ALE/Pong-v5", config=config), seed=0)
    try:
        assert env.single_observation_space.shape == (64, 48, 6)  # colour, channels last
    finally:
        env.close()
    with pytest.raises(TypeError, match="img_size"):
        from agilerl.envs.atari import atari_preprocessing

        atari_preprocessing(None, img_size=3)  # type: ignore[arg-type]


def test_a_missing_ale_py_says_which_extra_to_install(monkeypatch):
    from agilerl.core.errors import missing_extra
    from agilerl.envs.atari import require_ale

    monkeypatch.setitem(sys.modules, "ale_py", None)
    with pytest.raises(ImportError, match=r"agilerl\[atari\]") as caught:
        require_ale()
    extra = missing_extra(caught.value, "environment 'ALE/Breakout-v5'")
    assert extra is not None and "pip install 'agilerl[atari]'" in str(extra)


def test_the_manifest_check_knows_ale_ids_when_ale_py_is_installed():
    from agilerl.models.env_checks import check_gym_id

    assert check_gym_id("ALE/Breakout-v5") is None
    typo = check_gym_id("ALE/Breakoutt-v5")
    assert typo is not None and typo.severity == "error"
    assert typo.suggestion == "ALE/Breakout-v5"


def test_the_native_atari_env_takes_the_large_seeds_trainers_derive():
    env = make_vector_env(_spec("ALE/Breakout-v5", 4), seed=2**40 + 7)
    try:
        first, _ = env.reset(seed=2**40 + 7)
        again, _ = env.reset(seed=2**40 + 7)
        np.testing.assert_array_equal(first, again)
    finally:
        env.close()
