"""Recurrent PPO: state carried and reset, exact BPTT replay, memory learned, resume exact."""

from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from gymnasium.vector import AutoresetMode

from agilerl.algorithms import PPO
from agilerl.envs.memory import make_memory_vector_env
from agilerl.hpo.mutation import Mutations
from agilerl.models import ManifestError
from agilerl.training.experience import train_on_policy_member

torch.set_num_threads(1)

LSTM_NET = {"latent_dim": 16, "encoder_config": {"arch": "lstm", "hidden_state_size": 32},
            "head_config": {"hidden_size": [32]}}
MLP_NET = {"latent_dim": 16, "encoder_config": {"arch": "mlp", "hidden_size": [32]},
           "head_config": {"hidden_size": [32]}}


def _agent(env, recurrent: bool = True, **hp) -> PPO:
    params = dict(lr=3e-3, batch_size=16 if recurrent else 128, learn_step=256, gamma=0.9,
                  num_envs=env.num_envs, ent_coef=0.01, max_seq_len=8, update_epochs=4)
    params.update(hp)
    return PPO(env.single_observation_space, env.single_action_space, seed=0,
               net_config=copy.deepcopy(LSTM_NET if recurrent else MLP_NET),
               recurrent=recurrent, **params)


def _train(agent: PPO, env, calls: int) -> None:
    for call in range(calls):
        train_on_policy_member(agent, env, 2048, seed=call)


# ---------------------------------------------------------------------- learning
def test_recurrent_ppo_remembers_the_cue_and_feed_forward_ppo_cannot():
    env = make_memory_vector_env(8, delay=2)
    recurrent, feed_forward = _agent(env), _agent(env, recurrent=False)
    _train(recurrent, env, 3)
    _train(feed_forward, env, 3)
    # 64 greedy episodes each: remembering earns 1 per episode, guessing 0 on average
    assert recurrent.test(env, loop=8, seed=100) == pytest.approx(1.0)
    assert feed_forward.test(env, loop=8, seed=100) < 0.5


@pytest.mark.slow
def test_recurrent_ppo_solves_a_long_memory_task_feed_forward_ppo_cannot():
    env = make_memory_vector_env(8, delay=8)
    recurrent, feed_forward = _agent(env), _agent(env, recurrent=False)
    _train(recurrent, env, 12)
    _train(feed_forward, env, 12)
    assert recurrent.test(env, loop=8, seed=100) >= 0.95
    assert feed_forward.test(env, loop=8, seed=100) < 0.5


def test_same_seed_twice_gives_the_same_agent():
    env = make_memory_vector_env(4, delay=3)
    runs = []
    for _ in range(2):
        agent = _agent(env, num_envs=4, learn_step=64)
        train_on_policy_member(agent, env, 256, seed=7)
        runs.append(agent)
    for a, b in zip(runs[0].actor_critic.parameters(), runs[1].actor_critic.parameters(),
                    strict=True):
        assert torch.equal(a, b)


# ---------------------------------------------------------------------- state plumbing
def test_the_state_is_advanced_in_place_and_reset_per_sub_env():
    env = make_memory_vector_env(3)
    agent = _agent(env, num_envs=3)
    hidden = agent.initial_hidden(3)
    assert set(hidden) == {"encoder"} and torch.equal(hidden["encoder"], torch.zeros(3, 2, 32))
    obs, _ = env.reset(seed=0)
    before = hidden["encoder"]
    agent.get_action(obs, hidden)
    assert not torch.equal(hidden["encoder"], before)
    assert torch.equal(before, torch.zeros(3, 2, 32))  # the saved state is not overwritten
    value_state = dict(hidden)
    agent.get_value(obs, hidden)
    assert hidden["encoder"] is value_state["encoder"]  # get_value leaves it alone
    agent.reset_hidden(hidden, np.array([False, True, False]))
    assert torch.equal(hidden["encoder"][1], torch.zeros(2, 32))
    assert hidden["encoder"][0].abs().sum() > 0
    # without a state an agent acts from a zero state (e.g. one call on a fresh episode)
    assert agent.greedy_action(obs).shape == (3,)
    assert _agent(env, recurrent=False).initial_hidden(3) is None


@pytest.mark.parametrize(("kind", "shared", "mode"), [
    ("chunked", True, AutoresetMode.NEXT_STEP), ("fifty_percent_overlap", True, AutoresetMode.NEXT_STEP),
    ("maximum", True, AutoresetMode.NEXT_STEP), ("chunked", False, AutoresetMode.NEXT_STEP),
    ("chunked", True, AutoresetMode.SAME_STEP),
])
def test_bptt_replays_the_rollout_exactly_before_the_first_update(kind, shared, mode):
    """Each sequence starts from the stored state and zeroes it at episode starts, so the
    first update sees the log-probabilities and values the rollout recorded (with one
    LSTM shared by both heads, or one per head; in both autoreset modes)."""
    env = make_memory_vector_env(4, delay=3, autoreset_mode=mode)
    agent = _agent(env, num_envs=4, learn_step=96, max_seq_len=5, bptt_sequence_type=kind,
                   share_encoders=shared)
    assert len(agent.initial_hidden(4)) == (1 if shared else 2)
    train_on_policy_member(agent, env, 192, seed=0)  # trained weights, non-zero states
    captured = {}

    def capture(rollout):
        captured["seq"] = rollout.sequences(5, kind)
        return {}

    agent.learn = capture
    train_on_policy_member(agent, env, 96, seed=3)
    seq = captured["seq"]
    with torch.no_grad():
        hidden = {k: torch.as_tensor(v) for k, v in seq["hidden"].items()}
        logits, values = agent.actor_critic.sequence(
            torch.as_tensor(seq["obs"]), hidden, torch.as_tensor(seq["starts"]))
        log_probs = torch.log_softmax(logits, -1).gather(
            -1, torch.as_tensor(seq["actions"]).unsqueeze(-1)).squeeze(-1)
    mask = seq["mask"]
    assert seq["starts"][1:].any()  # episodes do start inside sequences
    assert np.allclose(log_probs.numpy()[mask], seq["log_probs"][mask], atol=1e-5)
    assert np.allclose(values.numpy()[mask], seq["values"][mask], atol=1e-5)


def test_without_max_seq_len_each_sub_env_rollout_is_one_sequence():
    env = make_memory_vector_env(4, delay=2)
    agent = _agent(env, num_envs=4, learn_step=64, max_seq_len=None)
    seen = {}
    learn = agent.learn

    def spy(rollout):
        seen["n"] = rollout.sequences(rollout.pos, "chunked")["obs"].shape[:2]
        return learn(rollout)

    agent.learn = spy
    result = train_on_policy_member(agent, env, 64, seed=0)
    assert seen["n"] == (16, 4) and result["learn_updates"] == 1
    assert np.isfinite(result["metrics"]["loss"])


def test_recurrent_ppo_with_continuous_actions_acts_in_bounds_and_learns():
    from agilerl.envs.probe import make_probe_vector_env

    env = make_probe_vector_env("ObsPolicyContEnv", 8)
    agent = _agent(env, num_envs=8, learn_step=64, batch_size=8, lr=1e-2, ent_coef=0.0,
                   action_std_init=0.5)
    for call in range(5):
        train_on_policy_member(agent, env, 1024, seed=call)
    obs = np.array([[0.0], [1.0]], dtype=np.float32)
    greedy = agent.greedy_action(obs, agent.initial_hidden(2)).reshape(-1)
    assert greedy == pytest.approx([0.0, 1.0], abs=0.2)


# ---------------------------------------------------------------------- settings
def test_recurrent_ppo_needs_an_lstm_encoder_and_an_lstm_needs_recurrent_ppo():
    env = make_memory_vector_env(2)
    space, actions = env.single_observation_space, env.single_action_space
    with pytest.raises(ManifestError, match="network.encoder_config.arch: .*needs an lstm"):
        PPO(space, actions, net_config=MLP_NET, recurrent=True)
    with pytest.raises(ManifestError, match="algorithm.recurrent: .*set algorithm.recurrent"):
        PPO(space, actions, net_config=LSTM_NET, recurrent=False)


def test_a_recurrent_manifest_with_an_mlp_encoder_is_a_manifest_error_in_the_cli(tmp_path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump({
        "algorithm": {"name": "PPO", "recurrent": True, "learn_step": 64},
        "environment": {"name": "CartPole-v1", "num_envs": 2},
        "network": copy.deepcopy(MLP_NET),
        "training": {"max_steps": 128, "evo_steps": 64, "pop_size": 1},
    }))
    done = subprocess.run([sys.executable, "-m", "agilerl.train", str(manifest), "--no-verbose",
                           "--run-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "network.encoder_config.arch" in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_sequence_type_is_refused_when_the_manifest_is_read():
    from agilerl.models import PPOSpec

    with pytest.raises(ValueError, match="bptt_sequence_type"):
        PPOSpec(recurrent=True, bptt_sequence_type="sliding")


# ---------------------------------------------------------------------- mutation
def test_lstm_mutations_on_the_agent_keep_it_acting_and_learning():
    env = make_memory_vector_env(4, delay=2)
    agent = _agent(env, num_envs=4, learn_step=64)
    train_on_policy_member(agent, env, 64, seed=0)
    obs, _ = env.reset(seed=1)
    before = agent.greedy_action(obs, agent.initial_hidden(4))
    logits_before = agent.actor_critic.policy(agent.to_tensor(obs))
    plan = agent.actor_critic.draw_plan("add_nodes", np.random.default_rng(0), [])
    while not plan["target"].startswith("encoder:"):
        plan = agent.actor_critic.draw_plan("add_nodes", np.random.default_rng(plan["seed"]), [])
    agent.apply_architecture_mutation("actor_critic", plan)
    assert agent.actor_critic.encoder("encoder").arch["hidden_state_size"] == 32 + plan["nodes"]
    assert agent.initial_hidden(4)["encoder"].shape == (4, 2, 32 + plan["nodes"])
    assert torch.allclose(agent.actor_critic.policy(agent.to_tensor(obs)), logits_before,
                          atol=1e-6)  # adding hidden units keeps the function
    assert np.array_equal(agent.greedy_action(obs, agent.initial_hidden(4)), before)
    mutations = Mutations(no_mutation=0, architecture=1, new_layer_prob=0.5, parameters=0,
                          activation=0, rl_hp=0, rand_seed=0)
    for _ in range(6):
        mutations.mutation([agent])
        train_on_policy_member(agent, env, 64, seed=2)
    clone = agent.clone()
    assert clone.actor_critic.architecture() == agent.actor_critic.architecture()
    assert np.array_equal(clone.greedy_action(obs, clone.initial_hidden(4)),
                          agent.greedy_action(obs, agent.initial_hidden(4)))


def test_parameter_mutation_reaches_the_lstm_weights():
    env = make_memory_vector_env(2)
    agent = _agent(env, num_envs=2)
    lstm = agent.actor_critic.encoder("encoder").lstm
    before = {n: p.clone() for n, p in lstm.named_parameters()}
    Mutations(no_mutation=0, architecture=0, new_layer_prob=0, parameters=1, activation=0,
              rl_hp=0, rand_seed=0).mutation([agent])
    changed = {n for n, p in lstm.named_parameters() if not torch.equal(p, before[n])}
    assert changed == {"weight_ih_l0", "weight_hh_l0"}  # matrices, never the biases
