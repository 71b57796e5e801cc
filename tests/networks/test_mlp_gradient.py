"""The closed-form gradient of an MLP chain equals autograd's, and only covered networks
get one; the closed-form updates of CQN and the neural bandits equal their autograd updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import CQN, DQN, NeuralTS, NeuralUCB
from agilerl.networks.config import normalise_net_config
from agilerl.networks.mlp_gradient import MLPChain, cached_chain
from agilerl.networks.q_network import QNetwork

OBS = spaces.Box(-1.0, 1.0, (5,), np.float32)


def q_network(activation: str = "ReLU", layer_norm: bool = True,
              output_activation: str | None = None, hidden: tuple = (16, 12)) -> QNetwork:
    mlp = {"hidden_size": list(hidden), "activation": activation, "layer_norm": layer_norm}
    config = normalise_net_config({"latent_dim": 10, "encoder_config": mlp,
                                   "head_config": {**mlp, "output_activation": output_activation}})
    return QNetwork.build(OBS, 3, config, torch.Generator().manual_seed(0))


@pytest.mark.parametrize(("activation", "layer_norm", "output_activation"), [
    ("ReLU", True, None), ("ReLU", False, None), ("Tanh", True, "Sigmoid"),
    ("Sigmoid", False, "Tanh"), ("ReLU", True, "ReLU"),
    # the activations kept as modules, whose backward reads their input
    ("ELU", True, None), ("GELU", False, None), ("GELU", True, "ELU"),
    ("LeakyReLU", True, "Softplus"), ("Softplus", False, "LeakyReLU"),
])
def test_chain_gradient_equals_autograd(activation, layer_norm, output_activation) -> None:
    net = q_network(activation, layer_norm, output_activation)
    chain = MLPChain.of(net)
    assert chain is not None
    x = torch.randn(32, 5, generator=torch.Generator().manual_seed(1))
    upstream = torch.randn(32, 3, generator=torch.Generator().manual_seed(2))

    (net(x) * upstream).sum().backward()
    expected = {name: p.grad.clone() for name, p in net.named_parameters()}
    net.zero_grad(set_to_none=True)

    tape: list = []
    out = chain.forward(x, tape)
    torch.testing.assert_close(out, net(x).detach())
    chain.backward(tape, upstream)
    for name, p in net.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], rtol=1e-5, atol=1e-6, msg=name)


def test_networks_the_chain_does_not_cover_get_none() -> None:
    assert MLPChain.of(q_network("PReLU")) is None  # a learned slope: not covered here
    assert MLPChain.of(q_network("ReLU", output_activation="Softmax")) is None
    assert MLPChain.of(torch.nn.Linear(3, 2)) is None


@pytest.mark.parametrize("algo", ["CQN", "DQN"])
@pytest.mark.parametrize(("double", "activation"), [(True, "ReLU"), (False, "ReLU"),
                                                    (True, "GELU"), (False, "ELU")])
def test_q_learning_closed_form_update_equals_the_autograd_update(algo, double, activation,
                                                                  monkeypatch) -> None:
    # GELU and ELU: what an activation mutation draws besides ReLU
    net = {"latent_dim": 8, "encoder_config": {"hidden_size": [8], "activation": activation},
           "head_config": {"hidden_size": [8], "activation": activation}}
    extra = {"cql_alpha": 0.7} if algo == "CQN" else {}
    cls = CQN if algo == "CQN" else DQN
    agents = [cls(OBS, spaces.Discrete(3), net_config=net, seed=0, double=double, lr=1e-2,
                  **extra) for _ in range(2)]
    assert cached_chain(agents[0], agents[0].actor) is not None  # the closed form is used
    rng = np.random.default_rng(0)
    losses = []
    for i, agent in enumerate(agents):
        if i == 1:  # the same updates through autograd (CQN learns as DQN does)
            monkeypatch.setattr("agilerl.algorithms.dqn.cached_chain", lambda *_: None)
        rng = np.random.default_rng(0)
        for _ in range(5):
            data = {"obs": rng.uniform(-1, 1, (16, 5)).astype(np.float32),
                    "next_obs": rng.uniform(-1, 1, (16, 5)).astype(np.float32),
                    "action": rng.integers(0, 3, 16),
                    "reward": rng.uniform(0, 1, 16).astype(np.float32),
                    "done": (rng.random(16) < 0.2).astype(np.float32)}
            metrics = agent.learn(data)
        losses.append(metrics)
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)
    for a, b in zip(agents[0].actor.parameters(), agents[1].actor.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(agents[0].actor_target.parameters(), agents[1].actor_target.parameters(),
                    strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("algo", [NeuralUCB, NeuralTS])
def test_bandit_closed_form_update_equals_the_autograd_update(algo, monkeypatch) -> None:
    net = {"latent_dim": 8, "encoder_config": {"hidden_size": [8]},
           "head_config": {"hidden_size": [8]}}
    context = spaces.Box(0, 10, (12,), np.float32)
    agents = [algo(context, spaces.Discrete(3), net_config=net, seed=0, lr=1e-2, reg=0.3)
              for _ in range(2)]
    for agent in agents:  # a drift from theta_0 for the regulariser to act on
        with torch.no_grad():
            agent._output_layer().weight.add_(0.5)
    losses = []
    for i, agent in enumerate(agents):
        if i == 1:  # the same updates through autograd
            monkeypatch.setattr("agilerl.algorithms.core.bandit.cached_chain",
                                lambda *_: None)
        rng = np.random.default_rng(0)
        for step in range(6):
            if step == 2:  # a new learning rate, then a new network (a new chain)
                agent.set_hyperparameter("lr", 3e-3)
            if step == 4:
                plan = agent.actor.draw_plan("add_nodes", np.random.default_rng(1), ["ReLU"])
                agent.apply_architecture_mutation("actor", plan)
            metrics = agent.learn({"obs": rng.uniform(0, 5, (16, 12)).astype(np.float32),
                                   "reward": (rng.random(16) < 0.5).astype(np.float32)})
            losses.append(metrics["loss"])
    assert agents[0].__dict__["_mlp_chain"][1] is not None  # the closed form ran
    assert losses[:6] == pytest.approx(losses[6:], rel=1e-4)
    for a, b in zip(agents[0].actor.parameters(), agents[1].actor.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
