"""``wrappers`` given from Python as callables and ``(callable, kwargs)`` pairs, as the
reference allows: kept, validated beside the string forms, applied in order, dumped as
import paths."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
from pydantic import ValidationError

from agilerl.models import DQNSpec, GymEnvSpec, PzEnvSpec
from agilerl.training.trainer import LocalTrainer

CALLS: list[tuple[str, dict[str, Any]]] = []


def tag(env: gym.Env, **kwargs: Any) -> gym.Env:
    CALLS.append(("tag", kwargs))
    return env


class Marker(gym.Wrapper):
    def __init__(self, env: gym.Env, label: str = "none") -> None:
        super().__init__(env)
        self.label = label
        CALLS.append(("Marker", {"label": label}))


def test_callables_and_pairs_are_kept_beside_string_forms() -> None:
    spec = GymEnvSpec(name="CartPole-v1", wrappers=[
        Marker, (tag, {"k": 1}), "gymnasium.wrappers.RecordEpisodeStatistics",
        ["gymnasium.wrappers.TimeLimit", {"max_episode_steps": 5}]])
    assert spec.wrappers[0] is Marker and spec.wrappers[1] == (tag, {"k": 1})
    assert spec.wrappers[2:] == ["gymnasium.wrappers.RecordEpisodeStatistics",
                                 ["gymnasium.wrappers.TimeLimit", {"max_episode_steps": 5}]]
    assert spec.model_dump()["wrappers"][0] is Marker
    assert spec.model_dump(mode="json")["wrappers"][:2] == [
        f"{__name__}.Marker", [f"{__name__}.tag", {"k": 1}]]


def test_pettingzoo_spec_takes_them_too() -> None:
    assert PzEnvSpec(name="mpe2.simple_spread_v3", wrappers=[(tag, {})]).wrappers == [(tag, {})]


@pytest.mark.parametrize("bad", [[(tag, 3)], [Marker, ""], [Marker, 3]])
def test_bad_entries_are_still_refused(bad: list[Any]) -> None:
    with pytest.raises(ValidationError):
        GymEnvSpec(name="CartPole-v1", wrappers=bad)


def test_the_trainer_applies_them_in_order() -> None:
    CALLS.clear()
    spec = GymEnvSpec(name="CartPole-v1", num_envs=2, sync=True,
                      wrappers=[(Marker, {"label": "a"}), (tag, {"k": 1})])
    LocalTrainer(DQNSpec(), spec, device="cpu")
    assert CALLS[:2] == [("Marker", {"label": "a"}), ("tag", {"k": 1})]
    assert len([c for c in CALLS if c[0] == "Marker"]) >= 2  # every sub-env


# ------------------------------------------------------------------ construct_custom_env_fn

def _module(folder, name: str, source: str) -> None:
    (folder / f"{name}.py").write_text(source)


def test_construct_custom_env_fn_applies_config_then_wrappers(tmp_path) -> None:
    _module(tmp_path, "compat_custom_env", "class Env:\n    def __init__(self, value=0):\n"
                                           "        self.value = value\n")
    order: list[str] = []

    def first(env):
        order.append("first")
        env.trace = ["first"]
        return env

    def second(env, tag):
        order.append("second")
        env.trace.append(tag)
        return env

    make_env = GymEnvSpec.construct_custom_env_fn(
        entrypoint="compat_custom_env:Env", path=str(tmp_path), config={"value": 12},
        wrappers=[first, (second, {"tag": "two"})])
    env = make_env()
    assert env.value == 12 and env.trace == ["first", "two"] and order == ["first", "second"]


def test_construct_custom_env_fn_resolves_from_the_working_directory(tmp_path,
                                                                      monkeypatch) -> None:
    _module(tmp_path, "compat_cwd_env", "class Env:\n    def __init__(self, value=3):\n"
                                        "        self.value = value\n")
    monkeypatch.chdir(tmp_path)
    assert GymEnvSpec.construct_custom_env_fn("compat_cwd_env:Env", config={"value": 9})().value \
        == 9


@pytest.mark.parametrize(("entrypoint", "error", "message"), [
    ("invalid-entrypoint", ValueError, "Invalid entrypoint format"),
    ("compat_does_not_exist:Env", ModuleNotFoundError, "Could not resolve module"),
    ("compat_missing_target:Wanted", AttributeError, "does not define 'Wanted'"),
])
def test_construct_custom_env_fn_raises_when_called(tmp_path, entrypoint, error, message) -> None:
    _module(tmp_path, "compat_missing_target", "class Other:\n    pass\n")
    make_env = GymEnvSpec.construct_custom_env_fn(entrypoint, path=str(tmp_path))
    with pytest.raises(error, match=message):
        make_env()


def test_pettingzoo_construct_custom_env_fn(tmp_path) -> None:
    _module(tmp_path, "compat_pz_env", "class Env:\n    def __init__(self, n=1):\n"
                                       "        self.n = n\n")
    make_env = PzEnvSpec.construct_custom_env_fn("compat_pz_env:Env", path=str(tmp_path),
                                                 config={"n": 4}, wrappers=[(tag, {})])
    assert make_env().n == 4
