"""The closed-form gradient of Rainbow's noisy dueling network equals autograd's, and a
closed-form RainbowDQN update equals the autograd update (prioritized weights, n-step
discounts and the combined one-step loss included, through a learning-rate change and an
architecture mutation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import RainbowDQN
from agilerl.hpo.dormant import layer_scores
from agilerl.networks.config import normalise_net_config
from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.optim import make_optimizer
from agilerl.networks.rainbow_gradient import RainbowChain
from agilerl.networks.rainbow_q_network import RainbowQNetwork
from tests.networks.closed_form_updates import learn_both_ways

OBS = spaces.Box(-1.0, 1.0, (5,), np.float32)
ACTIONS = 3


def _config(activation: str, layer_norm: bool) -> dict:
    mlp = {"hidden_size": [12, 10], "activation": activation, "layer_norm": layer_norm}
    return normalise_net_config({"latent_dim": 8, "encoder_config": mlp, "head_config": mlp})


def _network(activation: str = "ReLU", layer_norm: bool = True) -> RainbowQNetwork:
    network = RainbowQNetwork.build(OBS, ACTIONS, _config(activation, layer_norm),
                                    torch.Generator().manual_seed(0), num_atoms=7,
                                    v_min=-5.0, v_max=5.0, noise_std=0.5)
    network.reset_noise(torch.Generator().manual_seed(1))
    return network


@pytest.mark.parametrize(("activation", "layer_norm"), [
    ("ReLU", True), ("ReLU", False), ("Tanh", True), ("GELU", False), ("ELU", True)])
def test_network_gradients_equal_autograd(activation, layer_norm) -> None:
    network = _network(activation, layer_norm)
    gen = torch.Generator().manual_seed(2)
    obs = torch.rand(24, 5, generator=gen) * 2 - 1
    grad = torch.randn(16, ACTIONS, 7, generator=gen)  # only the first 16 rows have one

    network.zero_grad()
    (network.logits(obs)[:16] * grad).sum().backward()
    want = {name: p.grad.clone() for name, p in network.named_parameters()}

    chain = RainbowChain.of(network)
    assert chain is not None
    grads = {id(p): torch.full_like(p, float("nan")) for p in network.parameters()}
    chain.apply_noise()
    tape: list = []
    with torch.no_grad():
        torch.testing.assert_close(chain.logits(obs, tape), network.logits(obs),
                                   rtol=0, atol=0)  # the forward pass is the network's own
    chain.backward_into(tape, grad, grads)
    for name, p in network.named_parameters():
        torch.testing.assert_close(grads[id(p)], want[name], rtol=1e-5, atol=1e-6, msg=name)


def test_the_chain_follows_parameters_moved_into_flat_buffers() -> None:
    network, target = _network(), _network()
    chain = RainbowChain.of(network)
    assert chain is not None
    chain.apply_noise()
    obs = torch.rand(8, 5, generator=torch.Generator().manual_seed(2))
    flat = FlatTraining.build(network, target, make_optimizer([network], 1e-3))
    assert flat is not None
    flat.flat.add_(0.1)  # the parameters now live in, and change with, the flat buffer
    chain.apply_noise()
    with torch.no_grad():
        torch.testing.assert_close(chain.logits(obs), network.logits(obs), rtol=0, atol=0)


def test_networks_outside_the_closed_form_get_none() -> None:
    config = normalise_net_config({"latent_dim": 8, "encoder_config": {
        "hidden_size": [8], "activation": "PReLU"}})
    gen = torch.Generator().manual_seed(0)
    kwargs = {"num_atoms": 5, "v_min": -1.0, "v_max": 1.0, "noise_std": 0.5}
    assert RainbowChain.of(RainbowQNetwork.build(OBS, 2, config, gen, **kwargs)) is None
    image = spaces.Box(0, 255, (3, 16, 16), np.uint8)
    cnn = normalise_net_config({"arch": "cnn", "latent_dim": 8, "encoder_config": {
        "channel_size": [8], "kernel_size": [3], "stride_size": [1]}})
    assert RainbowChain.of(RainbowQNetwork.build(image, 2, cnn, gen, **kwargs)) is None


def _batch(rng: np.random.Generator) -> dict:
    size = 16
    return {
        "obs": rng.uniform(-1, 1, (size, 5)).astype(np.float32),
        "action": rng.integers(0, ACTIONS, size),
        "reward": rng.normal(0, 2, size).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (size, 5)).astype(np.float32),
        "done": (rng.random(size) < 0.2).astype(np.float32),
        "n": rng.integers(1, 4, size),
        "one_step_reward": rng.normal(0, 2, size).astype(np.float32),
        "one_step_next_obs": rng.uniform(-1, 1, (size, 5)).astype(np.float32),
        "one_step_done": (rng.random(size) < 0.2).astype(np.float32),
        "weights": rng.uniform(0.2, 1.0, size).astype(np.float32),
        "indices": np.arange(size),
    }


def _normalised_scores(network: torch.nn.Module) -> list[torch.Tensor]:
    """ReGraMa's scores of every measured layer, each divided by its layer's mean (what
    decides dormancy)."""
    return [score / score.mean() for mlp in (*network.encoders.values(), *network.heads.values())
            for score in layer_scores(mlp) if score is not None]


def _learn_prioritized(agent: RainbowDQN, batch: dict[str, np.ndarray]) -> dict[str, object]:
    """One prioritized update: its metrics with the new priorities beside them."""
    metrics, priorities = agent.learn_prioritized(batch)
    return {**metrics, "priorities": priorities}


@pytest.mark.parametrize(("activation", "layer_norm"), [("ReLU", True), ("GELU", False)])
def test_closed_form_update_equals_the_autograd_update(activation, layer_norm,
                                                       monkeypatch) -> None:
    net = {"latent_dim": 8, "encoder_config": {"hidden_size": [12], "activation": activation,
                                               "layer_norm": layer_norm},
           "head_config": {"hidden_size": [10], "activation": activation,
                           "layer_norm": layer_norm}}
    agents = [RainbowDQN(OBS, spaces.Discrete(ACTIONS), net_config=net, seed=0, lr=1e-2,
                         tau=0.1, num_atoms=7, v_min=-5.0, v_max=5.0, noise_std=0.5)
              for _ in range(2)]
    history = learn_both_ways(agents, RainbowChain, "actor", lambda _, rng: _batch(rng),
                              monkeypatch, activation=activation, learn=_learn_prioritized)
    for got, want in zip(history[0], history[1], strict=True):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-4)
        np.testing.assert_allclose(got["priorities"], want["priorities"], rtol=1e-4)
    for name in ("actor", "actor_target"):
        params = zip(agents[0].networks[name].parameters(),
                     agents[1].networks[name].parameters(), strict=True)
        for a, b in params:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    # Autograd's kept gradients also cover the s' rows (zeros), the closed form's only the
    # batch's: the scores differ by that factor, the dormancy they decide does not.
    for a, b in zip(_normalised_scores(agents[0].actor), _normalised_scores(agents[1].actor),
                    strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
