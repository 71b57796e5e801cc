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
