"""``preserves_function(plan)`` says exactly which mutations leave a network computing what
it computed (mutation keeps a member's lagging targets and Adam's moments after those, and
restarts them after the others): for every plan drawn, the claim is checked against the
outputs before and after, both ways."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.modules.encoder import ARCH_OPS
from agilerl.modules.encoders import encoder_architecture, encoder_from_architecture
from agilerl.modules.lstm import LSTMEncoder, lstm_arch
from agilerl.networks.config import normalise_net_config
from agilerl.networks.q_network import QNetwork

OPS = (*ARCH_OPS, "activation")
ACTIVATIONS = ["ReLU", "Tanh", "ELU"]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, atol=1e-4, rtol=1e-4)


def _encoder_plan(activation: str) -> Callable[[Any, str, Any], Any]:
    """An encoder's plans: its own draws, and the network's activation plan (which an
    encoder without a hidden activation turns into a copy)."""
    return lambda module, op, rng: ({"op": op, "activation": activation, "seed": 0}
                                    if op == "activation" else module.draw_plan(op, rng, []))


def _check_claims(module: Any, draw: Callable[[Any, str, Any], Any],
                  outputs: Callable[[Any], torch.Tensor]) -> dict[bool, set[str]]:
    """Draw plans of every op (up to 6 each) from ``module`` and check each claim; returns
    the ops seen per claim."""
    rng = np.random.default_rng(0)
    seen: dict[bool, set[str]] = {True: set(), False: set()}
    with torch.no_grad():
        for op in OPS:
            for _ in range(6):
                plan = draw(module, op, rng)
                if plan is None:
                    break
                claim = module.preserves_function(plan)
                assert _same(outputs(module.mutated(plan)), outputs(module)) == claim, plan
                seen[claim].add(op)
    return seen


@pytest.mark.parametrize("activation", ["ReLU", "Tanh"])
@pytest.mark.parametrize("layer_norm", [False, True])
def test_an_mlp_network_says_which_mutations_keep_its_function(layer_norm, activation):
    mlp = {"hidden_size": [24, 24], "layer_norm": layer_norm, "activation": activation,
           "max_hidden_layers": 3, "min_mlp_nodes": 8}
    config = normalise_net_config({"latent_dim": 16, "encoder_config": mlp,
                                   "head_config": dict(mlp)})
    net = QNetwork.build(spaces.Box(-1.0, 1.0, (5,), np.float32), 3, config,
                         torch.Generator().manual_seed(0))
    with torch.no_grad():  # weights away from their start, as after some training
        for param in net.parameters():
            param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(1)) * 0.3)
    x = torch.randn(32, 5, generator=torch.Generator().manual_seed(2))
    seen = _check_claims(net, lambda m, op, rng: m.draw_plan(op, rng, ACTIVATIONS),
                         lambda m: m(x))
    kept_layer = not layer_norm and activation == "ReLU"
    assert seen[True] == ({"add_nodes", "add_layer"} if kept_layer else {"add_nodes"}), seen
    assert seen[False] >= {"remove_nodes", "remove_layer", "activation"}, seen


def test_a_simba_encoder_says_which_mutations_keep_its_function():
    config = normalise_net_config({"latent_dim": 16, "simba": True,
                                   "encoder_config": {"hidden_size": 32, "num_blocks": 2},
                                   "head_config": {"hidden_size": [16]}},
                                  "DeterministicActorSpec")
    space = spaces.Box(-1.0, 1.0, (5,), np.float32)
    encoder = encoder_from_architecture(encoder_architecture(config, space),
                                        torch.Generator().manual_seed(0))
    x = torch.rand(8, 5, generator=torch.Generator().manual_seed(1))
    seen = _check_claims(encoder, _encoder_plan("Tanh"), lambda m: m(x))
    # SimBa has no hidden activation: an activation plan is a copy
    assert seen == {True: {"add_layer", "activation"},
                    False: {"remove_layer", "add_nodes", "remove_nodes"}}, seen


def test_an_lstm_encoder_says_which_mutations_keep_its_function():
    spec = {"hidden_state_size": 16, "num_layers": 2, "dropout": 0.0,
            "min_hidden_state_size": 8, "max_hidden_state_size": 64, "min_layers": 1,
            "max_layers": 3}
    encoder = LSTMEncoder(lstm_arch(spec, 5, 8, "Tanh"), torch.Generator().manual_seed(0))
    x = torch.randn(7, 3, 5, generator=torch.Generator().manual_seed(1))
    seen = _check_claims(encoder, _encoder_plan("ReLU"),
                         lambda m: m.sequence(x, m.initial_state(3)))
    # a new LSTM layer starts with fresh weights; an LSTM has no activation to change
    assert seen == {True: {"add_nodes", "activation"},
                    False: {"add_layer", "remove_layer", "remove_nodes"}}, seen
