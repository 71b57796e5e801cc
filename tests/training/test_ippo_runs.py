"""IPPO through the trainer on the multi-agent probe env: same seed twice gives the same
run, and a run stopped at a checkpoint and resumed equals the uninterrupted one (tournament
and MF-PBT, with architecture, parameter and learning-rate mutations); the elite acts for
every agent; IPPO learns the probe in seconds and honours action masks; ``anneal_lr`` decays
every unit's learning rate over the member's budget, in a member run and through the
trainer (resumed exactly)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agilerl.algorithms import IPPO
from agilerl.algorithms.core.multi_agent import agent_spaces, evaluate_multi_agent
from agilerl.envs import multi_agent_probe
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv
from agilerl.training.multi_agent_on_policy import train_multi_agent_on_policy_member
from agilerl.training.trainer import LocalTrainer

from .conftest import (
    TINY_NETWORK,
    assert_same_learning_rates,
    manifest_trainer,
    run_and_resume,
    runs_with_same_seed,
)

TINY = {
    "algorithm": {"name": "IPPO", "batch_size": 32, "lr": 1e-3, "learn_step": 64,
                  "update_epochs": 2, "action_std_init": 0.5},
    "environment": {"name": "agilerl.envs.multi_agent_probe", "num_envs": 4,
                    "config": {"early_exit": True}},
    "network": TINY_NETWORK,
    "mutation": {
        "probabilities": {"no_mut": 0.0, "arch_mut": 0.4, "new_layer": 0.5, "params_mut": 0.2,
                          "act_mut": 0.1, "rl_hp_mut": 0.3},
        "rl_hp_selection": {"lr": {"min": 1e-4, "max": 1e-2},
                            "batch_size": {"min": 8, "max": 64},
                            "learn_step": {"min": 32, "max": 128}},
        "rand_seed": 3,
    },
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "training": {"max_steps": 384, "evo_steps": 128, "pop_size": 3, "eval_steps": 20},
}

MF_PBT = {"strategy": "multi_frequency", "n_subpopulations": 2,
          "evolution_frequency_ratios": [1, 2]}


def _manifest(variant: str) -> dict:
    manifest = copy.deepcopy(TINY)
    if variant == "mfpbt":
        manifest["selection_strategy"] = dict(MF_PBT)
        manifest["training"]["pop_size"] = 6  # 2 subpopulations of 3
    return manifest


def test_same_seed_same_run() -> None:
    runs_with_same_seed(manifest_trainer(_manifest("tournament"), seed=7))


@pytest.mark.parametrize("variant", ["tournament", "mfpbt"])
def test_resume_from_checkpoint_is_exact(variant: str, tmp_path) -> None:
    manifest = _manifest(variant)
    run = run_and_resume(manifest_trainer(manifest, seed=5), tmp_path,
                         manifest["training"]["evo_steps"], save_elite=True,
                         elite_path=tmp_path / "elite.pt")
    assert len(run.checkpoints) >= 2
    full_pop, res_pop = run.full_pop, run.pop
    fresh = LocalTrainer.from_manifest(manifest=manifest, seed=5).population[0]
    archs = {str(fresh.networks["actor_critic.seeker"].architecture())}
    assert_same_learning_rates(full_pop, res_pop)
    for a, b in zip(full_pop, res_pop, strict=True):
        assert a.hyperparameters == b.hyperparameters and a.steps == b.steps
        archs.add(str(a.networks["actor_critic.seeker"].architecture()))
    assert len(archs) > 1  # architecture or activation mutations happened and were resumed
    # the elite acts for every agent
    elite = IPPO.load(tmp_path / "elite.pt")
    env = PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(early_exit=True)] * 2)
    actions = elite.greedy_action(env.reset(seed=0)[0])
    assert set(actions) == {"seeker_0", "seeker_1", "pointer_0"}


def _probe(num_envs: int = 8, **config) -> PettingZooVectorEnv:
    return PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(**config)] * num_envs)


class _Uniform:
    def __init__(self, env: PettingZooVectorEnv, seed: int) -> None:
        self.env = env
        for offset, agent in enumerate(env.possible_agents):
            env.action_space(agent).seed(seed + offset)

    def greedy_action(self, obs):
        return {a: self.env.action_space(a).sample() for a in self.env.possible_agents}


@pytest.mark.parametrize("config,perfect", [({}, 12.0),
                                            ({"action_masks": True, "early_exit": True}, 10.0)])
def test_ippo_learns_the_probe_in_seconds(config: dict, perfect: float) -> None:
    """Perfect: 1 per agent per step over 4 steps (seeker_1 leaves after 2 with
    early_exit). A uniform random policy earns about half of the seekers' reward and 3/8
    of the pointer's (masked: illegal actions cost 1), a learned one nearly all of it."""
    torch.set_num_threads(1)
    env = _probe(**config)
    random_return = evaluate_multi_agent(_Uniform(env, 0), env, seed=1, loop=4)
    obs, act = agent_spaces(env)
    agent = IPPO(obs, act, net_config={**TINY_NETWORK, "latent_dim": 32}, seed=0, lr=3e-3,
                 learn_step=256, batch_size=64, action_std_init=0.5, ent_coef=0.0)
    for generation in range(4):
        train_multi_agent_on_policy_member(agent, env, 512, seed=generation)
    learned = agent.test(env, seed=100, loop=2)
    assert random_return < perfect - 3.0
    assert learned >= perfect - 0.5, (learned, random_return)


def test_masked_actions_are_never_sampled_or_chosen() -> None:
    env = _probe(num_envs=16, action_masks=True)
    obs_spaces, act_spaces = agent_spaces(env)
    agent = IPPO(obs_spaces, act_spaces, net_config=TINY_NETWORK, seed=1, action_std_init=0.5)
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        sampled = agent.get_action(obs)[0]
        greedy = agent.greedy_action(obs)
        for seeker in ("seeker_0", "seeker_1"):
            mask = obs[seeker]["action_mask"].astype(bool)
            live = mask.any(axis=1)  # an absent agent (episode over) has no legal action
            rows = np.flatnonzero(live)
            assert mask[rows, sampled[seeker][rows]].all()
            assert mask[rows, greedy[seeker][rows]].all()
        obs = env.step(sampled)[0]


def _unit_lrs(agent: IPPO) -> list[dict[str, float]]:
    """Each unit optimizer's learning rate at each ``learn`` call from now on."""
    seen: list[dict[str, float]] = []
    original = agent.learn

    def recording_learn(rollouts, masks=None, _orig=original):
        seen.append({n: o.param_groups[0]["lr"] for n, o in agent.optimizers.items()})
        return _orig(rollouts, masks)

    agent.learn = recording_learn  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("anneal", [True, False])
def test_anneal_lr_decays_every_unit_over_the_budget(anneal: bool) -> None:
    env = _probe(num_envs=4)
    obs, act = agent_spaces(env)
    agent = IPPO(obs, act, net_config=TINY_NETWORK, seed=0, lr=1e-3, learn_step=64,
                 batch_size=32, update_epochs=1, action_std_init=0.5, anneal_lr=anneal)
    units = len(agent.optimizers)
    assert units > 1  # the schedule must reach every unit's optimizer
    seen = _unit_lrs(agent)
    # 2 rollouts of 64 steps in each of two calls, budget 512 steps per member: the k-th
    # update follows k * 64 steps
    train_multi_agent_on_policy_member(agent, env, 128, seed=0, max_steps=512)
    train_multi_agent_on_policy_member(agent, env, 128, seed=1, max_steps=512)
    expected = [1e-3 * (1 - k / 8) if anneal else 1e-3 for k in range(4)]
    assert [sorted(set(lrs.values())) for lrs in seen] == [[pytest.approx(e)] for e in expected]
    assert agent.lr == 1e-3  # what mutation reads and changes


@pytest.mark.parametrize("training", [{}, {"num_workers": 2}], ids=["in-process", "workers"])
def test_anneal_lr_through_the_trainer_resumes_exactly(training: dict, tmp_path) -> None:
    manifest = _manifest("tournament")
    manifest["algorithm"]["anneal_lr"] = True
    manifest["training"].update(training)
    # mutations that leave the optimizers and learn_step alone, so the final learning rates
    # are those of each member's last update
    manifest["mutation"]["probabilities"] = {"no_mut": 0.5, "arch_mut": 0.0, "new_layer": 0.0,
                                             "params_mut": 0.0, "act_mut": 0.0, "rl_hp_mut": 0.5}
    manifest["mutation"]["rl_hp_selection"] = {"batch_size": {"min": 8, "max": 64}}
    run = run_and_resume(manifest_trainer(manifest, seed=5), tmp_path,
                         manifest["training"]["evo_steps"])
    assert_same_learning_rates(run.full_pop, run.pop)
    budget = manifest["training"]["max_steps"]
    for agent in run.pop:
        # the last update came after all but the last rollout of the member's steps
        last = (agent.steps[-1] - agent.learn_step) / budget
        for optimizer in agent.optimizers.values():
            assert optimizer.param_groups[0]["lr"] == pytest.approx(agent.lr * (1 - last))


@pytest.mark.parametrize("config", [{}, {"action_masks": True, "early_exit": True}],
                         ids=["plain", "masked"])
def test_closed_form_updates_equal_the_autograd_updates(config: dict, monkeypatch) -> None:
    """Every unit's update (categorical seekers, masked or not, and the Gaussian pointer)
    takes its gradient in closed form into flat buffers; three rollouts and updates give
    the weights autograd gives."""
    from agilerl.networks.policy_value_gradient import PolicyValueChain

    torch.set_num_threads(1)
    agents = []
    for closed_form in (True, False):
        if not closed_form:
            monkeypatch.setattr(PolicyValueChain, "of", classmethod(lambda cls, network: None))
        env = _probe(num_envs=4, **config)
        obs, act = agent_spaces(env)
        agent = IPPO(obs, act, net_config=TINY_NETWORK, seed=0, lr=3e-3, learn_step=64,
                     batch_size=32, action_std_init=0.5)
        train_multi_agent_on_policy_member(agent, env, 192, seed=0)
        agents.append(agent)
    flats = agents[0].__dict__.get("_flat_units", {})
    assert set(flats) == set(agents[0].units) and all(flats.values())
    assert not agents[1].__dict__.get("_flat_units")
    for name, network in agents[0].networks.items():
        for a, b in zip(network.parameters(), agents[1].networks[name].parameters(),
                        strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
