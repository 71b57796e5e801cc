"""The ``network`` section and network specs as the reference's public API has them: a
section may give only ``head_config`` or only ``encoder_config`` (the other takes its
default), ``algorithm_spec.net_config`` is a network spec object once a trainer is built,
and an encoder's ``model_dump()`` is its keyword arguments."""

from __future__ import annotations

from typing import Any

import pytest

from agilerl.models import (
    CnnSpec,
    ManifestError,
    MlpSpec,
    NetworkSpec,
    PPOSpec,
    SimbaSpec,
    StochasticActorSpec,
    TrainingManifest,
)
from agilerl.models.networks import normalise_network
from agilerl.training.trainer import LocalTrainer

from .conftest import tiny

HEAD_DEFAULT = [64]
MLP_SEED = [64, 64]


def _ppo(network: dict[str, Any] | None) -> dict[str, Any]:
    return tiny(algorithm={"name": "PPO", "learn_step": 64}, replay_buffer=None,
                network=network, training={"max_steps": 200, "evo_steps": 100, "pop_size": 1})


def _built(network: dict[str, Any] | None) -> LocalTrainer:
    return LocalTrainer.from_manifest(_ppo(network), device="cpu")


def test_head_only_network_infers_encoder_with_spec_defaults() -> None:
    trainer = _built({"latent_dim": 32, "head_config": {"hidden_size": [32]}})
    net = trainer.algorithm_spec.net_config
    assert isinstance(net, StochasticActorSpec)
    assert net.encoder_config.arch == "mlp" and net.encoder_config.hidden_size == MLP_SEED
    # optional encoder fields take the MlpSpec defaults (the reference's drift guard)
    assert net.encoder_config.max_mlp_nodes == 256 and net.encoder_config.max_hidden_layers == 6
    assert net.head_config.hidden_size == [32] and net.latent_dim == 32


def test_encoder_only_network_takes_the_default_head() -> None:
    manifest = TrainingManifest.get_validated(
        _ppo({"encoder_config": {"hidden_size": [32]}}), mode="python")
    # deferred (no arch): left as written until the trainer knows the observation space
    assert manifest.algorithm.net_config == {"encoder_config": {"hidden_size": [32]}}
    trainer = LocalTrainer.from_manifest(manifest, device="cpu")
    net = trainer.algorithm_spec.net_config
    assert net.encoder_config.hidden_size == [32] and net.head_config.hidden_size == HEAD_DEFAULT
    assert trainer.to_manifest()["network"]["head_config"]["hidden_size"] == HEAD_DEFAULT


def test_eager_encoder_only_network_is_a_spec_with_the_default_head() -> None:
    manifest = TrainingManifest.get_validated(
        _ppo({"encoder_config": {"arch": "mlp", "hidden_size": [32]}}), mode="python")
    net = manifest.algorithm.net_config
    assert isinstance(net, StochasticActorSpec)
    assert net.head_config.hidden_size == HEAD_DEFAULT
    assert manifest.network["head_config"]["hidden_size"] == HEAD_DEFAULT


def test_arch_without_encoder_config_gets_that_archs_default_encoder() -> None:
    net = TrainingManifest.get_validated(
        _ppo({"arch": "mlp", "head_config": {"hidden_size": [16]}}), mode="python"
    ).algorithm.net_config
    assert net.encoder_config.arch == "mlp" and net.encoder_config.hidden_size == MLP_SEED
    assert net.head_config.hidden_size == [16]


def test_the_built_agent_uses_the_head_written() -> None:
    trainer = _built({"latent_dim": 16, "head_config": {"hidden_size": [24]}})
    import torch

    agent = trainer.population[0]
    nets = [v for v in vars(agent).values() if isinstance(v, torch.nn.Module)]
    sizes = [m.out_features for net in nets for m in net.modules()
             if isinstance(m, torch.nn.Linear)]
    assert 24 in sizes and 16 in sizes


def test_a_bad_encoder_is_reported_without_a_head() -> None:
    with pytest.raises(ManifestError) as info:
        TrainingManifest.get_validated(_ppo({"encoder_config": {"hidden_size": [1]}}))
    assert [i.path for i in info.value.issues] == ["network.encoder_config.hidden_size[0]"]


def test_python_dict_net_config_becomes_a_spec_object() -> None:
    trainer = LocalTrainer(PPOSpec(learn_step=64, net_config={"head_config": {"hidden_size": [8]}}),
                           "CartPole-v1", device="cpu")
    assert isinstance(trainer.algorithm_spec.net_config, StochasticActorSpec)
    assert trainer.algorithm_spec.net_config.head_config.hidden_size == [8]


def test_network_spec_head_defaults_and_encoder_required() -> None:
    assert NetworkSpec(encoder_config=MlpSpec(hidden_size=[8])).head_config.hidden_size == [64]
    with pytest.raises(ValueError, match="encoder_config"):
        NetworkSpec(head_config=MlpSpec(hidden_size=[8]))


def test_top_level_arch_moves_into_encoder_config() -> None:
    # as the reference's normaliser: a pure move, defaults come later
    assert normalise_network({"arch": "mlp", "latent_dim": 64})["encoder_config"] == {"arch": "mlp"}
    written = {"encoder_config": {"hidden_size": [64]}, "head_config": {"hidden_size": [64]}}
    assert normalise_network(written) == written


# ------------------------------------------------------------------ model_dump of encoders

def test_mlp_dump_leaves_out_a_null_output_activation_and_the_arch_tag() -> None:
    dumped = MlpSpec(hidden_size=[64]).model_dump()
    assert "output_activation" not in dumped and "arch" not in dumped
    assert dumped["hidden_size"] == [64] and dumped["layer_norm"] is True
    assert MlpSpec(hidden_size=[64], output_activation="Tanh").model_dump()[
        "output_activation"] == "Tanh"
    assert MlpSpec.model_validate(dumped) == MlpSpec(hidden_size=[64])


def test_other_encoders_leave_out_only_the_arch_tag() -> None:
    simba = SimbaSpec(hidden_size=64, num_blocks=2).model_dump()
    assert "arch" not in simba and simba["output_activation"] is None
    assert "arch" not in CnnSpec(channel_size=[8], kernel_size=[3], stride_size=[1]).model_dump()
    assert MlpSpec(hidden_size=[8]).model_dump(include={"arch"}) == {"arch": "mlp"}


def test_a_network_dump_keeps_each_encoders_tag() -> None:
    net = NetworkSpec(encoder_config=CnnSpec(channel_size=[8], kernel_size=[3], stride_size=[1]))
    dumped = net.model_dump()
    assert dumped["encoder_config"]["arch"] == "cnn"
    assert NetworkSpec.model_validate(dumped) == net
