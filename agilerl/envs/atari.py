"""Atari (``ALE/*`` ids) through ``ale-py``, with the standard preprocessing.

``ale-py`` (the ``[atari]`` extra, with OpenCV for resizing; its ROMs ship in the
package) registers the ``ALE`` namespace when imported: :func:`require_ale` does that, or
says how to install it.

Preprocessing is chosen by the manifest's ``environment.config``, with the option names
(and defaults) of ale-py's own vector environment, ``ale_py.vector_env.AtariVectorEnv``:
``frameskip`` (4, with ``maxpool`` of the last two frames), ``grayscale`` (true),
``img_height`` / ``img_width`` (84), ``stack_num`` (4 frames stacked as channels),
``noop_max`` (30 random no-ops at reset), ``episodic_life`` (false: true ends an episode
at each life lost), ``reward_clipping`` (true: rewards become their sign),
``use_fire_reset`` (true), plus the environment's own settings
(``repeat_action_probability`` -- sticky actions, 0.25 for ``-v5`` ids --,
``full_action_space``, ``max_num_frames_per_episode``).

With 4 or more sub-envs and no wrappers the native ale-py vector env runs them (C++
threads); otherwise each sub-env is the single-env ``gymnasium.make(id, frameskip=1)``
wrapped by :func:`atari_preprocessing` with the same options, so the observations have the
same shape either way: ``(stack_num, img_height, img_width)`` uint8 frames in grey, or
``(img_height, img_width, 3 * stack_num)`` in colour (channels last).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, SupportsFloat, cast

import gymnasium
import numpy as np
from gymnasium import spaces

from agilerl.core.value_types import Observation

if TYPE_CHECKING:  # pragma: no cover
    from _typeshed import ConvertibleToInt

#: How to get Atari support.
ALE_INSTALL_HINT = "pip install 'agilerl[atari]'"


def is_atari_id(name: object) -> bool:
    """An id of the ``ALE`` namespace (``ALE/Breakout-v5``)."""
    return isinstance(name, str) and name.startswith("ALE/")


def require_ale() -> None:
    """Import ale-py so the ``ALE/*`` ids are registered; a clear ``ImportError`` when it is
    not installed."""
    try:
        import ale_py
    except ImportError as exc:
        raise ImportError(
            f"Atari environments (ALE/* ids) need the ale-py package, which is not "
            f"installed. Install it with: {ALE_INSTALL_HINT}",
            name="ale_py",
        ) from exc
    gymnasium.register_envs(ale_py)


@functools.lru_cache(maxsize=1)
def preprocessing_defaults() -> dict[str, int]:
    """Preprocessing option -> default, as ale-py's vector env defines them (ints and
    bools)."""
    require_ale()
    from ale_py.vector_env import AtariVectorEnv

    names = ("frameskip", "maxpool", "grayscale", "img_height", "img_width", "stack_num",
             "noop_max", "episodic_life", "reward_clipping", "use_fire_reset")
    params = inspect.signature(AtariVectorEnv.__init__).parameters
    return {name: params[name].default for name in names}


def split_config(
    config: Mapping[str, object],
) -> tuple[dict[str, ConvertibleToInt], dict[str, object]]:
    """``environment.config`` of an ALE id -> (preprocessing options, ``gymnasium.make``
    keyword arguments). The options are the user's values, read with ``int``/``bool`` by
    :func:`atari_preprocessing` (which says what a wrong one is)."""
    defaults = preprocessing_defaults()
    options = cast("dict[str, ConvertibleToInt]",
                   {k: v for k, v in config.items() if k in defaults})
    make_kwargs = {k: v for k, v in config.items() if k not in defaults}
    return options, make_kwargs


def make_atari_env(name: str, config: Mapping[str, object]) -> gymnasium.Env:
    """One preprocessed Atari env: ``gymnasium.make(name, frameskip=1, ...)`` wrapped by
    :func:`atari_preprocessing` with the options in ``config``."""
    require_ale()
    options, make_kwargs = split_config(config)
    make: Callable[..., gymnasium.Env] = gymnasium.make  # checks the user's keywords itself
    return atari_preprocessing(make(name, **{**make_kwargs, "frameskip": 1}), **options)


def atari_preprocessing(env: gymnasium.Env, **options: ConvertibleToInt) -> gymnasium.Env:
    """The standard preprocessing (module docstring) around a frameskip-1 ALE env."""
    unknown = sorted(set(options) - set(preprocessing_defaults()))
    if unknown:
        raise TypeError(f"unknown Atari preprocessing option(s): {', '.join(unknown)}")
    o = {**preprocessing_defaults(), **options}
    try:
        import cv2  # noqa: F401  (Gymnasium's Atari preprocessing resizes with OpenCV)
    except ImportError as exc:
        raise ImportError(
            f"Atari preprocessing needs OpenCV (opencv-python-headless), which is not "
            f"installed. Install it with: {ALE_INSTALL_HINT}", name="cv2") from exc
    if not o["maxpool"] and int(o["frameskip"]) > 1:
        raise ValueError("Atari preprocessing here always max-pools skipped frames; "
                         "leave maxpool at true (or use frameskip: 1)")
    if o["use_fire_reset"]:
        env = FireReset(env)
    env = gymnasium.wrappers.AtariPreprocessing(
        env, noop_max=int(o["noop_max"]), frame_skip=int(o["frameskip"]),
        screen_size=(int(o["img_width"]), int(o["img_height"])),
        terminal_on_life_loss=bool(o["episodic_life"]), grayscale_obs=bool(o["grayscale"]),
    )
    if o["reward_clipping"]:
        env = gymnasium.wrappers.TransformReward(env, _reward_sign)
    stack = int(o["stack_num"])
    if stack > 1:
        env = gymnasium.wrappers.FrameStackObservation(env, stack)
        if not o["grayscale"]:
            env = ColourStackAsChannels(env)
    elif o["grayscale"]:
        env = gymnasium.wrappers.ReshapeObservation(
            env, (1, *env.observation_space.shape))  # type: ignore[misc]
    return env


def _reward_sign(reward: SupportsFloat) -> float:
    return float(np.sign(float(reward)))


class FoldedSeeds(gymnasium.vector.VectorWrapper):
    """ale-py's native vector env takes 32-bit seeds only (sub-env ``i`` gets ``seed + i``):
    larger seeds, as the trainers derive them, are folded into that range (a fixed map,
    so a seed still names one reset)."""

    def reset(self, *, seed: int | None = None, options: dict[str, object] | None = None
              ) -> tuple[Observation, dict[str, object]]:
        if isinstance(seed, (int, np.integer)):
            seed = int(seed) % (2**31 - 1 - self.num_envs)
        return self.env.reset(seed=seed, options=options)


class FireReset(gymnasium.Wrapper):
    """Press FIRE after every reset in games that need it to start (Breakout)."""

    def reset(self, *, seed: int | None = None, options: dict[str, object] | None = None
              ) -> tuple[Observation, dict[str, object]]:
        obs, info = self.env.reset(seed=seed, options=options)
        meanings = self.env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
        if len(meanings) > 1 and meanings[1] == "FIRE":
            obs, _, terminated, truncated, info = self.env.step(1)
            if terminated or truncated:
                obs, info = self.env.reset(seed=seed, options=options)
        return obs, info


class ColourStackAsChannels(gymnasium.ObservationWrapper):
    """``(stack, H, W, 3)`` colour frames -> ``(H, W, 3 * stack)`` (channels last)."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        stack, h, w, c = env.observation_space.shape  # type: ignore[misc]
        self.observation_space = spaces.Box(0, 255, (h, w, c * stack), dtype=np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        frames = np.asarray(observation)
        return np.ascontiguousarray(frames.transpose(1, 2, 0, 3).reshape(
            self.observation_space.shape))
