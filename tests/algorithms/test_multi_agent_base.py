"""The multi-agent algorithm base: agent groups, units, per-group networks, consistent
mutation, learning-rate mutation, state round trips, summed-return evaluation and the
multi-agent stepper (probe env of ``agilerl.envs.multi_agent_probe``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import IPPO
from agilerl.algorithms.core.multi_agent import (
    MultiAgentReturns,
    MultiAgentStepper,
    agent_spaces,
    evaluate_multi_agent,
    group_agents,
    group_id,
)
from agilerl.envs import multi_agent_probe
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv
from agilerl.hpo.mutation import Mutations

NET = {
    "latent_dim": 16,
    "encoder_config": {"arch": "mlp", "hidden_size": [32]},
    "head_config": {"hidden_size": [32]},
}


def _env(num_envs: int = 2, **config) -> PettingZooVectorEnv:
    return PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(**config)] * num_envs)


def _ippo(env: PettingZooVectorEnv, **kwargs) -> IPPO:
    obs, act = agent_spaces(env)
    kwargs.setdefault("net_config", NET)
    return IPPO(obs, act, seed=0, action_std_init=0.5, learn_step=32, batch_size=32, **kwargs)


def test_group_id_by_numeric_suffix() -> None:
    assert group_id("speaker_0") == "speaker"
    assert group_id("red_team_12") == "red_team"
    assert group_id("pilot") == "pilot"
    assert group_id("agent_x") == "agent_x"


def test_prefix_group_with_different_spaces_is_split() -> None:
    box2, box3 = spaces.Box(0, 1, (2,)), spaces.Box(0, 1, (3,))
    ids = ["a_0", "a_1", "b_0", "b_1"]
    obs = {"a_0": box2, "a_1": box2, "b_0": box2, "b_1": box3}
    act = dict.fromkeys(ids, spaces.Discrete(2))
    assert group_agents(ids, obs, act) == {"a": ["a_0", "a_1"], "b_0": ["b_0"], "b_1": ["b_1"]}


def test_units_follow_groups_or_agents() -> None:
    env = _env()
    shared = _ippo(env)
    assert shared.units == {"seeker": ["seeker_0", "seeker_1"], "pointer": ["pointer_0"]}
    assert sorted(shared.networks) == ["actor_critic.pointer", "actor_critic.seeker"]
    own = _ippo(env, share_group_networks=False)
    assert list(own.units) == ["seeker_0", "seeker_1", "pointer_0"]
    assert sorted(own.optimizers) == [
        "optimizer.pointer_0", "optimizer.seeker_0", "optimizer.seeker_1"]


def test_spaces_as_list_with_agent_ids_keep_their_order() -> None:
    env = _env()
    obs, act = agent_spaces(env)
    ids = ["pointer_0", "seeker_0", "seeker_1"]
    agent = IPPO([obs[a] for a in ids], [act[a] for a in ids], agent_ids=ids, net_config=NET)
    assert agent.agent_ids == ids


def test_net_config_per_group() -> None:
    env = _env()
    wide = {**NET, "encoder_config": {"arch": "mlp", "hidden_size": [48]}}
    agent = _ippo(env, net_config={"seeker": NET, "pointer_0": wide})
    hidden = {n: net.encoder("actor").architecture()["hidden_size"]
              for n, net in agent.networks.items()}
    assert hidden == {"actor_critic.seeker": [32], "actor_critic.pointer": [48]}
    with pytest.raises(ValueError, match="no entry for group 'pointer'"):
        _ippo(env, net_config={"seeker": NET})


def _arch(agent: IPPO, name: str) -> dict:
    arch = agent.networks[name].architecture()
    return {"encoders": {k: v["hidden_size"] for k, v in arch["encoders"].items()},
            "heads": {k: v["hidden_size"] for k, v in arch["heads"].items()}}


@pytest.mark.parametrize("seed", range(4))
def test_architecture_mutation_reaches_every_agent_of_the_member(seed: int) -> None:
    agent = _ippo(_env())
    before = _arch(agent, "actor_critic.seeker")
    assert agent.mutable_networks() == ["actor_critic.seeker"]  # one family: same config
    mutations = Mutations(0, 1, 0.5, 0, 0, 0, rand_seed=seed)
    label = mutations.mutate(agent, "arch")
    assert label != "None"
    seeker, pointer = _arch(agent, "actor_critic.seeker"), _arch(agent, "actor_critic.pointer")
    assert seeker == pointer
    latents = {n: net.encoder("actor").out_dim for n, net in agent.networks.items()}
    assert len(set(latents.values())) == 1
    assert seeker != before or latents["actor_critic.seeker"] != NET["latent_dim"]
    # the rebuilt optimizers train the new parameters
    for name, optimizer in agent.optimizers.items():
        net = agent.networks[agent.optimizer_networks[name][0]]
        assert {id(p) for g in optimizer.param_groups for p in g["params"]} == \
            {id(p) for p in net.parameters()}


def test_lr_mutation_reaches_every_optimizer() -> None:
    agent = _ippo(_env(), share_group_networks=False)
    agent.set_hyperparameter("lr", 0.0123)
    lrs = {name: g["lr"] for name, o in agent.optimizers.items() for g in o.param_groups}
    assert len(lrs) == 3 and set(lrs.values()) == {0.0123}


def test_clone_and_checkpoint_act_identically(tmp_path) -> None:
    env = _env()
    agent = _ippo(env)
    Mutations(0, 1, 0.5, 0, 0, 0, rand_seed=3).mutate(agent, "arch")
    obs, _ = env.reset(seed=5)
    path = tmp_path / "ippo.pt"
    agent.save_checkpoint(path)
    for other in (agent.clone(index=7), IPPO.load(path)):
        assert other.agent_ids == agent.agent_ids
        for name in agent.networks:
            assert other.networks[name].architecture() == agent.networks[name].architecture()
        greedy_a, greedy_b = agent.greedy_action(obs), other.greedy_action(obs)
        for a in agent.agent_ids:
            np.testing.assert_array_equal(greedy_a[a], greedy_b[a])
        # same RNG state: the same sampled actions
        # (a loaded agent acts deterministically unless asked to sample)
        sampled_a = agent.clone().get_action(obs)[1]
        sampled_b = other.get_action(obs, deterministic=False)[1]
        for a in agent.agent_ids:
            np.testing.assert_array_equal(sampled_a[a], sampled_b[a])


class _Scripted:
    """Acts perfectly on the probe env: seekers pick the target, the pointer its value."""

    def greedy_action(self, obs):
        out = {}
        for a, o in obs.items():
            target = np.asarray(o).argmax(axis=-1)
            out[a] = (target - 0.5).astype(np.float32)[:, None] if a == "pointer_0" else target
        return out


def test_fitness_is_the_return_summed_over_agents() -> None:
    env = _env(num_envs=3, episode_length=4)
    # 3 agents x 4 steps x reward 1; every sub-env's first episode counts once
    assert evaluate_multi_agent(_Scripted(), env, seed=0) == pytest.approx(12.0)
    assert evaluate_multi_agent(_Scripted(), env, seed=0, max_steps=2) == pytest.approx(6.0)
    agent = _ippo(env)
    fitness = agent.test(env, seed=0)
    assert agent.fitness == [fitness]


def test_stepper_marks_departed_agents_and_reset_steps() -> None:
    env = _env(num_envs=1, episode_length=4, early_exit=True, continuous=False)
    stepper = MultiAgentStepper(env)
    obs = stepper.reset(seed=0)
    returns = MultiAgentReturns(stepper.agent_ids, 1)
    acted_log, ended_log = [], []
    for _ in range(6):
        obs, rewards, _, _, acted, ended, _ = stepper.step(_Scripted().greedy_action(obs))
        returns.update(rewards, acted, ended)
        acted_log.append({a: bool(v[0]) for a, v in acted.items()})
        ended_log.append(bool(ended[0]))
    # seeker_1 terminates at step 2 (of 4); step 5 is the autoreset step
    assert [row["seeker_1"] for row in acted_log] == [True, True, False, False, False, True]
    assert [row["seeker_0"] for row in acted_log] == [True, True, True, True, False, True]
    assert ended_log == [False, False, False, True, False, False]
    assert returns.completed == [{"seeker_0": 4.0, "seeker_1": 2.0}]
    assert returns.mean_total() == 6.0


def test_agent_networks_are_torch_modules_on_the_device() -> None:
    agent = _ippo(_env())
    for net in agent.networks.values():
        assert isinstance(net, torch.nn.Module)
        assert next(net.parameters()).device == agent.device
