"""A stacked PPO update of same-architecture members equals one ``learn`` per member: same
weights, Adam state, generator state and metrics, with hyperparameters (minibatch sizes and
counts, epochs, coefficients, KL early stop) differing between members."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from agilerl.algorithms.ppo import PPO
from agilerl.algorithms.stacked_groups import group_key, make_group
from agilerl.algorithms.stacked_ppo import StackedPPOGroup
from agilerl.envs.probe import make_probe_vector_env
from agilerl.training.experience import on_policy_member_run
from tests.algorithms.conftest import assert_same_dormancy_scores

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _net(share: bool = True, layer_norm: bool = True, activation: str = "ReLU") -> dict:
    mlp = {"hidden_size": [16], "activation": activation, "layer_norm": layer_norm}
    return {"latent_dim": 16, "encoder_config": dict(mlp), "head_config": dict(mlp)}


#: Per member: hyperparameters that differ (rollout size, minibatch size and count,
#: epochs, coefficients, gradient clip, KL early stop).
HPS = [
    {"lr": 1e-3, "batch_size": 16, "learn_step": 64, "update_epochs": 2},
    {"lr": 3e-3, "batch_size": 24, "learn_step": 64, "update_epochs": 3, "clip_coef": 0.1,
     "ent_coef": 0.05, "vf_coef": 0.8, "max_grad_norm": 0.2},
    {"lr": 5e-4, "batch_size": 16, "learn_step": 32, "update_epochs": 4, "target_kl": 1e-4},
    {"lr": 1e-2, "batch_size": 64, "learn_step": 64, "update_epochs": 1, "ent_coef": 0.0,
     "max_grad_norm": 5.0},
]
SAME = [dict(HPS[0]) for _ in range(4)]
#: Minibatches of one shape (stepped in one stacked call, no padding), each member with its
#: own loss coefficients.
COEFFICIENTS = [dict(HPS[0], clip_coef=clip, vf_coef=vf, ent_coef=ent)
                for clip, vf, ent in ((0.2, 0.5, 0.0), (0.05, 1.0, 0.1), (0.3, 0.1, 0.02),
                                      (0.1, 0.7, 0.05))]


def _members(env_name: str, hps: list[dict], net: dict | None = None,
             share: bool = True) -> list[PPO]:
    env = make_probe_vector_env(env_name, 4)
    return [PPO(env.single_observation_space, env.single_action_space,
                net_config=net or _net(), seed=i, share_encoders=share, **hp)
            for i, hp in enumerate(hps)]


def _runs(agents: list[PPO], env_name: str) -> list[Any]:
    return [on_policy_member_run(a, make_probe_vector_env(env_name, 4), 10_000, seed=10 + i)
            for i, a in enumerate(agents)]


def _assert_same_member(a: PPO, b: PPO) -> None:
    for (key, pa), pb in zip(a.actor_critic.state_dict().items(),
                             b.actor_critic.state_dict().values(), strict=True):
        torch.testing.assert_close(pa, pb, **TOL, msg=key)
    sa, sb = a.optimizers["optimizer"].state_dict(), b.optimizers["optimizer"].state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for index, entry in sa["state"].items():
        for key, value in entry.items():
            torch.testing.assert_close(value, sb["state"][index][key], **TOL)
    assert torch.equal(a.torch_rng.get_state(), b.torch_rng.get_state())
    assert_same_dormancy_scores(a, b)


def _compare(env_name: str, hps: list[dict], *, share: bool = True, net: dict | None = None,
             subsets: tuple[list[int], ...] = ([0, 1, 2, 3],) * 3) -> list[PPO]:
    """Rollouts collected alike by two copies of the members; one copy learns alone, the
    other in one stacked group; after every update the members must agree."""
    alone, together = _members(env_name, hps, net, share), _members(env_name, hps, net, share)
    assert len({group_key(a) for a in together}) == 1
    group = make_group(together)
    assert isinstance(group, StackedPPOGroup)
    runs_alone, runs_together = _runs(alone, env_name), _runs(together, env_name)
    points_alone = [next(r) for r in runs_alone]
    points_together = [next(r) for r in runs_together]
    for members in subsets:
        expected = [alone[m].learn(points_alone[m].rollout) for m in members]
        got = group.learn(members, [points_together[m].rollout for m in members])
        for e, g in zip(expected, got, strict=True):
            assert g.keys() == e.keys() and e
            for name in e:
                assert g[name] == pytest.approx(e[name], rel=1e-3, abs=1e-5), name
        for m, e, g in zip(members, expected, got, strict=True):
            points_alone[m] = runs_alone[m].send(e)
            points_together[m] = runs_together[m].send(g)
        for m in members:
            _assert_same_member(alone[m], together[m])
    assert all(p.grad is None for a in together for p in a.actor_critic.parameters())
    return together


@pytest.mark.parametrize("env_name", ["ObsPolicyEnv", "ObsPolicyContEnv"],
                         ids=["discrete", "continuous"])
@pytest.mark.parametrize("hps", [SAME, HPS, COEFFICIENTS],
                         ids=["same-hp", "differing-hp", "differing-coefficients"])
def test_stacked_ppo_update_equals_each_members_learn(env_name, hps):
    together = _compare(env_name, hps)
    first = [next(a.actor_critic.parameters()) for a in together]
    assert not torch.allclose(first[0], first[1])  # they learned different things


def test_two_and_three_members_and_subsets_of_a_group():
    _compare("ObsPolicyEnv", HPS, subsets=([0, 1], [1, 2, 3], [0, 3], [0, 1, 2, 3]))


NETS = {"tanh": _net(layer_norm=False, activation="Tanh"), "gelu-norm": _net(activation="GELU"),
        "softmax": _net(activation="Softmax")}


@pytest.mark.parametrize("net", list(NETS))
@pytest.mark.parametrize("share", [True, False], ids=["shared-encoder", "own-encoders"])
def test_separate_encoders_and_other_activations(share, net):
    _compare("ObsPolicyContEnv", HPS, share=share, net=NETS[net])
    _compare("ObsPolicyEnv", HPS[:2], share=share, net=NETS[net], subsets=([0, 1],))


def test_group_key_separates_architectures_and_refuses_recurrent_and_cnn():
    env = make_probe_vector_env("ObsPolicyEnv", 4)
    space, action = env.single_observation_space, env.single_action_space
    members = _members("ObsPolicyEnv", HPS)
    assert group_key(members[0]) == group_key(members[3])  # hyperparameters differ
    wider = PPO(space, action, seed=0, net_config={**_net(), "latent_dim": 32})
    separate = PPO(space, action, seed=0, net_config=_net(), share_encoders=False)
    cont = _members("ObsPolicyContEnv", HPS[:1])[0]
    keys = {group_key(a) for a in (members[0], wider, separate, cont)}
    assert None not in keys and len(keys) == 4
    lstm = PPO(space, action, seed=0, recurrent=True,
               net_config={"encoder_config": {"arch": "lstm", "hidden_state_size": 8}})
    assert group_key(lstm) is None


def test_mutated_members_regroup_and_each_group_equals_learn_calls():
    """After an architecture mutation of one member and an activation mutation of two
    others, the lockstep population groups them [1, 1, 2], and every group's update equals
    one ``learn`` per member."""
    from tests.algorithms.test_stacked_update import mutate_alike_and_regroup

    alone, together = _members("ObsPolicyEnv", HPS), _members("ObsPolicyEnv", HPS)
    groups = mutate_alike_and_regroup(alone, together)
    assert sorted(len(g.agents) for g in groups) == [1, 1, 2]
    assert all(isinstance(g, StackedPPOGroup) for g in groups)
    runs_alone, runs_together = _runs(alone, "ObsPolicyEnv"), _runs(together, "ObsPolicyEnv")
    points_alone = [next(r) for r in runs_alone]
    points_together = [next(r) for r in runs_together]
    for _ in range(2):
        for group in groups:
            index = [together.index(a) for a in group.agents]
            got = group.learn(range(len(index)), [points_together[i].rollout for i in index])
            for i, metrics in zip(index, got, strict=True):
                expected = alone[i].learn(points_alone[i].rollout)
                assert metrics["loss"] == pytest.approx(expected["loss"], rel=1e-3, abs=1e-5)
                points_alone[i] = runs_alone[i].send(expected)
                points_together[i] = runs_together[i].send(metrics)
    for a, b in zip(alone, together, strict=True):
        _assert_same_member(a, b)
