"""PPO's closed form: the actor-critic network's gradient, the clipped surrogate's gradient
and a whole closed-form PPO update equal autograd's (discrete and Gaussian policies, shared
and separate encoders, through early stops, a learning-rate change and an architecture
mutation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import PPO
from agilerl.algorithms.core.clipped_surrogate import (
    clipped_surrogate_gradient,
    clipped_surrogate_loss,
)
from agilerl.components.rollout_buffer import RolloutBuffer
from agilerl.networks.actor_critic import ActorCritic
from agilerl.networks.config import normalise_net_config
from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.policy_value_gradient import PolicyValueChain
from tests.networks.closed_form_updates import learn_both_ways

OBS = spaces.Box(-1.0, 1.0, (5,), np.float32)
ACTIONS = 3


def _net(activation: str = "ReLU", layer_norm: bool = True) -> dict:
    mlp = {"hidden_size": [12], "activation": activation, "layer_norm": layer_norm}
    return {"latent_dim": 8, "encoder_config": dict(mlp), "head_config": dict(mlp)}


def _network(continuous: bool, share: bool, activation: str = "ReLU",
             layer_norm: bool = True) -> ActorCritic:
    return ActorCritic.build(OBS, 2 if continuous else ACTIONS, continuous=continuous,
                             net_config=normalise_net_config(_net(activation, layer_norm)),
                             share_encoders=share, action_std_init=0.6,
                             generator=torch.Generator().manual_seed(0))


def _actions(continuous: bool, rows: int, gen: torch.Generator) -> torch.Tensor:
    if continuous:
        return torch.randn(rows, 2, generator=gen)
    return torch.randint(0, ACTIONS, (rows,), generator=gen)


@pytest.mark.parametrize("continuous", [False, True], ids=["categorical", "gaussian"])
@pytest.mark.parametrize("share", [True, False], ids=["shared", "separate"])
@pytest.mark.parametrize(("activation", "layer_norm"),
                         [("ReLU", True), ("Tanh", False), ("GELU", True)])
def test_network_gradients_equal_autograd(continuous, share, activation, layer_norm) -> None:
    network = _network(continuous, share, activation, layer_norm)
    gen = torch.Generator().manual_seed(1)
    obs = torch.rand(16, 5, generator=gen) * 2 - 1
    actions = _actions(continuous, 16, gen)
    grad_log_prob, grad_value = (torch.randn(16, generator=gen) for _ in range(2))
    grad_entropy = -0.37  # the loss weighs every row's entropy alike

    policy_out, value = network(obs)
    log_prob, entropy = network.log_prob_entropy(policy_out, actions)
    network.zero_grad()
    ((grad_log_prob * log_prob).sum() + (grad_entropy * entropy).sum()
     + (grad_value * value).sum()).backward()
    want = {name: p.grad.clone() for name, p in network.named_parameters()}

    chain = PolicyValueChain.of(network)
    assert chain is not None
    tapes = chain.tapes()
    got_out, got_value = chain.run(obs, tapes)
    torch.testing.assert_close(got_out, policy_out.detach(), rtol=0, atol=0)
    torch.testing.assert_close(got_value, value.detach(), rtol=0, atol=0)
    evaluation = chain.log_prob_entropy(got_out, actions)
    torch.testing.assert_close(evaluation.log_prob, log_prob.detach())
    torch.testing.assert_close(evaluation.entropy, entropy.detach())
    grad_out, grad_log_std = chain.policy_gradient(evaluation, actions, grad_log_prob,
                                                   grad_entropy)
    grads = {id(p): torch.full_like(p, float("nan")) for p in network.parameters()}
    chain.backward_into(tapes, grad_out, grad_value, grads, grad_log_std)
    for name, p in network.named_parameters():
        torch.testing.assert_close(grads[id(p)], want[name], rtol=1e-5, atol=1e-6, msg=name)


def test_the_surrogate_gradient_equals_autograd() -> None:
    gen = torch.Generator().manual_seed(2)
    rows = 64
    old = torch.randn(rows, generator=gen)
    # Ratios on both sides of the clip range and inside it, advantages of both signs, and
    # rows whose ratio is exactly 1 (the two surrogate terms tie).
    log_prob = (old + torch.randn(rows, generator=gen) * 0.3).requires_grad_()
    with torch.no_grad():
        log_prob[:4] = old[:4]
    entropy = torch.rand(rows, generator=gen).requires_grad_()
    value = torch.randn(rows, generator=gen).requires_grad_()
    batch = {"log_probs": old, "advantages": torch.randn(rows, generator=gen),
             "returns": torch.randn(rows, generator=gen)}

    class HP:
        clip_coef, vf_coef, ent_coef = 0.2, 0.5, 0.01

    want = clipped_surrogate_loss(HP, log_prob, entropy, value, batch)
    want.loss.backward()
    terms, grad_log_prob, grad_entropy, grad_value = clipped_surrogate_gradient(
        HP, log_prob.detach(), entropy.detach(), value.detach(), batch)
    assert 0.2 < terms[-1] < 0.8  # the clipped fraction: the test covers both branches
    for got, expected in zip(terms, want, strict=True):
        assert got == pytest.approx(float(expected.detach()), rel=1e-6, abs=1e-7)
    torch.testing.assert_close(grad_log_prob, log_prob.grad)
    torch.testing.assert_close(torch.full_like(entropy, grad_entropy), entropy.grad)
    torch.testing.assert_close(grad_value, value.grad)


def _rollout(agent: PPO, rng: np.random.Generator) -> RolloutBuffer:
    steps, envs = 16, 4
    shape = agent.action_space.shape if agent.continuous else ()
    buffer = RolloutBuffer(steps, envs, 5, shape, np.float32 if agent.continuous else np.int64)
    obs = rng.uniform(-1, 1, (envs, 5)).astype(np.float32)
    for _ in range(steps):
        _, action, log_prob, value = agent.get_action(obs)
        buffer.add(obs, action, log_prob, value, rng.normal(size=envs).astype(np.float32),
                   rng.random(envs) < 0.1, np.ones(envs, dtype=bool))
        obs = rng.uniform(-1, 1, (envs, 5)).astype(np.float32)
    buffer.compute_gae(agent.get_value(obs), 0.99, 0.95)
    return buffer


@pytest.mark.parametrize("continuous", [False, True], ids=["categorical", "gaussian"])
@pytest.mark.parametrize("share", [True, False], ids=["shared", "separate"])
def test_closed_form_update_equals_the_autograd_update(continuous, share, monkeypatch) -> None:
    action_space = spaces.Box(-1.0, 1.0, (2,)) if continuous else spaces.Discrete(ACTIONS)
    agents = [PPO(OBS, action_space, net_config=_net(), seed=0, lr=1e-2, batch_size=16,
                  learn_step=64, num_envs=4, update_epochs=3, share_encoders=share,
                  target_kl=0.005) for _ in range(2)]
    steps: list[int] = []
    original = FlatTraining.adam_step

    def counting_step(self: FlatTraining) -> None:
        steps.append(1)
        original(self)

    monkeypatch.setattr(FlatTraining, "adam_step", counting_step)
    history = learn_both_ways(agents, PolicyValueChain, "actor_critic", _rollout, monkeypatch,
                              updates=5, mutate_at=3)
    # 4 minibatches x 3 epochs per update: some updates ran several steps, some stopped
    assert 2 * 5 < len(steps) < 5 * 12
    for got, want in zip(history[0], history[1], strict=True):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
    params = zip(agents[0].actor_critic.parameters(), agents[1].actor_critic.parameters(),
                 strict=True)
    for a, b in params:
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_networks_outside_the_closed_form_get_none() -> None:
    gen = torch.Generator().manual_seed(0)
    image = spaces.Box(0, 255, (3, 16, 16), np.uint8)
    cnn = normalise_net_config({"arch": "cnn", "latent_dim": 8, "encoder_config": {
        "channel_size": [8], "kernel_size": [3], "stride_size": [1]}})
    network = ActorCritic.build(image, 2, continuous=False, net_config=cnn,
                                share_encoders=True, action_std_init=0.6, generator=gen)
    assert PolicyValueChain.of(network) is None
    recurrent = PPO(OBS, spaces.Discrete(2), seed=0, recurrent=True, net_config={
        "latent_dim": 8, "encoder_config": {"arch": "lstm", "hidden_state_size": 8}})
    assert PolicyValueChain.of(recurrent.actor_critic) is None
