"""Stacked updates of same-architecture DQN members equal one ``learn`` per member, in
closed form (the members' own gradient) and through autograd (networks outside it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agilerl.algorithms.cqn import CQN
from agilerl.algorithms.dqn import DQN
from agilerl.algorithms.stacked_update import StackedGroup, group_key, learn_together
from agilerl.envs.probe import make_probe_vector_env
from tests.algorithms.conftest import assert_same_dormancy_scores

NET = {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
       "head_config": {"hidden_size": [16]}}
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _net(activation: str = "ReLU", layer_norm: bool = True) -> dict:
    mlp = {"hidden_size": [16], "activation": activation, "layer_norm": layer_norm}
    return {"latent_dim": 16, "encoder_config": dict(mlp), "head_config": dict(mlp)}


#: Networks whose gradient has a closed form (True) or goes through autograd (False).
NETS = {"relu-norm": (_net(), True), "tanh": (_net("Tanh", layer_norm=False), True),
        "sigmoid-norm": (_net("Sigmoid"), True), "gelu": (_net("GELU"), True),
        "elu": (_net("ELU", layer_norm=False), True), "leaky": (_net("LeakyReLU"), True),
        "softplus": (_net("Softplus"), True), "softmax": (_net("Softmax"), False)}


def _members(double: bool, algo: type = DQN, net: dict = NET) -> list[DQN]:
    env = make_probe_vector_env("ObsPolicyEnv", 2)
    lrs, sizes, taus = (1e-3, 3e-3, 5e-4, 1e-2), (16, 24, 16, 8), (0.01, 0.05, 0.01, 0.1)
    extra = [{"cql_alpha": 0.5 + i} if algo is CQN else {} for i in range(4)]
    return [algo(env.single_observation_space, env.single_action_space, net_config=net,
                 seed=i, batch_size=b, lr=lr, tau=tau, gamma=0.9 + 0.02 * i, double=double,
                 **extra[i])
            for i, (lr, b, tau) in enumerate(zip(lrs, sizes, taus, strict=True))]


def _batch(rng: np.random.Generator, rows: int) -> dict[str, np.ndarray]:
    return {"obs": rng.integers(0, 2, size=(rows, 1)).astype(np.float32),
            "action": rng.integers(0, 2, size=rows),
            "reward": (5 * rng.normal(size=rows)).astype(np.float32),
            "next_obs": rng.integers(0, 2, size=(rows, 1)).astype(np.float32),
            "done": rng.random(rows) < 0.2}


def _assert_close(a: DQN, b: DQN) -> None:
    for name in ("actor", "actor_target"):
        for (key, pa), pb in zip(a.networks[name].state_dict().items(),
                                 b.networks[name].state_dict().values(), strict=True):
            torch.testing.assert_close(pa, pb, **TOL, msg=f"{name}.{key}")
    assert_same_dormancy_scores(a, b)
    sa, sb = a.optimizers["optimizer"].state_dict(), b.optimizers["optimizer"].state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for index, entry in sa["state"].items():
        for key, value in entry.items():
            torch.testing.assert_close(value, sb["state"][index][key], **TOL)


def mutate_alike_and_regroup(alone: list, together: list) -> list:
    """Mutate both populations alike (member 1's architecture, the activation of members 2
    and on), then the stacked groups the lockstep population forms of ``together``."""
    import copy

    from agilerl.hpo.mutation import Mutations
    from agilerl.population import lockstep

    mutations = Mutations(0, 1, 0, 0, 1, 0, activation_selection=("ReLU", "ELU"), rand_seed=0)
    for agents in (alone, together):
        same_draws = copy.deepcopy(mutations)
        assert same_draws.architecture_mutate(agents[1]) != "None"
        for agent in agents[2:]:
            assert same_draws.activation_mutation(agent) == "act"
    learners = lockstep._learners(together)
    return list({id(g): g for g, _ in learners.values()}.values())


@pytest.mark.parametrize("net", list(NETS))
@pytest.mark.parametrize(("algo", "double"), [(DQN, False), (DQN, True), (CQN, True),
                                              (CQN, False)],
                         ids=["dqn", "double", "cqn", "cqn-single"])
def test_stacked_step_of_four_members_equals_four_learn_calls(algo, double, net):
    config, closed_form = NETS[net]
    alone, together = _members(double, algo, config), _members(double, algo, config)
    assert len({group_key(a) for a in together}) == 1
    rng = np.random.default_rng(0)
    group = StackedGroup(together)
    assert (group.chain is not None) is closed_form
    # every member, then a subset (members that reached a learning update), then all again
    for members in ([0, 1, 2, 3], [0, 1, 2, 3], [0, 2], [1, 2, 3], [0, 1, 2, 3]):
        batches = [_batch(rng, alone[m].batch_size) for m in members]
        expected = [alone[m].learn(b) for m, b in zip(members, batches, strict=True)]
        got = group.learn(members, batches)
        for e, g in zip(expected, got, strict=True):
            assert g.keys() == e.keys()
            for name in e:
                assert g[name] == pytest.approx(e[name], rel=1e-5), name
    assert learn_together(together[:2], batches[:2])[0]["loss"] > 0
    alone[0].learn(batches[0]), alone[1].learn(batches[1])
    for a, b in zip(alone, together, strict=True):
        _assert_close(a, b)
        assert all(p.grad is None for p in b.actor.parameters())
    # the members really learned different things (lr, tau, gamma and batches differ)
    first = [next(a.actor.parameters()) for a in together]
    assert not torch.allclose(first[0], first[1])


def test_group_key_separates_architectures_and_algorithms():
    members = _members(double=False)
    env = make_probe_vector_env("ObsPolicyEnv", 2)
    wider = DQN(env.single_observation_space, env.single_action_space, seed=0,
                net_config={**NET, "latent_dim": 32})
    assert group_key(members[0]) == group_key(members[3])  # hyperparameters differ: same group
    assert group_key(wider) not in (None, group_key(members[0]))
    assert group_key(_members(double=True)[0]) != group_key(members[0])
    cqn = CQN(env.single_observation_space, env.single_action_space, net_config=NET, seed=0)
    assert group_key(cqn) not in (None, group_key(members[0]))  # a subclass's own loss


@pytest.mark.parametrize("algo", [DQN, CQN])
def test_the_closed_form_stacked_step_runs_without_autograd(monkeypatch, algo):
    members = _members(double=True, algo=algo)
    group = StackedGroup(members)
    rng = np.random.default_rng(1)
    batches = [_batch(rng, m.batch_size) for m in members]
    group.learn(range(4), batches)  # first steps: each member's optimizer makes its state

    def no_autograd(*args, **kwargs):
        raise AssertionError("autograd was used")

    monkeypatch.setattr(torch.autograd, "backward", no_autograd)
    monkeypatch.setattr(torch.Tensor, "backward", no_autograd)
    before = [p.clone() for p in members[0].actor.parameters()]
    metrics = group.learn(range(4), batches)
    assert all(m["loss"] > 0 for m in metrics)
    assert not any(torch.equal(a, b) for a, b in zip(before, members[0].actor.parameters(),
                                                      strict=True))
