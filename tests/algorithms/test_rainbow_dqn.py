"""RainbowDQN: probe-env learning, exact repeats, noise, mutations of its network, PER use."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agilerl.algorithms import RainbowDQN
from agilerl.components.replay_buffer import (
    MultiStepReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)
from agilerl.envs.probe import make_probe_vector_env
from agilerl.training.experience import train_off_policy_member

OBS = torch.tensor([[0.0], [1.0]])
GAMMA = 0.9


def _rainbow(env_name: str, net: dict, **hp) -> tuple[RainbowDQN, object]:
    env = make_probe_vector_env(env_name, 4)
    params = dict(lr=1e-2, batch_size=32, learn_step=2, tau=0.1, gamma=GAMMA,
                  v_min=-2.0, v_max=2.0, num_atoms=21, noise_std=0.1)
    params.update(hp)
    agent = RainbowDQN(env.single_observation_space, env.single_action_space,
                       net_config=net, seed=0, **params)
    return agent, env


def _q(agent: RainbowDQN) -> np.ndarray:
    with torch.no_grad():
        return agent.actor(OBS, noise=False).numpy()


@pytest.mark.parametrize(
    ("env_name", "expected"),
    [
        ("ConstantRewardEnv", [[1.0], [None]]),
        ("ObsDependentRewardEnv", [[-1.0], [1.0]]),
        ("DiscountedRewardEnv", [[GAMMA], [1.0]]),
    ],
)
def test_rainbow_learns_probe_q_values(env_name, expected, small_net):
    agent, env = _rainbow(env_name, small_net)
    train_off_policy_member(agent, env, ReplayBuffer(1000, seed=0), 1600, seed=1)
    q = _q(agent)
    for row, want in zip(q, expected, strict=True):
        for value, target in zip(row, want, strict=True):
            if target is not None:  # observation never seen in this env
                assert value == pytest.approx(target, abs=0.2), (env_name, q)


@pytest.mark.parametrize(
    ("env_name", "best"), [("FixedObsPolicyEnv", [1, None]), ("ObsPolicyEnv", [0, 1])]
)
def test_rainbow_learns_probe_policies(env_name, best, small_net):
    """Noisy exploration stops trying a bad action once it is known to be worse, so only the
    chosen action's value is learned exactly; the greedy policy must be the right one."""
    agent, env = _rainbow(env_name, small_net)
    train_off_policy_member(agent, env, ReplayBuffer(1000, seed=0), 1600, seed=1)
    q = _q(agent)
    for row, action in zip(q, best, strict=True):
        if action is not None:
            assert int(row.argmax()) == action and row[action] == pytest.approx(1.0, abs=0.2), q
    assert agent.test(env) == pytest.approx(1.0)


@pytest.mark.parametrize("memory_kind", ["per", "n_step", "per_n_step_combined"])
def test_rainbow_learns_discounting_from_every_memory(memory_kind, small_net):
    """n-step targets discount by gamma ** n; PER weights keep the values unbiased."""
    combined = memory_kind.endswith("combined")
    agent, env = _rainbow("DiscountedRewardEnv", small_net, combined_reward=combined)
    if memory_kind == "n_step":
        memory: ReplayBuffer = MultiStepReplayBuffer(1000, n_step=3, gamma=GAMMA, seed=0)
    else:
        memory = PrioritizedReplayBuffer(1000, alpha=0.6, seed=0,
                                         n_step=3 if combined else 1, gamma=GAMMA,
                                         keep_one_step=combined)
    train_off_policy_member(agent, env, memory, 1600, seed=1, max_steps=1600)
    assert _q(agent).reshape(-1) == pytest.approx([GAMMA, 1.0], abs=0.2)


def test_same_seed_twice_is_identical_and_noise_is_resampled(small_net):
    runs = []
    for _ in range(2):
        agent, env = _rainbow("ObsPolicyEnv", small_net)
        memory = PrioritizedReplayBuffer(500, alpha=0.6, seed=0, n_step=2, gamma=GAMMA)
        before = agent.actor.noisy_head("value").noisy_layer(0).eps_in.clone()
        train_off_policy_member(agent, env, memory, 400, seed=3, max_steps=400)
        after = agent.actor.noisy_head("value").noisy_layer(0).eps_in
        assert not torch.equal(before, after)  # noise drawn again after learning steps
        runs.append((agent.get_state(), memory.state_dict()))
    (a, ma), (b, mb) = runs
    for net in a["weights"]:
        for key, tensor in a["weights"][net].items():
            assert torch.equal(tensor, b["weights"][net][key]), (net, key)
    assert np.array_equal(ma["tree"], mb["tree"])


def test_noise_changes_actions_only_while_training(small_net):
    agent, _ = _rainbow("ObsPolicyEnv", small_net, noise_std=5.0)
    obs = np.linspace(-3, 3, 64, dtype=np.float32).reshape(-1, 1)
    greedy = agent.greedy_action(obs)
    assert np.array_equal(greedy, agent.greedy_action(obs))
    noisy = []
    for _ in range(5):
        agent.actor.reset_noise(agent.torch_rng)
        noisy.append(agent.explore_action(obs, 0))
    assert any(not np.array_equal(n, greedy) for n in noisy)
    with torch.no_grad():
        dist = agent.actor.dist(torch.as_tensor(obs))
    assert torch.allclose(dist.sum(-1), torch.ones(64, 2))


@pytest.mark.parametrize("output_vanish", [True, False])
def test_noise_scales_start_as_the_reference_sets_them(output_vanish, small_net):
    """``noise_std / sqrt(fan_in)`` (weights) and ``/ sqrt(fan_out)`` (biases); a vanished
    output layer, whose means start at a tenth, has a tenth of that noise too."""
    net = {**small_net, "head_config": {**small_net["head_config"],
                                        "output_vanish": output_vanish}}
    agent, _ = _rainbow("ConstantRewardEnv", net, noise_std=0.5)
    for head in agent.actor.heads.values():
        layers = head.noisy_layers()
        for i, layer in enumerate(layers):
            scale = 0.1 if output_vanish and i == len(layers) - 1 else 1.0
            out_features, in_features = layer.weight.shape
            torch.testing.assert_close(layer.weight_sigma, torch.full_like(
                layer.weight_sigma, scale * 0.5 / in_features ** 0.5))
            torch.testing.assert_close(layer.bias_sigma, torch.full_like(
                layer.bias_sigma, scale * 0.5 / out_features ** 0.5))


def test_per_priorities_change_what_is_sampled(small_net):
    """After learning, high-loss transitions are drawn more often than uniformly."""
    agent, env = _rainbow("ObsDependentRewardEnv", small_net)
    memory = PrioritizedReplayBuffer(256, alpha=1.0, seed=0)
    train_off_policy_member(agent, env, memory, 256, seed=0, learning_delay=10**9)
    uniform = memory._tree[memory._leaves: memory._leaves + len(memory)].copy()
    assert np.all(uniform == uniform[0])  # nothing learned yet: all at the max priority
    batch = memory.sample(32, beta=0.4, rng=np.random.default_rng(0))
    _, priorities = agent.learn_prioritized(batch)
    memory.update_priorities(batch["indices"], priorities)
    leaves = memory._tree[memory._leaves: memory._leaves + len(memory)]
    assert not np.all(leaves == leaves[0])
    assert priorities.shape == (32,) and np.all(priorities > 0)
    draws = np.concatenate([memory.sample(64, rng=np.random.default_rng(i))["indices"]
                            for i in range(200)])
    counts = np.bincount(draws, minlength=len(memory))
    top, low = int(np.argmax(leaves)), int(np.argmin(leaves))
    assert counts[top] / counts[low] == pytest.approx(leaves[top] / leaves[low], rel=0.5)
    # ... and the loop does it by itself, so sampling follows the priorities.
    before = leaves.copy()
    train_off_policy_member(agent, env, memory, 64, seed=1, max_steps=1000)
    assert not np.array_equal(before, memory._tree[memory._leaves: memory._leaves + len(memory)])


def test_learn_on_a_prioritized_batch_reports_float_metrics_only(small_net):
    """The metrics of a step are floats, a prioritized batch's included: the new priorities
    come from ``learn_prioritized`` beside them, for the same step."""
    agent, env = _rainbow("ObsDependentRewardEnv", small_net)
    memory = PrioritizedReplayBuffer(256, alpha=1.0, seed=0)
    train_off_policy_member(agent, env, memory, 128, seed=0, learning_delay=10**9)
    batch = memory.sample(32, np.random.default_rng(0), beta=0.4)
    twin = RainbowDQN.from_state(copy.deepcopy(agent.get_state()))
    metrics = agent.learn(batch)
    assert set(metrics) == {"loss"} and all(type(v) is float for v in metrics.values())
    same, priorities = twin.learn_prioritized(batch)
    assert same == metrics and priorities.shape == (32,) and np.all(priorities > 0)


def test_importance_weights_follow_annealed_beta(small_net):
    agent, _ = _rainbow("ConstantRewardEnv", small_net, beta=0.4)
    assert agent.per_beta(0.0) == pytest.approx(0.4)
    assert agent.per_beta(0.5) == pytest.approx(0.7)
    assert agent.per_beta(2.0) == pytest.approx(1.0)


def test_bad_distribution_settings_are_refused(small_net):
    with pytest.raises(ValueError, match="num_atoms"):
        _rainbow("ConstantRewardEnv", small_net, num_atoms=1)


# ---------------------------------------------------------------------- network mutations
MUTATIONS = [
    {"target": "head:advantage", "op": "add_nodes", "layer": 0, "nodes": 16, "seed": 1},
    {"target": "head:value", "op": "add_layer", "seed": 2},
    {"target": "head:advantage", "op": "remove_nodes", "layer": 0, "nodes": 16, "seed": 3},
    {"target": "encoder:encoder", "op": "add_nodes", "layer": 0, "nodes": 16, "seed": 4},
    {"target": "latent:encoder", "op": "add_nodes", "nodes": 8, "seed": 5},
    {"target": "all", "op": "activation", "activation": "Tanh", "seed": 0},
]


@pytest.mark.parametrize("plan", MUTATIONS, ids=lambda p: f"{p['target']}-{p['op']}")
def test_mutations_reach_online_and_target_alike_and_keep_working(plan, small_net):
    agent, env = _rainbow("ObsPolicyEnv", small_net)
    obs = torch.linspace(-1, 1, 8).reshape(-1, 1)
    with torch.no_grad():
        before_mean = agent.actor(obs, noise=False)
    claim = agent.actor.preserves_function(plan)
    agent.apply_architecture_mutation("actor", plan)
    with torch.no_grad():  # the network says what it keeps (the heads have layer norm)
        kept = torch.allclose(agent.actor(obs, noise=False), before_mean, atol=2e-3)
    assert kept == claim == (plan["op"] == "add_nodes")
    assert agent.actor.architecture() == agent.actor_target.architecture()
    assert isinstance(agent.actor, type(agent.actor_target))
    heads = agent.actor.architecture()["heads"]
    assert all(h["noise_std"] == 0.1 for h in heads.values())
    preserving = plan["op"] in ("add_nodes",) or (plan["op"] == "add_layer")
    if preserving and plan["target"].startswith("head"):
        head = agent.actor.noisy_head(plan["target"].split(":")[1])
        if plan["op"] == "add_nodes":  # function kept (up to the layer norm's epsilon) ...
            with torch.no_grad():
                assert torch.allclose(agent.actor(obs, noise=False), before_mean, atol=2e-3)
            # ... and the new units add no noise downstream either
            assert not head.noisy_layer(1).weight_sigma[:, 32:].any()
        else:  # the inserted identity layer starts noise-free
            assert not head.noisy_layer(-2).weight_sigma.any()
    # still learns, clones and round-trips through a checkpoint state
    memory = ReplayBuffer(500, seed=0)
    train_off_policy_member(agent, env, memory, 200, seed=2)
    clone = agent.clone()
    assert clone.actor.architecture() == agent.actor.architecture()
    for name, net in agent.networks.items():
        other = clone.networks[name].state_dict()
        for key, tensor in net.state_dict().items():
            assert torch.equal(tensor, other[key]), (name, key)  # noise buffers included
    x = np.zeros((2, 1), dtype=np.float32)
    assert np.array_equal(clone.explore_action(x, 0), agent.explore_action(x, 0))


def test_rainbow_builds_its_encoder_through_the_factory():
    """A composite observation gets the multi-input encoder under the noisy dueling heads."""
    from gymnasium import spaces

    from agilerl.modules.multi_input import MultiInputEncoder

    space = spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (3,), np.float32),
                         "mode": spaces.Discrete(4)})
    net = {"latent_dim": 8, "encoder_config": {"arch": "multiinput",
                                               "mlp_config": {"hidden_size": [16]}},
           "head_config": {"hidden_size": [16]}}
    agent = RainbowDQN(space, spaces.Discrete(2), net_config=net, seed=0, batch_size=4,
                       v_min=-1.0, v_max=1.0)
    assert isinstance(agent.actor.encoder("encoder"), MultiInputEncoder)
    rng = np.random.default_rng(0)
    batch = {"pos": rng.uniform(-1, 1, (4, 3)).astype(np.float32),
             "mode": rng.integers(0, 4, size=4)}
    assert agent.explore_action(batch, 0).shape == (4,)
    stored = agent.obs_encoder.storable(batch)
    metrics, priorities = agent.learn_prioritized({
        "obs": stored, "next_obs": stored, "action": np.zeros(4, np.int64),
        "reward": np.ones(4, np.float32), "done": np.zeros(4, np.float32),
        "n": np.full(4, 3), "weights": np.ones(4, np.float32), "indices": np.arange(4)})
    assert np.isfinite(metrics["loss"]) and priorities.shape == (4,)
    clone = RainbowDQN.from_state(copy.deepcopy(agent.get_state()))
    np.testing.assert_array_equal(clone.greedy_action(batch), agent.greedy_action(batch))


def test_gradients_are_clipped_to_the_max_norm(small_net):
    from agilerl.algorithms.rainbow_dqn import MAX_GRAD_NORM

    agent, _ = _rainbow("ObsDependentRewardEnv", small_net)
    batch = {"obs": np.zeros((8, 1), np.float32), "action": np.zeros(8, np.int64),
             "reward": np.ones(8, np.float32), "next_obs": np.ones((8, 1), np.float32),
             "done": np.ones(8, np.float32),
             "weights": np.full(8, 1e4, np.float32)}  # a loss this large has a huge gradient
    agent.learn(batch)
    grads = [p.grad for p in agent.actor.parameters() if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    assert grads and float(total) <= MAX_GRAD_NORM * (1 + 1e-4)
