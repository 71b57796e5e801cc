"""Mutations: function preservation, bounds, hyperparameter ranges, determinism."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agilerl.algorithms import DQN, PPO
from agilerl.envs.probe import make_probe_vector_env
from agilerl.hpo.mutation import Mutations
from agilerl.modules.mlp import EvolvableMLP
from tests.hpo.conftest import dqn_batch

OBS = torch.randn(64, 1, generator=torch.Generator().manual_seed(0))


def _mlp(layer_norm: bool, activation: str = "ReLU") -> EvolvableMLP:
    arch = {
        "in_dim": 3, "out_dim": 2, "hidden_size": [16, 24], "activation": activation,
        "output_activation": None, "layer_norm": layer_norm, "init_layers": True,
        "output_vanish": False, "min_hidden_layers": 1, "max_hidden_layers": 4,
        "min_mlp_nodes": 8, "max_mlp_nodes": 128,
    }  # fmt: skip
    return EvolvableMLP(arch, torch.Generator().manual_seed(1))


@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize("layer", [0, 1])
def test_add_nodes_preserves_function(layer_norm, layer):
    mlp = _mlp(layer_norm)
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(2))
    grown = mlp.mutated({"op": "add_nodes", "layer": layer, "nodes": 32, "seed": 3})
    assert grown.arch["hidden_size"][layer] == mlp.arch["hidden_size"][layer] + 32
    with torch.no_grad():
        torch.testing.assert_close(grown(x), mlp(x), atol=1e-4, rtol=1e-4)


def test_add_layer_preserves_relu_function_without_norm():
    mlp = _mlp(layer_norm=False)
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(2))
    deeper = mlp.mutated({"op": "add_layer", "seed": 3})
    assert len(deeper.arch["hidden_size"]) == 3
    with torch.no_grad():
        torch.testing.assert_close(deeper(x), mlp(x))


def test_new_units_are_trainable_after_add_nodes_with_norm():
    mlp = _mlp(layer_norm=True)
    grown = mlp.mutated({"op": "add_nodes", "layer": 1, "nodes": 16, "seed": 3})
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(2))
    grown(x).pow(2).sum().backward()
    assert grown.linears[2].weight.grad[:, 24:].abs().sum() > 0


def _dqn(net: dict, seed: int = 0, **hp) -> DQN:
    env = make_probe_vector_env("ObsPolicyEnv", 2)
    return DQN(
        env.single_observation_space, env.single_action_space, net_config=net, seed=seed, **hp
    )


def test_agent_network_mutations_preserve_q_values_and_mirror_target(small_net):
    net = dict(
        small_net,
        encoder_config={"arch": "mlp", "hidden_size": [32], "layer_norm": False},
        head_config={"hidden_size": [32], "layer_norm": False},
    )
    agent = _dqn(net)
    rng = np.random.default_rng(0)
    for op in ("add_nodes", "add_layer", "add_nodes", "add_layer", "add_nodes"):
        before = agent.actor(OBS).detach()
        plan = agent.actor.draw_plan(op, rng, ["ReLU"])
        agent.apply_architecture_mutation("actor", plan)
        after = agent.actor(OBS).detach()
        torch.testing.assert_close(after, before, atol=1e-5, rtol=1e-5)
        assert agent.actor_target.architecture() == agent.actor.architecture()
    # the optimizer trains the new parameters
    assert {id(p) for g in agent.optimizers["optimizer"].param_groups for p in g["params"]} == {
        id(p) for p in agent.actor.parameters()
    }


def test_architecture_mutations_respect_bounds(small_net):
    net = dict(small_net)
    net["encoder_config"] = {
        "arch": "mlp",
        "hidden_size": [16],
        "min_mlp_nodes": 8,
        "max_mlp_nodes": 40,
        "max_hidden_layers": 2,
    }
    net["head_config"] = {
        "hidden_size": [16],
        "min_mlp_nodes": 8,
        "max_mlp_nodes": 40,
        "max_hidden_layers": 2,
    }
    agent = _dqn(net)
    mutations = Mutations(0, 1, 0.5, 0, 0, 0, rand_seed=1)
    for _ in range(40):
        mutations.mutation([agent])
        for mlp in [*agent.actor.encoders.values(), *agent.actor.heads.values()]:
            hidden = mlp.arch["hidden_size"]
            assert 1 <= len(hidden) <= 2
            assert all(8 <= h <= 40 for h in hidden)
        assert 8 <= agent.actor.encoders["encoder"].arch["out_dim"] <= 128


def test_rl_hp_mutation_stays_within_ranges_and_updates_optimizer(small_net):
    agent = _dqn(small_net, batch_size=32, learn_step=2)
    ranges = {
        "lr": {"min": 1e-4, "max": 1e-3, "grow_factor": 1.5, "shrink_factor": 0.5},
        "batch_size": {"min": 16, "max": 80, "grow_factor": 1.5, "shrink_factor": 0.5},
        "learn_step": {"min": 1, "max": 4, "grow_factor": 1.5, "shrink_factor": 0.5},
    }
    agent.hp_config = ranges
    mutations = Mutations(0, 0, 0, 0, 0, 1, rand_seed=3)
    seen = set()
    for _ in range(60):
        mutations.mutation([agent])
        seen.add(agent.mut)
        assert 1e-4 <= agent.lr <= 1e-3
        assert 16 <= agent.batch_size <= 80 and isinstance(agent.batch_size, int)
        assert 1 <= agent.learn_step <= 4 and isinstance(agent.learn_step, int)
        assert agent.optimizers["optimizer"].param_groups[0]["lr"] == agent.lr
    assert seen == {"lr", "batch_size", "learn_step"}


def test_pre_training_mutation_never_draws_no_mutation(small_net):
    agents = [_dqn(small_net, seed=i) for i in range(4)]
    for agent in agents:
        agent.hp_config = {"lr": {"min": 1e-5, "max": 1.0, "grow_factor": 1.2,
                                  "shrink_factor": 0.8}}
    mutations = Mutations(0.9, 0, 0, 0, 0, 0.1, rand_seed=0)
    for _ in range(5):
        mutations.mutation(agents, pre_training_mut=True)
        assert all(agent.mut == "lr" for agent in agents)
    mutations.mutation(agents)  # afterwards "no mutation" is drawn at its weight again
    assert [agent.mut for agent in agents].count("None") >= 2
    only_none = Mutations(1, 0, 0, 0, 0, 0, rand_seed=0)
    only_none.mutation(agents, pre_training_mut=True)
    assert all(agent.mut == "None" for agent in agents)


def test_activation_and_parameter_mutations(small_net):
    agent = _dqn(small_net)
    before = copy.deepcopy(agent.actor.state_dict())
    Mutations(0, 0, 0, 1, 0, 0, mutation_sd=0.5, rand_seed=0).mutation([agent])
    assert agent.mut == "param"
    changed = [k for k, v in agent.actor.state_dict().items() if not torch.equal(v, before[k])]
    assert changed and all(k.endswith("weight") for k in changed)
    Mutations(0, 0, 0, 0, 1, 0, activation_selection=["ELU"], rand_seed=0).mutation([agent])
    assert agent.mut == "act"
    assert all(m.arch["activation"] == "ELU" for m in agent.actor.encoders.values())
    assert agent.actor_target.architecture() == agent.actor.architecture()


def test_parameter_mutation_noise_scales_with_each_weight() -> None:
    """About 10% of a chosen matrix's entries move; the noise is relative to each weight
    (a zero weight moves only when it is redrawn from N(0, 1), about 5% of the drawn)."""
    net = {"latent_dim": 64, "encoder_config": {"hidden_size": [64]},
           "head_config": {"hidden_size": [64]}}
    moved_ones, moved_zeros, entries, relative = 0, 0, 0, []
    for seed in range(20):
        agent = _dqn(net)
        weights = [p for n, p in agent.actor.named_parameters()
                   if n.endswith("weight") and p.dim() == 2]
        with torch.no_grad():
            for i, w in enumerate(weights):  # alternate all-ones and all-zero matrices
                w.fill_(float(i % 2 == 0))
        Mutations(0, 0, 0, 1, 0, 0, mutation_sd=0.1, rand_seed=seed).mutation([agent])
        for i, w in enumerate(weights):
            moved = w.detach() != float(i % 2 == 0)
            if i % 2 == 0:
                moved_ones += int(moved.sum())
                entries += w.numel() if moved.any() else 0  # the chosen matrices
                relative += (w.detach()[moved] - 1.0).abs().tolist()
            else:
                moved_zeros += int(moved.sum())
    assert 0.07 < moved_ones / entries < 0.11  # 10% drawn with replacement
    # Zero weights move only by a reset; ones by N(0, 0.1) noise, or by a reset.
    assert 0 < moved_zeros < 0.1 * moved_ones
    small = [d for d in relative if d < 0.5]
    assert len(small) > 0.9 * len(relative)
    assert 0.06 < float(np.mean(small)) < 0.1  # E|N(0, 0.1)| = 0.08


def test_mutation_is_deterministic_and_state_restorable(small_net):
    def run(mutations: Mutations) -> list[str]:
        pop = [_dqn(small_net, seed=i) for i in range(3)]
        for p in pop:
            p.hp_config = {
                "lr": {"min": 1e-5, "max": 1e-2, "grow_factor": 1.2, "shrink_factor": 0.8}
            }
        labels = []
        for _ in range(4):
            labels += [a.mut for a in mutations.mutation(pop)]
        return labels + [str(p.actor.architecture()) for p in pop]

    assert run(Mutations(0.2, 0.2, 0.5, 0.2, 0.2, 0.2, rand_seed=7)) == run(
        Mutations(0.2, 0.2, 0.5, 0.2, 0.2, 0.2, rand_seed=7)
    )
    m = Mutations(0.2, 0.2, 0.5, 0.2, 0.2, 0.2, rand_seed=7)
    state = m.get_state()
    first = m.rng.random(3)
    m.set_state(state)
    assert np.array_equal(first, m.rng.random(3))


def test_ppo_mutations_keep_agent_working(small_net):
    env = make_probe_vector_env("ObsPolicyContEnv", 2)
    agent = PPO(
        env.single_observation_space,
        env.single_action_space,
        net_config=small_net,
        seed=0,
        share_encoders=False,
    )
    mutations = Mutations(0, 1, 0.5, 1, 1, 0, rand_seed=0)
    for _ in range(10):
        mutations.mutation([agent])
        env_action, action, log_prob, value = agent.get_action(np.zeros((2, 1), dtype=np.float32))
        assert env_action.shape == (2, 1) and np.isfinite(log_prob).all()
    clone = agent.clone(index=5)
    assert clone.actor_critic.architecture() == agent.actor_critic.architecture()


def test_optimizer_state_is_carried_across_architecture_mutations(small_net):
    agent = _dqn(small_net)
    opt = agent.optimizers["optimizer"]
    agent.actor(OBS).pow(2).sum().backward()
    opt.step()
    before = {
        name: {k: v.clone() for k, v in opt.state[p].items()}
        for name, p in agent.actor.named_parameters()
    }
    plan = {"target": "head:q", "op": "add_nodes", "layer": 0, "nodes": 16, "seed": 0}
    agent.apply_architecture_mutation("actor", plan)
    opt = agent.optimizers["optimizer"]
    after = {name: opt.state[p] for name, p in agent.actor.named_parameters()}
    untouched = "encoders.encoder.linears.0.weight"
    assert torch.equal(after[untouched]["exp_avg"], before[untouched]["exp_avg"])
    grown = "heads.q.linears.0.weight"  # 32 -> 48 rows: old rows keep their moments
    assert after[grown]["exp_avg"].shape[0] == 48
    assert torch.equal(after[grown]["exp_avg"][:32], before[grown]["exp_avg"])
    assert not after[grown]["exp_avg"][32:].any()
    assert float(after[grown]["step"]) == 1.0


@pytest.mark.parametrize("op", ["add_layer", "remove_layer"])
def test_optimizer_moments_follow_the_output_layer_when_a_hidden_layer_comes_or_goes(op):
    # The output layer keeps its weights at a new index of ``linears``; its Adam moments
    # must go with it, and a new hidden layer must not inherit the output layer's.
    net = {"latent_dim": 16, "encoder_config": {"hidden_size": [32]},
           "head_config": {"hidden_size": [32, 32]}}
    agent = _dqn(net)
    opt = agent.optimizers["optimizer"]
    agent.actor(OBS).pow(2).sum().backward()
    opt.step()
    old_out = agent.actor.head("q").linear(-1)
    before = {(part, k): opt.state[getattr(old_out, part)][k].clone()
              for part in ("weight", "bias") for k in ("exp_avg", "exp_avg_sq")}
    agent.apply_architecture_mutation("actor", {"target": "head:q", "op": op, "seed": 0})
    opt = agent.optimizers["optimizer"]
    head = agent.actor.head("q")
    assert len(head.linears) == (4 if op == "add_layer" else 2)
    new_out = head.linear(-1)
    assert torch.equal(new_out.weight, old_out.weight)  # the weights moved ...
    for (part, key), value in before.items():  # ... and their moments with them
        assert torch.equal(opt.state[getattr(new_out, part)][key], value), (part, key)
    if op == "add_layer":  # the inserted identity layer starts with no moments
        assert not opt.state.get(head.linear(-2).weight)
    agent.actor(OBS).pow(2).sum().backward()
    opt.step()  # and the optimizer still steps every parameter
    assert all(float(opt.state[p]["step"]) >= 1 for p in agent.actor.parameters())


def _trained_dqn(net: dict, seed: int) -> DQN:
    """A DQN whose target lags its online network and whose Adam has moments."""
    agent = _dqn(net, seed=seed, batch_size=32, tau=0.01)
    for _ in range(5):
        agent.learn(dqn_batch(seed))
    return agent


def _target_is_online_copy(agent: DQN) -> bool:
    online, target = agent.actor.state_dict(), agent.actor_target.state_dict()
    return online.keys() == target.keys() and all(
        torch.equal(online[k], target[k]) for k in online)


@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize("new_layer", [0.0, 1.0])
def test_architecture_changes_that_alter_the_function_restart_targets_and_optimizers(
        small_net, new_layer, layer_norm):
    """A change that alters what the network computes (units or a layer removed, a layer
    added before a layer norm) makes the lagged target a copy of the online network and
    starts Adam afresh: a target that lags a function that no longer exists is nothing to
    learn towards. A change that keeps the function (new units; a new identity layer
    without a norm) keeps the target lagging and Adam's moments. Whether the function
    changed is measured here, on the network's outputs."""
    net = dict(small_net,
               encoder_config={"arch": "mlp", "hidden_size": [32], "layer_norm": layer_norm},
               head_config={"hidden_size": [32, 32], "max_hidden_layers": 3,
                            "layer_norm": layer_norm})
    seen = {True: set(), False: set()}
    for seed in range(12):
        agent = _trained_dqn(net, seed)
        assert not _target_is_online_copy(agent) and agent.optimizers["optimizer"].state
        with torch.no_grad():
            before = agent.actor(OBS)
        Mutations(0, 1, new_layer, 0, 0, 0, rand_seed=seed).mutation([agent])
        with torch.no_grad():
            changed = not torch.allclose(agent.actor(OBS), before, atol=1e-4, rtol=1e-4)
        seen[changed].add(agent.mut)
        restarted = _target_is_online_copy(agent) and not agent.optimizers["optimizer"].state
        kept = not _target_is_online_copy(agent) and agent.optimizers["optimizer"].state
        assert restarted if changed else kept, agent.mut
        agent.learn(dqn_batch(seed))  # and it trains on
    kind = "layer" if new_layer else "nodes"
    assert seen[True] >= {f"remove_{kind}"}, seen
    if kind == "nodes" or not layer_norm:
        assert seen[False] == {f"add_{kind}"}, seen
    else:  # before a layer norm an identity layer does not pass the values on unchanged
        assert seen[True] == {"add_layer", "remove_layer"} and not seen[False], seen


def test_an_activation_change_restarts_targets_and_optimizers(small_net):
    agent = _trained_dqn(small_net, 0)
    Mutations(0, 0, 0, 0, 1, 0, activation_selection=["ELU"], rand_seed=0).mutation([agent])
    assert agent.mut == "act"
    assert _target_is_online_copy(agent)
    assert not agent.optimizers["optimizer"].state
