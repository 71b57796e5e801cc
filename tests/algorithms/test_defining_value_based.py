"""Defining features of the value-based agents (DQN, CQN, RainbowDQN), checked against the
textbook formulas on every code path a user reaches.

DQN and CQN learn in closed form into flat buffers (an MLP network, the default), in
closed form per tensor (where flat buffers do not fit), through autograd (a network the
closed form does not cover) and, for a population, several members in one stacked step.
RainbowDQN learns in closed form (an MLP encoder) or through autograd. Each test computes
what the update must compute by hand, from the networks as they were before it, and
compares it with what ``learn`` reports or leaves behind.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import CQN, DQN, RainbowDQN
from agilerl.algorithms.stacked_update import group_key, learn_together
from agilerl.components.replay_buffer import PrioritizedReplayBuffer
from agilerl.envs.probe import make_probe_vector_env
from agilerl.networks import flat_params
from agilerl.networks.mlp_gradient import MLPChain
from agilerl.networks.rainbow_gradient import RainbowChain
from agilerl.training.experience import train_off_policy_member

OBS = spaces.Box(-1.0, 1.0, (5,), np.float32)
ACTIONS = 3
Batch = dict[str, np.ndarray]


def _net(activation: str) -> dict[str, Any]:
    """Small networks whose outputs start at full scale (so that a wrong bootstrap shows)."""
    mlp = {"hidden_size": [8], "activation": activation}
    return {"latent_dim": 8, "encoder_config": dict(mlp),
            "head_config": {**mlp, "output_vanish": False}}


#: ReLU has a closed-form backward; PReLU and Softmax have none, so networks with them learn
#: through autograd (PReLU's parameter keeps them out of stacked updates; Softmax's does not).
CLOSED_FORM_NET, AUTOGRAD_NET, STACKED_AUTOGRAD_NET = _net("ReLU"), _net("PReLU"), _net("Softmax")
#: The single-member update paths of DQN and CQN.
PATHS = ("flat", "per_tensor", "autograd")


def _q_agent(cls: type[DQN], path: str, monkeypatch: pytest.MonkeyPatch, seed: int = 0,
             **hp: Any) -> DQN:
    """A DQN or CQN whose updates take ``path``, its target network set apart from its
    online network (another seed's weights), so that using one for the other shows."""
    if path == "per_tensor":  # flat buffers refused: the closed form into each .grad
        monkeypatch.setattr(flat_params.FlatTraining, "build", classmethod(lambda *_: None))
    net = AUTOGRAD_NET if path == "autograd" else CLOSED_FORM_NET
    params: dict[str, Any] = {"lr": 1e-2, "gamma": 0.9, "tau": 0.25, **hp}
    agent = cls(OBS, spaces.Discrete(ACTIONS), net_config=net, seed=seed, **params)
    other = cls(OBS, spaces.Discrete(ACTIONS), net_config=net, seed=seed + 100, **params)
    agent.actor_target.load_state_dict(other.actor.state_dict())
    assert (MLPChain.of(agent.actor) is None) == (path == "autograd")
    return agent


def _check_path(agent: DQN, path: str) -> None:
    """The update just made took ``path``."""
    assert (agent.__dict__.get("_flat") is not None) == (path == "flat")


def _q_batch(seed: int, rows: int = 16) -> Batch:
    rng = np.random.default_rng(seed)
    return {"obs": rng.uniform(-1, 1, (rows, 5)).astype(np.float32),
            "next_obs": rng.uniform(-1, 1, (rows, 5)).astype(np.float32),
            "action": rng.integers(0, ACTIONS, rows),
            "reward": rng.uniform(-1, 1, rows).astype(np.float32),
            "done": (np.arange(rows) % 3 == 0).astype(np.float32)}


@torch.no_grad()
def _textbook_target(agent: DQN, data: Batch, *, bootstrap: str = "target",
                     double: bool | None = None) -> torch.Tensor:
    """``y = r + gamma * (1 - terminated) * Q'(s', a*)``, ``Q'`` the target network (or the
    ``bootstrap`` one), ``a*`` the greedy action of the online network for double DQN, of
    ``Q'`` otherwise."""
    double = agent.double if double is None else double
    next_obs = torch.as_tensor(data["next_obs"])
    q_boot = (agent.actor_target if bootstrap == "target" else agent.actor)(next_obs)
    chooser = agent.actor(next_obs) if double else q_boot
    best = chooser.argmax(-1, keepdim=True)
    q_next = q_boot.gather(1, best).squeeze(1)
    reward, done = torch.as_tensor(data["reward"]), torch.as_tensor(data["done"])
    return reward + agent.gamma * (1.0 - done) * q_next


@torch.no_grad()
def _td_loss(agent: DQN, data: Batch, target: torch.Tensor) -> float:
    """``mean((Q(s, a) - y)^2)``."""
    q = agent.actor(torch.as_tensor(data["obs"]))
    q_taken = q.gather(1, torch.as_tensor(data["action"]).reshape(-1, 1)).squeeze(1)
    return float((q_taken - target).square().mean())


def _assert_discriminates(expected: float, *others: float) -> None:
    """The batch tells the right value from each wrong one (else the test proves nothing)."""
    for other in others:
        assert abs(other - expected) > 1e-3 * max(1.0, abs(expected)), (expected, others)


def _assert_soft_update(old_target: list[torch.Tensor], agent: DQN | RainbowDQN) -> None:
    """``theta_target <- tau * theta + (1 - tau) * theta_target`` after the update."""
    for old, online, target in zip(old_target, agent.actor.parameters(),
                                   agent.actor_target.parameters(), strict=True):
        want = old + agent.tau * (online.detach() - old)
        torch.testing.assert_close(target.detach(), want, rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(o, t) for o, t in zip(
        old_target, agent.actor_target.parameters(), strict=True))


# ---------------------------------------------------------------------------- DQN
@pytest.mark.parametrize("double", [False, True], ids=["dqn", "double"])
@pytest.mark.parametrize("path", PATHS)
def test_dqn_td_target_bootstraps_from_the_target_network(
        path: str, double: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the TD target: the target network values ``s'`` (not the online one), double
    DQN lets the online network choose the action and the target network value it, and
    nothing is bootstrapped past a terminated step."""
    agent = _q_agent(DQN, path, monkeypatch, double=double)
    data = _q_batch(0)
    expected = _td_loss(agent, data, _textbook_target(agent, data))
    no_mask = {**data, "done": np.zeros_like(data["done"])}
    _assert_discriminates(
        expected, _td_loss(agent, data, _textbook_target(agent, data, bootstrap="online")),
        _td_loss(agent, data, _textbook_target(agent, data, double=not double)),
        _td_loss(agent, data, _textbook_target(agent, no_mask)))
    metrics = agent.learn(data)
    _check_path(agent, path)
    assert metrics["loss"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("path", PATHS)
def test_dqn_target_network_trails_by_tau(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the soft target update: after each step the target network moves a fraction
    ``tau`` of the way to the online network (not a copy of it, and not left behind)."""
    agent = _q_agent(DQN, path, monkeypatch)
    old_target = [p.detach().clone() for p in agent.actor_target.parameters()]
    agent.learn(_q_batch(1))
    _check_path(agent, path)
    _assert_soft_update(old_target, agent)


def _stacked_members(cls: type[DQN], net: dict[str, Any], double: bool) -> list[DQN]:
    members = []
    for i, (tau, gamma) in enumerate([(0.25, 0.9), (0.1, 0.8)]):
        extra = {"cql_alpha": 1.5 + i} if cls is CQN else {}
        member = cls(OBS, spaces.Discrete(ACTIONS), net_config=net, seed=i, lr=1e-2,
                     tau=tau, gamma=gamma, double=double, **extra)
        other = cls(OBS, spaces.Discrete(ACTIONS), net_config=net, seed=i + 100)
        member.actor_target.load_state_dict(other.actor.state_dict())
        members.append(member)
    assert group_key(members[0]) is not None and group_key(members[0]) == group_key(members[1])
    return members


@pytest.mark.parametrize("double", [False, True], ids=["dqn", "double"])
@pytest.mark.parametrize("net", [CLOSED_FORM_NET, STACKED_AUTOGRAD_NET],
                         ids=["closed_form", "autograd"])
def test_stacked_dqn_members_learn_the_textbook_target_and_trail_by_tau(
        net: dict[str, Any], double: bool) -> None:
    """Guards the stacked update of a population (several members in one step): each
    member's TD target bootstraps from its own target network (double: the online network
    chooses), stops at termination, and each target network trails its own by its tau."""
    members = _stacked_members(DQN, net, double)
    batches = [_q_batch(10 + i) for i in range(len(members))]
    expected = [_td_loss(m, b, _textbook_target(m, b)) for m, b in zip(members, batches,
                                                                        strict=True)]
    old_targets = [[p.detach().clone() for p in m.actor_target.parameters()] for m in members]
    metrics = learn_together(members, batches)
    for member, got, want, old in zip(members, metrics, expected, old_targets, strict=True):
        assert got["loss"] == pytest.approx(want, rel=1e-5)
        _assert_soft_update(old, member)


# ---------------------------------------------------------------------------- CQN
def _cqn_terms(agent: CQN, network: torch.nn.Module, data: Batch, target: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CQL(H): ``(0.5 * td + alpha * cql, td, cql)`` with ``td = mean((Q(s, a) - y)^2)``
    and ``cql = mean(logsumexp_a' Q(s, a') - Q(s, a))``, through ``network``."""
    q_all = network(torch.as_tensor(data["obs"]))
    q = q_all.gather(1, torch.as_tensor(data["action"]).reshape(-1, 1)).squeeze(1)
    td = (q - target).square().mean()
    cql = (torch.logsumexp(q_all, dim=-1) - q).mean()
    return 0.5 * td + agent.cql_alpha * cql, td, cql


@pytest.mark.parametrize("path", PATHS)
def test_cqn_loss_and_gradient_are_the_conservative_q_learning_ones(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards CQN's loss ``0.5 * TD + cql_alpha * (logsumexp_a' Q(s, a') - Q(s, a))``: the
    reported terms, and the gradient the update steps on (that of this loss, clipped to
    norm 1), on each update path."""
    agent = _q_agent(CQN, path, monkeypatch, cql_alpha=2.5)
    data = _q_batch(2)
    target = _textbook_target(agent, data)
    reference = copy.deepcopy(agent.actor)
    loss, td, cql = _cqn_terms(agent, reference, data, target)
    loss.backward()
    loss, td, cql = loss.detach(), td.detach(), cql.detach()
    grads = [p.grad.clone() for p in reference.parameters()]
    norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    grads = [g * torch.clamp(1.0 / (norm + 1e-6), max=1.0) for g in grads]

    metrics = agent.learn(data)
    _check_path(agent, path)
    assert metrics["loss"] == pytest.approx(float(loss), rel=1e-5)
    assert metrics["td_loss"] == pytest.approx(float(td), rel=1e-5)
    assert metrics["cql_loss"] == pytest.approx(float(cql), rel=1e-5)
    for got, want in zip(agent.actor.parameters(), grads, strict=True):
        assert got.grad is not None
        torch.testing.assert_close(got.grad, want, rtol=1e-4, atol=1e-6)


def test_stacked_cqn_members_report_their_own_conservative_loss() -> None:
    """Guards the stacked CQN update: each member's loss terms are CQL(H) with its own
    ``cql_alpha`` and its own TD target."""
    members = _stacked_members(CQN, CLOSED_FORM_NET, double=False)
    batches = [_q_batch(20 + i) for i in range(len(members))]
    expected = [[float(t.detach()) for t in _cqn_terms(m, m.actor, b, _textbook_target(m, b))]
                for m, b in zip(members, batches, strict=True)]
    for got, want in zip(learn_together(members, batches), expected, strict=True):
        assert [got["loss"], got["td_loss"], got["cql_loss"]] == pytest.approx(want, rel=1e-5)


# ---------------------------------------------------------------------------- Rainbow
V_MIN, V_MAX, ATOMS = -5.0, 5.0, 11  # atoms on the integers: exact hits are easy to make
RAINBOW_PATHS = ("closed_form", "autograd")


def _rainbow(path: str, seed: int = 3, **hp: Any) -> RainbowDQN:
    """A RainbowDQN whose updates take ``path``, with strong noise (so that training on the
    noise-free means shows) and its target network set apart from its online network."""
    net = CLOSED_FORM_NET if path == "closed_form" else AUTOGRAD_NET
    params: dict[str, Any] = {"lr": 1e-2, "gamma": 0.5, "tau": 0.25, "v_min": V_MIN,
                              "v_max": V_MAX, "num_atoms": ATOMS, "noise_std": 1.0,
                              "prior_eps": 1e-3, **hp}
    agent = RainbowDQN(OBS, spaces.Discrete(ACTIONS), net_config=net, seed=seed, **params)
    # (Seeds whose greedy next actions differ on some rows of the batch and agree on others.)
    other = RainbowDQN(OBS, spaces.Discrete(ACTIONS), net_config=net, seed=seed + 1, **params)
    agent.actor_target.load_state_dict(other.actor.state_dict())
    assert (RainbowChain.of(agent.actor) is None) == (path == "autograd")
    return agent


def _rainbow_batch() -> Batch:
    """n-step transitions: terminated rows on atoms (exact hits), a row whose shifted
    support leaves [v_min, v_max] (clamped), rows on half atoms (split)."""
    rng = np.random.default_rng(3)
    rows = 8
    return {"obs": rng.uniform(-1, 1, (rows, 5)).astype(np.float32),
            "next_obs": rng.uniform(-1, 1, (rows, 5)).astype(np.float32),
            "action": np.array([0, 1, 2, 0, 1, 2, 0, 1]),
            "reward": np.array([2.0, -3.0, 0.0, 4.5, -4.0, 0.3, 1.0, 0.0], np.float32),
            "done": np.array([1, 1, 0, 0, 0, 0, 1, 0], np.float32),
            "n": np.array([1, 2, 1, 2, 3, 1, 3, 2]),
            "weights": np.array([1.0, 0.3, 0.7, 0.5, 0.9, 0.2, 0.6, 0.8], np.float32),
            "indices": np.arange(rows)}


def _project(prob: np.ndarray, reward: float, done: float, discount: float) -> np.ndarray:
    """C51's projection (Bellemare et al. 2017, Algorithm 1) of the distribution ``prob`` on
    the support, shifted to ``r + discount * (1 - done) * z``, one atom at a time."""
    support = np.linspace(V_MIN, V_MAX, ATOMS)
    spacing = (V_MAX - V_MIN) / (ATOMS - 1)
    out = np.zeros(ATOMS)
    for z, p in zip(support, prob, strict=True):
        shifted = min(max(reward + discount * (1.0 - done) * z, V_MIN), V_MAX)
        b = (shifted - V_MIN) / spacing
        lower, upper = int(np.floor(b)), int(np.ceil(b))
        if lower == upper:
            out[lower] += p
        else:
            out[lower] += p * (upper - b)
            out[upper] += p * (b - lower)
    return out


@torch.no_grad()
def _rainbow_textbook(agent: RainbowDQN, data: Batch, *, noise: bool = True,
                      discount_n: bool = True, double: bool = True) -> np.ndarray:
    """Each row's cross-entropy ``-sum_i m_i log p_i(s, a)``: ``m`` the target network's
    distribution of the online network's greedy next action (double Q; the target's own
    with ``double=False``), projected after an n-step shift by ``gamma ** n``; ``p`` the
    online network's distribution, with its current noise."""
    log_p = agent.actor.log_dist(torch.as_tensor(data["obs"]), noise=noise)
    log_p = log_p[torch.arange(len(data["action"])), torch.as_tensor(data["action"])]
    next_obs = torch.as_tensor(data["next_obs"])
    chooser = agent.actor if double else agent.actor_target
    best = chooser(next_obs, noise=noise).argmax(-1)
    next_dist = agent.actor_target.dist(next_obs, noise=noise)
    rows = []
    for i in range(len(best)):
        steps = int(data["n"][i]) if discount_n else 1
        m = _project(next_dist[i, best[i]].double().numpy(), float(data["reward"][i]),
                     float(data["done"][i]), agent.gamma ** steps)
        rows.append(-(m * log_p[i].double().numpy()).sum())
    return np.array(rows)


@pytest.mark.parametrize("path", RAINBOW_PATHS)
def test_rainbow_loss_is_the_projected_n_step_cross_entropy(path: str) -> None:
    """Guards Rainbow's target and loss: the C51 projection (clamped, split by distance,
    exact hits kept), n-step discount ``gamma ** n``, no bootstrap past termination, double
    Q (online chooses, target distribution), training on the noisy network, the
    importance-sampling weights in the loss and the new priorities (each row's own loss
    plus ``prior_eps``)."""
    agent = _rainbow(path)
    data = _rainbow_batch()
    per_row = _rainbow_textbook(agent, data)
    weights = data["weights"].astype(np.float64)
    expected = float((per_row * weights).mean())
    _assert_discriminates(
        expected, float(per_row.mean()),
        float((_rainbow_textbook(agent, data, noise=False) * weights).mean()),
        float((_rainbow_textbook(agent, data, discount_n=False) * weights).mean()),
        float((_rainbow_textbook(agent, data, double=False) * weights).mean()))
    metrics, priorities = agent.learn_prioritized(data)
    assert (agent.__dict__.get("_flat") is not None) == (path == "closed_form")
    assert metrics["loss"] == pytest.approx(expected, rel=1e-4)
    np.testing.assert_allclose(priorities, per_row + agent.prior_eps, rtol=1e-4)


def test_c51_projection_of_a_hand_worked_example() -> None:
    """Guards the reference projection the Rainbow tests compare with: worked by hand on
    the integer support -5..5."""
    one_hot = np.eye(ATOMS)
    # Terminated, reward 2: all mass on the atom 2, whatever the distribution.
    np.testing.assert_allclose(_project(np.full(ATOMS, 1 / ATOMS), 2.0, 1.0, 0.9),
                               one_hot[7])
    # z = 3 shifted to 0.5 * 3 + 0.25 = 1.75: a quarter on 1, three quarters on 2.
    np.testing.assert_allclose(_project(one_hot[8], 0.25, 0.0, 0.5),
                               0.25 * one_hot[6] + 0.75 * one_hot[7])
    # z = 5 shifted to 4 + 0.5 * 5 = 6.5: clamped onto v_max.
    np.testing.assert_allclose(_project(one_hot[10], 4.0, 0.0, 0.5), one_hot[10])


@pytest.mark.parametrize("path", RAINBOW_PATHS)
def test_rainbow_update_steps_on_the_weighted_cross_entropy_gradient(path: str) -> None:
    """Guards the gradient Rainbow steps on: that of the importance-weighted cross-entropy
    through the noisy dueling network (the noise scales sigma learn too), clipped to
    norm 10, and the target network trailing by tau."""
    agent = _rainbow(path)
    data = _rainbow_batch()
    with torch.no_grad():
        per_row = torch.as_tensor(_rainbow_textbook(agent, data), dtype=torch.float32)
    reference = copy.deepcopy(agent.actor)
    obs, action = torch.as_tensor(data["obs"]), torch.as_tensor(data["action"])
    with torch.no_grad():  # the projected targets, read back from the textbook rows
        targets = _rainbow_targets(agent, data)
    log_p = reference.log_dist(obs)[torch.arange(len(action)), action]
    ce = -(targets * log_p).sum(-1)
    torch.testing.assert_close(ce.detach(), per_row, rtol=1e-4, atol=1e-5)
    (ce * torch.as_tensor(data["weights"])).mean().backward()
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
             for p in reference.parameters()]
    norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    grads = [g * torch.clamp(10.0 / (norm + 1e-6), max=1.0) for g in grads]
    old_target = [p.detach().clone() for p in agent.actor_target.parameters()]

    agent.learn(data)
    for (name, got), want in zip(agent.actor.named_parameters(), grads, strict=True):
        assert got.grad is not None, name
        torch.testing.assert_close(got.grad, want, rtol=1e-3, atol=1e-6, msg=name)
    assert any(bool(p.grad.abs().sum() > 0) for name, p in agent.actor.named_parameters()
               if "sigma" in name and p.grad is not None)
    _assert_soft_update(old_target, agent)


@torch.no_grad()
def _rainbow_targets(agent: RainbowDQN, data: Batch) -> torch.Tensor:
    """The projected target distributions of :func:`_rainbow_textbook`, one row each."""
    next_obs = torch.as_tensor(data["next_obs"])
    best = agent.actor(next_obs).argmax(-1)
    next_dist = agent.actor_target.dist(next_obs)
    rows = [_project(next_dist[i, best[i]].double().numpy(), float(data["reward"][i]),
                     float(data["done"][i]), agent.gamma ** int(data["n"][i]))
            for i in range(len(best))]
    return torch.as_tensor(np.stack(rows), dtype=torch.float32)


def _noise(network: Any) -> list[torch.Tensor]:
    return [buffer.clone() for name in ("value", "advantage")
            for layer in network.noisy_head(name).noisy_layers()
            for buffer in (layer.eps_in, layer.eps_out)]


@pytest.mark.parametrize("path", RAINBOW_PATHS)
def test_rainbow_draws_new_noise_for_both_networks_after_learning(path: str) -> None:
    """Guards noisy nets: every learning step resamples the noise of the online network
    (its exploration) and of the target network."""
    agent = _rainbow(path)
    online, target = _noise(agent.actor), _noise(agent.actor_target)
    agent.learn(_rainbow_batch())
    for name, before, after in (("actor", online, _noise(agent.actor)),
                                ("actor_target", target, _noise(agent.actor_target))):
        assert all(not torch.equal(a, b) for a, b in zip(before, after, strict=True)), name


def test_rainbow_dueling_streams_combine_as_value_plus_centred_advantage() -> None:
    """Guards the dueling head: atom logits are ``V + A - mean_a A``, so that their mean
    over actions is the value stream, with the noise on and off."""
    agent = _rainbow("closed_form")
    network = agent.actor
    obs = torch.as_tensor(_rainbow_batch()["obs"])
    with torch.no_grad():
        for noise in (True, False):
            latent = network.encoder("encoder").forward(obs)
            value = network.noisy_head("value").forward(latent, noise)
            advantage = network.noisy_head("advantage").forward(latent, noise).view(
                len(obs), ACTIONS, ATOMS)
            want = value[:, None] + advantage - advantage.mean(dim=1, keepdim=True)
            torch.testing.assert_close(network.logits(obs, noise), want)
            assert not torch.allclose(advantage.mean(dim=1), torch.zeros_like(value))


class _BetaRecorder(PrioritizedReplayBuffer):
    """A prioritized memory that remembers the ``beta`` of every sample."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.betas: list[float] = []

    def sample(self, batch_size: int, rng: np.random.Generator | None = None, *,
               beta: float = 0.4) -> Batch:
        self.betas.append(beta)
        return super().sample(batch_size, rng, beta=beta)


def test_prioritized_replay_anneals_beta_over_the_training_budget() -> None:
    """Guards the importance-sampling exponent: the training loop samples a prioritized
    memory with beta annealed from its initial value towards 1 over ``max_steps``."""
    env = make_probe_vector_env("ConstantRewardEnv", 4)
    agent = RainbowDQN(env.single_observation_space, env.single_action_space,
                       net_config=CLOSED_FORM_NET, seed=0, batch_size=8, learn_step=4,
                       beta=0.4)
    memory = _BetaRecorder(256, alpha=0.6, seed=0)
    train_off_policy_member(agent, env, memory, 64, seed=0, max_steps=128)
    assert len(memory.betas) > 2
    assert memory.betas == sorted(memory.betas) and memory.betas[0] < memory.betas[-1]
    assert memory.betas[-1] == pytest.approx(agent.per_beta(64 / 128))
    assert all(0.4 < b <= 0.7 for b in memory.betas)


def test_prioritized_replay_weights_are_the_importance_sampling_ratios() -> None:
    """Guards the importance-sampling weights: ``w_i = (N * P(i)) ** -beta`` with
    ``P(i) = p_i ** alpha / sum_j p_j ** alpha``, divided by the batch's largest."""
    memory = PrioritizedReplayBuffer(8, alpha=0.5, seed=0)
    memory.add(obs=np.zeros((4, 1), np.float32), action=np.arange(4))
    priorities = np.array([1.0, 4.0, 9.0, 16.0])
    memory.update_priorities(np.arange(4), priorities)
    scaled = priorities ** 0.5
    ratio = (4 * scaled / scaled.sum()) ** -0.6
    batch = memory.sample(64, beta=0.6, rng=np.random.default_rng(0))
    assert set(batch["indices"].tolist()) == {0, 1, 2, 3}
    want = ratio[batch["indices"]] / ratio[batch["indices"]].max()
    np.testing.assert_allclose(batch["weights"], want, rtol=1e-6)


class _PriorityRecorder(PrioritizedReplayBuffer):
    """A prioritized memory that remembers what it was sampled for and told."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sampled: list[np.ndarray] = []
        self.updated: list[tuple[np.ndarray, np.ndarray]] = []

    def sample(self, batch_size: int, rng: np.random.Generator | None = None, *,
               beta: float = 0.4) -> Batch:
        batch = super().sample(batch_size, rng, beta=beta)
        self.sampled.append(batch["indices"].copy())
        return batch

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        self.updated.append((np.asarray(indices).copy(), np.asarray(priorities).copy()))
        super().update_priorities(indices, priorities)


def test_training_gives_the_memory_each_sampled_rows_new_priority() -> None:
    """Guards the priority update: after every learning step the training loop sets the
    sampled rows' priorities to what ``learn`` returned, so sampling follows the losses."""
    env = make_probe_vector_env("ObsDependentRewardEnv", 4)
    agent = RainbowDQN(env.single_observation_space, env.single_action_space,
                       net_config=CLOSED_FORM_NET, seed=0, batch_size=8, learn_step=4)
    memory = _PriorityRecorder(256, alpha=0.6, seed=0)
    train_off_policy_member(agent, env, memory, 64, seed=0, max_steps=128)
    assert len(memory.sampled) > 2 and len(memory.updated) == len(memory.sampled)
    for indices, (updated, priorities) in zip(memory.sampled, memory.updated, strict=True):
        np.testing.assert_array_equal(updated, indices)
        assert priorities.shape == indices.shape and np.all(priorities > 0)
    weights = memory.sample(64, beta=1.0, rng=np.random.default_rng(0))["weights"]
    assert weights.min() < 1.0  # the priorities now differ: so do the sampling ratios
