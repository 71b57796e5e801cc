"""A manifest ``network`` without an ``arch``: the encoder is inferred from the observation
space and seeded from the one table both the manifest checker and the trainer use."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.models import DEFERRED_ENCODER_SEEDS
from agilerl.training.networks import resolve_net_config

FLAT = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
IMAGE = spaces.Box(0, 255, shape=(3, 8, 8), dtype=np.uint8)
DICT = spaces.Dict({"a": FLAT})


def test_seed_table_is_the_spec_table():
    # spec manifest.md §5.3
    assert DEFERRED_ENCODER_SEEDS["mlp"] == {"hidden_size": [64, 64]}
    assert DEFERRED_ENCODER_SEEDS["cnn"] == {
        "channel_size": [32, 32], "kernel_size": [3, 3], "stride_size": [1, 1]}
    assert DEFERRED_ENCODER_SEEDS["simba"] == {"hidden_size": 128, "num_blocks": 2}
    assert DEFERRED_ENCODER_SEEDS["lstm"] == {"hidden_state_size": 128, "num_layers": 2}


@pytest.mark.parametrize(
    ("space", "extra", "recurrent", "arch"),
    [
        (FLAT, {}, False, "mlp"),
        (IMAGE, {}, False, "cnn"),
        (DICT, {}, False, "multiinput"),
        (FLAT, {"simba": True}, True, "simba"),  # simba beats recurrent
        (FLAT, {}, True, "lstm"),
        (IMAGE, {"simba": True}, False, "cnn"),  # the space beats the flags
    ],
)
def test_arch_is_inferred_and_seeded(space, extra, recurrent, arch):
    resolved = resolve_net_config({"latent_dim": 16, **extra}, space, recurrent=recurrent)
    assert resolved["encoder_config"] == {**DEFERRED_ENCODER_SEEDS[arch], "arch": arch}


def test_user_keys_overlay_the_seed_and_the_table_is_not_changed():
    config = {"encoder_config": {"hidden_size": [8]}}
    resolved = resolve_net_config(config, FLAT)
    assert resolved["encoder_config"] == {"hidden_size": [8], "arch": "mlp"}
    assert config == {"encoder_config": {"hidden_size": [8]}}  # input untouched
    resolved = resolve_net_config({}, FLAT)
    resolved["encoder_config"]["hidden_size"].append(1)
    assert DEFERRED_ENCODER_SEEDS["mlp"] == {"hidden_size": [64, 64]}


def test_known_arch_and_no_network_are_left_alone():
    assert resolve_net_config(None, FLAT) is None
    eager = {"encoder_config": {"arch": "mlp", "hidden_size": [8]}}
    assert resolve_net_config(eager, IMAGE) is eager
