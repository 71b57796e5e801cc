"""ReGraMa: the gradients kept for it, which neurons it finds dormant, how it revives them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from agilerl.algorithms import DQN, TD3
from agilerl.envs.probe import make_probe_vector_env
from agilerl.hpo.dormant import (
    REVIVED_OUT_SCALE,
    dormant_neurons,
    layer_scores,
    network_scores,
    revive_dormant_neurons,
)
from agilerl.hpo.mutation import Mutations
from agilerl.models import MutationSpec
from agilerl.networks.mlp_gradient import MLPChain
from tests.hpo.conftest import dqn_batch

NET = {"latent_dim": 12, "encoder_config": {"hidden_size": [10], "layer_norm": False},
       "head_config": {"hidden_size": [8], "layer_norm": False}}


def _dqn(seed: int = 0) -> DQN:
    env = make_probe_vector_env("ObsPolicyEnv", 2)
    return DQN(env.single_observation_space, env.single_action_space, net_config=NET,
               seed=seed, batch_size=32)


def _kill(agent: DQN, neurons: list[int]) -> None:
    """Make hidden neurons of the encoder output 0 on every input (dead ReLUs)."""
    layer = agent.actor.encoder("encoder").linear(0)
    with torch.no_grad():
        layer.weight[neurons] = 0.0
        layer.bias[neurons] = -1.0


def test_closed_form_and_autograd_keep_the_pre_activation_gradients():
    agent = _dqn()
    encoder, head = agent.actor.encoder("encoder"), agent.actor.head("q")
    x = torch.randn(16, 1, generator=torch.Generator().manual_seed(1))
    upstream = torch.randn(16, 2, generator=torch.Generator().manual_seed(2))
    chain = MLPChain([encoder, head])
    tape: list = []
    chain.forward(x, tape)
    chain.backward(tape, upstream)
    closed = [layer_scores(encoder), layer_scores(head)]
    (head(encoder(x)) * upstream).sum().backward()
    autograd = [layer_scores(encoder), layer_scores(head)]
    assert [len(s) for s in closed] == [2, 1]  # encoder hidden + latent; head hidden only
    for got, want in zip(sum(closed, []), sum(autograd, []), strict=True):
        torch.testing.assert_close(got, want)
    # the head's hidden layer by hand: d(sum(upstream * out))/dz = (upstream @ W) * relu'(z)
    z = torch.nn.functional.linear(encoder(x), head.linear(0).weight, head.linear(0).bias)
    expected = ((upstream @ head.linear(1).weight) * (z > 0)).abs().mean(0)
    torch.testing.assert_close(autograd[1][0], expected.detach())


def test_dormant_neurons_are_those_far_below_their_layers_mean():
    scores = torch.tensor([1.0, 1.0, 0.0, 0.005, 2.0])
    assert dormant_neurons(scores, 0.01) == [2, 3]
    assert dormant_neurons(scores, 0.0) == [2]
    assert dormant_neurons(torch.zeros(3), 0.01) == [0, 1, 2]  # no live unit left


def test_revival_reinitialises_dead_neurons_and_barely_moves_the_function():
    agent = _dqn()
    _kill(agent, [0, 3])
    agent.learn(dqn_batch())
    encoder = agent.actor.encoder("encoder")
    hidden = layer_scores(encoder)[0]
    assert hidden[[0, 3]].eq(0).all() and hidden.gt(0).sum() > 4
    # only this layer is revived here (a later layer's revival rewrites its own rows)
    encoder.keep_gradient(1, torch.ones(12))
    agent.actor.head("q").keep_gradient(0, torch.ones(8))
    before_out = encoder.linear(1).weight.detach().clone()
    x = torch.randn(64, 1, generator=torch.Generator().manual_seed(3))
    q_before = agent.actor(x).detach()
    dormant = dormant_neurons(hidden, 0.01)
    assert {0, 3} <= set(dormant)
    assert revive_dormant_neurons(agent.actor, 0.01, np.random.default_rng(0)) >= len(dormant)
    incoming = encoder.linear(0)
    assert incoming.weight[[0, 3]].abs().gt(0).all() and incoming.bias[[0, 3]].eq(0).all()
    bound = (6.0 / (incoming.in_features + incoming.out_features)) ** 0.5
    assert incoming.weight[[0, 3]].abs().max() <= bound
    live = [n for n in range(10) if n not in dormant]
    out = encoder.linear(1).weight.detach()
    median = before_out[:, live].norm(dim=0).median()
    torch.testing.assert_close(out[:, dormant].norm(dim=0),
                               (REVIVED_OUT_SCALE * median).expand(len(dormant)),
                               rtol=1e-4, atol=1e-6)
    assert torch.equal(out[:, live], before_out[:, live])
    change = (agent.actor(x).detach() - q_before).abs().max()
    assert 0 < change < 0.05 * q_before.abs().max()


def test_parameter_mutation_revives_before_its_weight_noise():
    agent = _dqn()
    _kill(agent, [1, 2])
    agent.learn(dqn_batch())
    Mutations(0, 0, 0, 1, 0, 0, rand_seed=0).mutation([agent])
    assert agent.mut == "param"
    assert agent.actor.encoder("encoder").linear(0).weight[[1, 2]].abs().gt(0).all()
    # biases: only a revival sets them (the weight noise leaves biases alone)
    assert agent.actor.encoder("encoder").linear(0).bias[[1, 2]].eq(0).all()
    untouched = _dqn()  # same seed, no learning step: nothing measured, nothing revived
    _kill(untouched, [1, 2])
    Mutations(0, 0, 0, 1, 0, 0, rand_seed=0).mutation([untouched])
    assert untouched.actor.encoder("encoder").linear(0).weight[[1, 2]].eq(0).all()


def test_the_kept_gradients_travel_with_the_state():
    agent = _dqn()
    agent.learn(dqn_batch())
    saved = network_scores(agent.networks)
    clone = agent.clone()
    assert saved["actor"]["encoders.encoder"][0] is not None  # something was measured
    for name, mlps in network_scores(clone.networks).items():
        for path, layers in mlps.items():
            for got, want in zip(layers, saved[name][path], strict=True):
                assert (got is None and want is None) or torch.equal(got, want)
    fresh = _dqn(seed=1).get_state()
    clone.set_state(fresh)  # a state measured nothing: none is kept
    assert all(s is None for mlps in network_scores(clone.networks).values()
               for layers in mlps.values() for s in layers)


def test_a_latent_read_with_the_action_is_left_alone():
    env = make_probe_vector_env("ObsPolicyContEnv", 2)
    agent = TD3(env.single_observation_space, env.single_action_space, net_config=NET,
                seed=0, batch_size=8)
    critic = agent.networks["critic_1"]
    encoder = critic.encoder("encoder")
    with torch.no_grad():
        encoder.linear(1).weight.zero_()
        encoder.linear(1).bias.fill_(-1.0)  # every latent unit dead
    x = torch.randn(8, 1)
    critic(x, torch.zeros(8, 1)).sum().backward()
    assert layer_scores(encoder)[1].eq(0).all()
    critic.head("q").keep_gradient(0, torch.ones(8))  # only the latent is dormant
    encoder.keep_gradient(0, torch.ones(10))
    head_input = critic.head("q").linear(0).weight.detach().clone()
    revive_dormant_neurons(critic, 0.01, np.random.default_rng(0))
    assert encoder.linear(1).bias.eq(-1.0).all()  # no latent unit revived
    assert torch.equal(critic.head("q").linear(0).weight, head_input)


def test_the_threshold_comes_from_the_manifest_and_cannot_be_negative():
    spec = MutationSpec(dormant_threshold=0.2)
    assert Mutations.from_spec(spec).dormant_threshold == 0.2
    assert MutationSpec().dormant_threshold == 0.01
    with pytest.raises(ValidationError):
        MutationSpec(dormant_threshold=-0.1)
    with pytest.raises(ValueError, match="dormant_threshold"):
        Mutations(1, 0, 0, 0, 0, 0, dormant_threshold=-1)


def test_after_a_parameter_mutation_targets_follow_and_optimizers_restart():
    agent = _dqn()
    for _ in range(3):
        agent.learn(dqn_batch())
    assert agent.optimizers["optimizer"].state  # moments from the steps above
    Mutations(0, 0, 0, 1, 0, 0, rand_seed=0).mutation([agent])
    for (name, online), target in zip(agent.actor.state_dict().items(),
                                      agent.actor_target.state_dict().values(), strict=True):
        assert torch.equal(online, target), name
    assert not agent.optimizers["optimizer"].state
    assert agent.optimizers["optimizer"].param_groups[0]["lr"] == agent.lr
    agent.learn(dqn_batch())  # and it trains on

