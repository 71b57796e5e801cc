"""Dotted overrides parsing and the target_score early-stop rule."""

from __future__ import annotations

import math

import pytest

from agilerl.training.early_stop import EarlyStopping
from agilerl.training.overrides import (
    OverrideError,
    apply_overrides,
    override_for_path,
    parse_override,
    parse_overrides,
)


def test_values_are_yaml_scalars():
    values = {o.dotted: o.value for o in parse_overrides(
        ["training.pop_size=8", "algorithm.double=true", "training.eval_steps=",
         "network.encoder_config.hidden_size=[32, 32]", "replay_buffer.max_size=1_000"])}
    assert values == {"training.pop_size": 8, "algorithm.double": True,
                      "training.eval_steps": None,
                      "network.encoder_config.hidden_size": [32, 32],
                      "replay_buffer.max_size": 1000}


@pytest.mark.parametrize("text", ["training.pop_size", "=3", "training..pop_size=2",
                                  "algorithm.lr=[1,"])
def test_malformed_override_names_itself(text):
    with pytest.raises(OverrideError, match="override"):
        parse_override(text)


def test_apply_does_not_mutate_and_creates_sections():
    data = {"training": {"pop_size": 2}, "network": {"encoder_config": {"hidden_size": [64]}}}
    out = apply_overrides(data, parse_overrides(
        ["training.pop_size=4", "mutation.mutation_sd=0.2",
         "network.encoder_config.hidden_size.0=16"]))
    assert out["training"]["pop_size"] == 4 and data["training"]["pop_size"] == 2
    assert out["mutation"] == {"mutation_sd": 0.2}
    assert out["network"]["encoder_config"]["hidden_size"] == [16]
    with pytest.raises(OverrideError, match="index 0..0"):
        apply_overrides(data, parse_overrides(["network.encoder_config.hidden_size.3=1"]))
    with pytest.raises(OverrideError, match="not a mapping"):
        apply_overrides(data, parse_overrides(["training.pop_size.x=1"]))


def test_override_for_error_path():
    ovs = parse_overrides(["training.pop_size=0", "algorithm.lr=-1"])
    assert override_for_path("algorithm.lr", ovs).text == "algorithm.lr=-1"
    assert override_for_path("training", ovs).text == "training.pop_size=0"
    assert override_for_path("network", ovs) is None


def test_early_stop_needs_window_of_good_generations():
    stop = EarlyStopping(target_score=475.0, window=3)
    for best in ([500.0, 10.0], [480.0], [400.0], [490.0], [495.0]):
        stop.record(best)
        assert not stop.should_stop()
    assert stop.recent_mean == pytest.approx((400 + 490 + 495) / 3)
    stop.record([500.0])
    assert stop.should_stop()  # 490, 495, 500


def test_early_stop_never_without_target_and_ignores_nan():
    stop = EarlyStopping(target_score=None, window=1)
    stop.record([1e9])
    assert not stop.should_stop()
    stop = EarlyStopping(target_score=1.0, window=1)
    stop.record([math.nan, math.inf])
    assert not stop.should_stop()
    stop.record([math.nan, 2.0])
    assert stop.should_stop()
