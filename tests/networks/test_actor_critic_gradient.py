"""The closed-form gradients of DDPG's and TD3's networks equal autograd's: the critic's
parameters, its gradient with respect to the action, the policy's parameters, the
pre-activation gradients ReGraMa keeps; and a closed-form DDPG or TD3 update equals the
autograd update."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import DDPG, TD3
from agilerl.networks.actor_critic_gradient import ActorCriticChains, CriticChain, PolicyChain
from agilerl.networks.config import normalise_net_config
from agilerl.networks.continuous_q import ContinuousQNetwork
from agilerl.networks.deterministic_actor import DeterministicActor

OBS = spaces.Box(-1.0, 1.0, (5,), np.float32)
ACTIONS = spaces.Box(-2.0, 2.0, (2,), np.float32)
TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def _config(activation: str, layer_norm: bool, output_activation: str | None = None) -> dict:
    mlp = {"hidden_size": [12, 10], "activation": activation, "layer_norm": layer_norm}
    return normalise_net_config({"latent_dim": 8, "encoder_config": mlp,
                                 "head_config": {**mlp, "output_activation": output_activation}})


def _batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(32, 5, generator=gen) * 2 - 1, torch.rand(32, 2, generator=gen) * 2 - 1,
            torch.randn(32, generator=gen))


def _kept(net: torch.nn.Module) -> list[torch.Tensor]:
    """Every pre-activation gradient ``net``'s MLPs keep for ReGraMa."""
    return [g for mlp in (*net.encoders.values(), *net.heads.values())
            for g in mlp.latest_gradients() if g is not None]


@pytest.mark.parametrize(("activation", "layer_norm"), [
    ("ReLU", True), ("ReLU", False), ("Tanh", True), ("GELU", False), ("ELU", True)])
def test_critic_gradients_equal_autograd(activation, layer_norm) -> None:
    critic = ContinuousQNetwork.build(OBS, 2, _config(activation, layer_norm),
                                      torch.Generator().manual_seed(0))
    chain = CriticChain.of(critic)
    assert chain is not None
    obs, action, upstream = _batch(1)

    # --- the critic's own step: every parameter ---
    (critic(obs, action) * upstream).sum().backward()
    expected = {name: p.grad.clone() for name, p in critic.named_parameters()}
    expected_kept = [g.clone() for g in _kept(critic)]
    critic.zero_grad(set_to_none=True)
    encoder_tape: list = []
    head_tape: list = []
    q = chain.run(obs, action, encoder_tape, head_tape)
    torch.testing.assert_close(q, critic(obs, action).detach())
    chain.backward(encoder_tape, head_tape, upstream)
    for name, p in critic.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], **TOLERANCE, msg=name)
    assert len(_kept(critic)) == len(expected_kept) > 0
    for got, want in zip(_kept(critic), expected_kept, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)

    # --- the actor's step: the action's gradient, the critic frozen ---
    critic.requires_grad_(False)
    leaf = action.clone().requires_grad_(True)
    (critic(obs, leaf) * upstream).sum().backward()
    expected_kept = [g.clone() for g in _kept(critic)]
    head_tape = []
    chain.run(obs, action, head_tape=head_tape)
    torch.testing.assert_close(chain.action_gradient(head_tape, upstream), leaf.grad, **TOLERANCE)
    for got, want in zip(_kept(critic), expected_kept, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)


@pytest.mark.parametrize("output_activation", [None, "Sigmoid"])  # Tanh; Sigmoid is 2x - 1
def test_policy_gradients_equal_autograd(output_activation) -> None:
    actor = DeterministicActor.build(OBS, 2, _config("ReLU", True, output_activation),
                                     torch.Generator().manual_seed(0))
    chain = PolicyChain.of(actor)
    assert chain is not None and chain.affine is (output_activation == "Sigmoid")
    obs, _, _ = _batch(3)
    upstream = torch.randn(32, 2, generator=torch.Generator().manual_seed(4))
    (actor(obs) * upstream).sum().backward()
    expected = {name: p.grad.clone() for name, p in actor.named_parameters()}
    actor.zero_grad(set_to_none=True)
    tape: list = []
    torch.testing.assert_close(chain.run(obs, tape), actor(obs).detach())
    chain.backward(tape, upstream)
    for name, p in actor.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], **TOLERANCE, msg=name)


def test_networks_outside_the_closed_form_get_none() -> None:
    config = _config("PReLU", False)  # a learned slope: not covered
    gen = torch.Generator().manual_seed(0)
    assert CriticChain.of(ContinuousQNetwork.build(OBS, 2, config, gen)) is None
    assert PolicyChain.of(DeterministicActor.build(OBS, 2, config, gen)) is None
    image = spaces.Box(0, 255, (3, 16, 16), np.uint8)
    cnn = normalise_net_config({"arch": "cnn", "latent_dim": 8, "encoder_config": {
        "channel_size": [8], "kernel_size": [3], "stride_size": [1]}})
    assert CriticChain.of(ContinuousQNetwork.build(image, 2, cnn, gen)) is None
    agent = TD3(OBS, ACTIONS, net_config={"encoder_config": {"hidden_size": [8],
                                                             "activation": "PReLU"}}, seed=0)
    assert ActorCriticChains.of(agent.networks, agent.critic_names) is None


@pytest.mark.parametrize("cls", [DDPG, TD3])
@pytest.mark.parametrize(("activation", "share_encoders", "output_activation"), [
    ("ReLU", False, None), ("GELU", False, "Sigmoid"), ("ReLU", True, None)])
def test_closed_form_update_equals_the_autograd_update(cls, activation, share_encoders,
                                                       output_activation, monkeypatch) -> None:
    net = {"latent_dim": 8, "encoder_config": {"hidden_size": [8], "activation": activation},
           "head_config": {"hidden_size": [8], "activation": activation,
                           "output_activation": output_activation}}
    agents = [cls(OBS, ACTIONS, net_config=net, seed=0, lr_actor=1e-2, lr_critic=1e-2,
                  policy_freq=2, share_encoders=share_encoders) for _ in range(2)]
    chains = agents[0]._chains()
    assert chains is not None  # the closed form is used, with flat buffers unless shared
    assert (agents[0]._flat_buffers(chains) is None) is share_encoders
    history = []
    for i, agent in enumerate(agents):
        if i == 1:  # the same updates through autograd
            monkeypatch.setattr(DDPG, "_chains", lambda self: None)
        rng = np.random.default_rng(0)
        metrics = []
        for step in range(6):  # three actor steps, three soft updates
            if step == 2:  # a new learning rate, then new critics: the buffers follow
                agent.set_hyperparameter("lr_actor", 3e-3)
            if step == 4:
                critic = agent.critic_names[0]
                plan = agent.networks[critic].draw_plan("add_nodes", np.random.default_rng(1),
                                                        [activation])
                agent.apply_architecture_mutation(critic, plan)
            metrics.append(agent.learn({
                "obs": rng.uniform(-1, 1, (16, 5)).astype(np.float32),
                "next_obs": rng.uniform(-1, 1, (16, 5)).astype(np.float32),
                "action": rng.uniform(-2, 2, (16, 2)).astype(np.float32),
                "reward": rng.uniform(0, 1, 16).astype(np.float32),
                "done": (rng.random(16) < 0.2).astype(np.float32)}))
        history.append(metrics)
    assert [sorted(m) for m in history[0]] == [sorted(m) for m in history[1]]
    for got, want in zip(history[0], history[1], strict=True):
        assert got == pytest.approx(want, rel=1e-4)
    for name, net_a in agents[0].networks.items():
        params_b = agents[1].networks[name].parameters()
        for a, b in zip(net_a.parameters(), params_b, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
        for a, b in zip(_kept(net_a), _kept(agents[1].networks[name]), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
