"""Public helpers of ``agilerl.models.networks`` the reference exposes, and the wording of
the encoder rules, whose fragments code written against the reference matches on."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.models.networks import (
    CnnSpec,
    LstmSpec,
    MlpSpec,
    MultiInputSpec,
    SimbaSpec,
    encoder_spec_for_arch,
    infer_encoder_arch,
    min_max_validator,
    network_arch_is_resolvable,
    normalize_manifest_network,
)

VECTOR = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
IMAGE = spaces.Box(0, 255, shape=(3, 32, 32), dtype=np.uint8)
DICT = spaces.Dict({"a": spaces.Box(-1.0, 1.0, shape=(2,))})
TUPLE = spaces.Tuple((spaces.Box(-1.0, 1.0, shape=(2,)), spaces.Discrete(3)))


@pytest.mark.parametrize(("space", "recurrent", "simba", "expected"), [
    (DICT, False, False, "multiinput"), (TUPLE, False, False, "multiinput"),
    (IMAGE, False, False, "cnn"), (VECTOR, False, False, "mlp"), (VECTOR, True, False, "lstm"),
    (VECTOR, False, True, "simba"), (VECTOR, True, True, "simba"),
    (DICT, True, True, "multiinput"), (IMAGE, True, True, "cnn"),
])
def test_infer_encoder_arch(space, recurrent, simba, expected) -> None:
    assert infer_encoder_arch(space, recurrent=recurrent, simba=simba) == expected


@pytest.mark.parametrize(("arch", "cls"), [
    ("mlp", MlpSpec), ("cnn", CnnSpec), ("lstm", LstmSpec), ("simba", SimbaSpec),
    ("multiinput", MultiInputSpec)])
def test_encoder_spec_for_arch(arch, cls) -> None:
    assert encoder_spec_for_arch(arch) is cls


def test_encoder_spec_for_unknown_arch() -> None:
    with pytest.raises(ValueError, match="Unknown encoder arch"):
        encoder_spec_for_arch("bogus")


@pytest.mark.parametrize("value", ["not-a-dict", None, 42, ["arch"]])
def test_non_mappings_pass_through(value) -> None:
    assert network_arch_is_resolvable(value) is False
    assert normalize_manifest_network(value) == value


def test_normalize_manifest_network_defers_without_arch() -> None:
    data = {"encoder_config": {"hidden_size": [64]}, "head_config": {"hidden_size": [64]}}
    assert normalize_manifest_network(data) == data
    moved = normalize_manifest_network({"arch": "mlp", "head_config": {"hidden_size": [64]}})
    assert moved["encoder_config"] == {"arch": "mlp"}


def test_min_max_validator() -> None:
    model = MlpSpec(hidden_size=[64])
    assert min_max_validator("min_mlp_nodes", "max_mlp_nodes")(model) is model
    model.min_mlp_nodes, model.max_mlp_nodes = 999, 8
    with pytest.raises(ValueError, match="must be less than or equal to"):
        min_max_validator("min_mlp_nodes", "max_mlp_nodes")(model)


@pytest.mark.parametrize(("build", "fragment"), [
    (lambda: MlpSpec(hidden_size=[64], min_hidden_layers=3),
     "hidden_size must be greater than or equal to min_hidden_layers"),
    (lambda: MlpSpec(hidden_size=[32] * 8, max_hidden_layers=3),
     "hidden_size must be less than or equal to max_hidden_layers"),
    (lambda: MlpSpec(hidden_size=[2], min_mlp_nodes=8),
     "hidden_size elements must be greater than or equal to min_mlp_nodes"),
    (lambda: MlpSpec(hidden_size=[512], max_mlp_nodes=256),
     "hidden_size elements must be less than or equal to max_mlp_nodes"),
    (lambda: SimbaSpec(hidden_size=4, num_blocks=1, min_mlp_nodes=8),
     "hidden_size must be greater than or equal to min_mlp_nodes"),
    (lambda: SimbaSpec(hidden_size=512, num_blocks=1, max_mlp_nodes=256),
     "hidden_size must be less than or equal to max_mlp_nodes"),
    (lambda: CnnSpec(channel_size=[2], kernel_size=[3], stride_size=[1], min_channel_size=8),
     "channel_size must be greater than or equal to min_channel_size"),
    (lambda: CnnSpec(channel_size=[512], kernel_size=[3], stride_size=[1], max_channel_size=256),
     "channel_size must be less than or equal to max_channel_size"),
    (lambda: CnnSpec(channel_size=[16] * 8, kernel_size=[3] * 8, stride_size=[1] * 8,
                     max_hidden_layers=3), "hidden_layers must be between"),
    (lambda: CnnSpec(channel_size=[16, 32], kernel_size=[3], stride_size=[1, 1]),
     "must have the same length"),
])
def test_encoder_rules_use_the_reference_wording(build, fragment) -> None:
    with pytest.raises(ValueError, match=fragment):
        build()
