"""Custom entrypoint resolution (manifest spec §3.2) and wrapper forms."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from agilerl.envs import make_single_env, resolve_entrypoint, resolve_wrapper
from agilerl.envs.wrappers import apply_wrappers


@pytest.mark.parametrize(
    "ref",
    [
        "envs_pkg/custom.py:make_count_env",
        "envs_pkg/custom:make_count_env",
        "envs_pkg.custom:make_count_env",
    ],
)
def test_file_candidates_relative_to_path(user_env_dir: Path, ref: str) -> None:
    factory = resolve_entrypoint(ref, path=str(user_env_dir))
    env = factory(limit=5)
    assert env.limit == 5


def test_relative_to_cwd_when_no_path(user_env_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(user_env_dir)
    assert resolve_entrypoint("envs_pkg.custom:CountEnv")().limit == 3


def test_absolute_file(user_env_dir: Path) -> None:
    ref = f"{user_env_dir / 'envs_pkg' / 'custom.py'}:CountEnv"
    assert resolve_entrypoint(ref)(limit=2).limit == 2


def test_each_resolution_executes_a_fresh_module(user_env_dir: Path) -> None:
    first = resolve_entrypoint("envs_pkg.custom:CountEnv", path=user_env_dir)
    second = resolve_entrypoint("envs_pkg.custom:CountEnv", path=user_env_dir)
    assert first is not second


def test_importable_module() -> None:
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    assert resolve_entrypoint("gymnasium.envs.classic_control.cartpole:CartPoleEnv") is CartPoleEnv


def test_split_at_last_colon(user_env_dir: Path) -> None:
    # A Windows-style drive prefix would contain a colon; the attribute follows the last one.
    with pytest.raises(ModuleNotFoundError, match="Could not resolve module 'a:b'"):
        resolve_entrypoint("a:b:CountEnv", path=user_env_dir)


@pytest.mark.parametrize("ref", ["no_colon_here", ":CountEnv", "envs_pkg.custom:"])
def test_invalid_format(ref: str) -> None:
    with pytest.raises(ValueError, match="Invalid entrypoint format"):
        resolve_entrypoint(ref)


def test_missing_module(user_env_dir: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="Could not resolve module"):
        resolve_entrypoint("no_such_pkg.nowhere:Env", path=user_env_dir)


def test_missing_attribute(user_env_dir: Path) -> None:
    with pytest.raises(AttributeError, match="Module 'envs_pkg.custom' does not define 'Nope'"):
        resolve_entrypoint("envs_pkg.custom:Nope", path=user_env_dir)


def test_non_callable(user_env_dir: Path) -> None:
    with pytest.raises(TypeError, match="resolved to non-callable object."):
        resolve_entrypoint("envs_pkg.custom:NOT_CALLABLE", path=user_env_dir)


def test_error_inside_user_module_is_not_masked(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import definitely_missing_dependency_xyz\n")
    with pytest.raises(ModuleNotFoundError, match="definitely_missing_dependency_xyz"):
        resolve_entrypoint("broken:Env", path=tmp_path)


# --------------------------------------------------------------------------- wrappers


def test_wrapper_forms_applied_in_order(user_env_dir: Path) -> None:
    def tag_fn(env: gym.Env) -> gym.Env:
        env.unwrapped.tags = [*getattr(env.unwrapped, "tags", []), "fn"]
        return env

    spec = _spec(
        entrypoint="envs_pkg.custom:CountEnv",
        path=str(user_env_dir),
        wrappers=[
            tag_fn,
            ["envs_pkg.custom:Tag", {"tag": "pair"}],
            "envs_pkg.custom:Tag",
            ("gymnasium.wrappers.TimeLimit", {"max_episode_steps": 7}),
            "gymnasium.wrappers.RecordEpisodeStatistics",
        ],
    )
    env = make_single_env(spec)
    assert env.unwrapped.tags == ["fn", "pair", "x"]
    assert isinstance(env, gym.wrappers.RecordEpisodeStatistics)
    assert isinstance(env.env, gym.wrappers.TimeLimit)
    assert env.env._max_episode_steps == 7


def test_plain_string_wrapper_rejected() -> None:
    with pytest.raises(ValueError, match="Invalid wrapper 'TimeLimit'"):
        resolve_wrapper("TimeLimit")


def test_bad_pair_rejected() -> None:
    with pytest.raises(ValueError, match="must be a pair"):
        resolve_wrapper(["gymnasium.wrappers.TimeLimit", 5])


def test_dotted_wrapper_errors() -> None:
    with pytest.raises(ModuleNotFoundError, match="Could not resolve module 'nope_pkg'"):
        resolve_wrapper("nope_pkg.Wrapper")
    with pytest.raises(AttributeError, match="does not define 'Nope'"):
        resolve_wrapper("gymnasium.wrappers.Nope")


def test_apply_wrappers_passes_kwargs() -> None:
    env = apply_wrappers(
        gym.make("CartPole-v1"),
        [resolve_wrapper(("gymnasium.wrappers.TimeLimit", {"max_episode_steps": 3}))],
    )
    env.reset(seed=0)
    truncated = False
    for _ in range(3):
        _, _, _, truncated, _ = env.step(0)
    assert truncated


def _spec(**fields: object):  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    fields.setdefault("name", "Custom")
    fields.setdefault("num_envs", 1)
    return SimpleNamespace(**fields)


def test_user_file_can_import_a_sibling(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "helpers_for_env_xyz.py").write_text("LIMIT = 11\n")
    (tmp_path / "proj" / "env_file.py").write_text(
        "import helpers_for_env_xyz\n\ndef make():\n    return helpers_for_env_xyz.LIMIT\n"
    )
    assert resolve_entrypoint("proj/env_file.py:make", path=tmp_path)() == 11
    assert str(tmp_path / "proj") not in __import__("sys").path
