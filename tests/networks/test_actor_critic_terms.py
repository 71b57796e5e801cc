"""ActorCritic.log_prob_entropy gives what the torch distributions give: bit for bit for a
Gaussian policy; up to float rounding for a categorical one (its log-probabilities come
from one ``log_softmax``, the distribution's from ``logits - logsumexp(logits)``)."""

from __future__ import annotations

import copy

import pytest
import torch

from agilerl.algorithms.core.target import clip_grad_norm
from agilerl.networks.actor_critic import ActorCritic
from agilerl.networks.config import normalise_net_config

NET_CONFIG = {
    "latent_dim": 16,
    "encoder_config": {"hidden_size": [16], "layer_norm": True},
    "head_config": {"hidden_size": [16], "layer_norm": True},
}


def _net(continuous: bool) -> ActorCritic:
    return ActorCritic.build(
        4, 3, continuous=continuous, net_config=normalise_net_config(NET_CONFIG),
        share_encoders=True, action_std_init=0.6, generator=torch.Generator().manual_seed(0),
    )


@pytest.mark.parametrize("continuous", [False, True])
def test_log_prob_entropy_equals_the_distribution_values_and_gradients(continuous: bool):
    net = _net(continuous)
    twin = copy.deepcopy(net)
    obs = torch.randn(64, 4, generator=torch.Generator().manual_seed(1)) * 3
    if continuous:
        actions = torch.randn(64, 3, generator=torch.Generator().manual_seed(2))
    else:
        actions = torch.randint(0, 3, (64,), generator=torch.Generator().manual_seed(2))

    policy_out, _ = net(obs)
    log_prob, entropy = net.log_prob_entropy(policy_out, actions)
    (log_prob * 0.3 - entropy * 0.01).mean().backward()

    twin_out, _ = twin(obs)
    dist = twin.distribution(twin_out)
    ref_log_prob, ref_entropy = dist.log_prob(actions), dist.entropy()
    if continuous:
        ref_log_prob, ref_entropy = ref_log_prob.sum(-1), ref_entropy.sum(-1)
    (ref_log_prob * 0.3 - ref_entropy * 0.01).mean().backward()

    tolerance = {"rtol": 0, "atol": 0} if continuous else {"rtol": 1e-6, "atol": 1e-7}
    torch.testing.assert_close(log_prob, ref_log_prob, **tolerance)
    torch.testing.assert_close(entropy, ref_entropy, **tolerance)
    policy_params = list(net.heads["policy"].parameters()) + list(net.encoders.parameters())
    assert all(p.grad is not None for p in policy_params)
    for ours, ref in zip(net.parameters(), twin.parameters(), strict=True):
        assert (ours.grad is None) == (ref.grad is None)
        if ours.grad is not None:
            torch.testing.assert_close(ours.grad, ref.grad, **tolerance)


def test_clip_grad_norm_equals_torch_clip_grad_norm():
    net = _net(False)
    twin = copy.deepcopy(net)
    obs = torch.randn(32, 4, generator=torch.Generator().manual_seed(3)) * 50
    for module in (net, twin):
        policy_out, value = module(obs)
        (policy_out.pow(2).sum() + value.pow(2).sum()).backward()
    clip_grad_norm(list(net.parameters()), 0.5)
    torch.nn.utils.clip_grad_norm_(twin.parameters(), 0.5)
    grads = [p.grad for p in net.parameters()]
    assert torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])) <= 0.5 + 1e-5
    for ours, ref in zip(grads, (p.grad for p in twin.parameters()), strict=True):
        assert torch.equal(ours, ref)
