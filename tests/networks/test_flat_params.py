"""DQN/CQN's closed-form update keeps the online and target networks, the gradient and
Adam's moments in flat buffers: the same update as per-tensor steps, and rebuilt whenever
a load or a rebuilt optimizer replaces what they were made from."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import CQN, DQN
from agilerl.networks import flat_params

OBS = spaces.Box(-1.0, 1.0, (5,), np.float32)
NET = {"latent_dim": 8, "encoder_config": {"hidden_size": [8]},
       "head_config": {"hidden_size": [8]}}


def make(algo: type = CQN, net: dict | None = None, **kwargs):  # type: ignore[no-untyped-def]
    extra = {"cql_alpha": 0.7} if algo is CQN else {}
    return algo(OBS, spaces.Discrete(3), net_config=net or NET, seed=0, lr=1e-2, **extra,
                **kwargs)


def batches(count: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"obs": rng.uniform(-1, 1, (16, 5)).astype(np.float32),
             "next_obs": rng.uniform(-1, 1, (16, 5)).astype(np.float32),
             "action": rng.integers(0, 3, 16),
             "reward": rng.uniform(0, 1, 16).astype(np.float32),
             "done": (rng.random(16) < 0.2).astype(np.float32)} for _ in range(count)]


def same_storage(tensors) -> bool:  # type: ignore[no-untyped-def]
    return len({t.untyped_storage().data_ptr() for t in tensors}) == 1


def test_a_closed_form_update_moves_everything_into_flat_buffers() -> None:
    agent = make()
    agent.learn(batches(1)[0])
    params = list(agent.actor.parameters())
    optimizer = agent.optimizers["optimizer"]
    assert same_storage(params)
    assert same_storage(agent.actor_target.parameters())
    assert same_storage(p.grad for p in params)
    assert same_storage(optimizer.state[p]["exp_avg"] for p in params)
    assert len({id(optimizer.state[p]["step"]) for p in params}) == 1
    # The optimizer's state_dict keeps torch.optim's layout, and loads back.
    state = optimizer.state_dict()
    assert sorted(state["state"]) == list(range(len(params)))
    for i, p in enumerate(params):
        assert state["state"][i]["exp_avg"].shape == p.shape
        assert float(state["state"][i]["step"]) == 1.0
    optimizer.load_state_dict(state)


@pytest.mark.parametrize("algo", [CQN, DQN])
@pytest.mark.parametrize("double", [True, False])
def test_the_flat_update_equals_the_per_tensor_update(algo, double, monkeypatch) -> None:
    flat, per_tensor = make(algo, double=double), make(algo, double=double)
    data = batches(6)
    for batch in data:
        flat.learn(batch)
    monkeypatch.setattr(flat_params.FlatTraining, "build", classmethod(lambda *_: None))
    for batch in data:
        per_tensor.learn(batch)
    assert per_tensor.__dict__.get("_flat") is None
    for net in ("actor", "actor_target"):
        for a, b in zip(getattr(flat, net).parameters(), getattr(per_tensor, net).parameters(),
                        strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_a_load_into_a_trained_agent_rebuilds_its_buffers() -> None:
    agent = make()
    first, later, after = batches(3, 1), batches(3, 2), batches(3, 3)
    for batch in first:
        agent.learn(batch)
    snapshot = agent.get_state()
    for batch in later:  # moves the buffers away from the snapshot
        agent.learn(batch)
    agent.set_state(snapshot)  # same architecture: weights copied in, optimizer rebuilt
    fresh = type(agent).from_state(snapshot)
    for batch in after:
        agent.learn(batch)
        fresh.learn(batch)
    for net in ("actor", "actor_target"):
        for a, b in zip(getattr(agent, net).parameters(), getattr(fresh, net).parameters(),
                        strict=True):
            assert torch.equal(a, b)
    ours, theirs = agent.optimizers["optimizer"], fresh.optimizers["optimizer"]
    for p, q in zip(agent.actor.parameters(), fresh.actor.parameters(), strict=True):
        assert torch.equal(ours.state[p]["exp_avg_sq"], theirs.state[q]["exp_avg_sq"])
        assert float(ours.state[p]["step"]) == float(theirs.state[q]["step"]) == 6.0


def test_an_autograd_step_after_a_closed_form_backward_uses_its_own_gradients() -> None:
    from agilerl.networks.mlp_gradient import cached_chain

    agent, reference = make(), make()
    batch = batches(1)[0]
    agent.learn(batch)
    reference.learn(batch)
    # Gradients left in the flat buffer by a closed-form backward that was never applied...
    agent.closed_form_backward(cached_chain(agent, agent.actor), batches(1, 5)[0])
    # ...are not what an autograd step applies: it uses its own (0.1 everywhere).
    for each in (agent, reference):
        each.step_optimizer(sum((p * 0.1).sum() for p in each.actor.parameters()))
    for a, b in zip(agent.actor.parameters(), reference.actor.parameters(), strict=True):
        assert torch.equal(a, b)


def test_after_a_new_layer_the_flat_update_still_equals_the_per_tensor_update(
        monkeypatch) -> None:
    from agilerl.hpo.mutation import Mutations

    # Without layer norm a new layer keeps the function, so Adam's moments are carried.
    net = {"latent_dim": 8, "encoder_config": {"hidden_size": [8], "layer_norm": False},
           "head_config": {"hidden_size": [8], "layer_norm": False}}
    flat, per_tensor = make(net=net), make(net=net)
    data = batches(4)
    for agent in (flat, per_tensor):
        agent.learn(data[0])
        mutation = Mutations(0, 1, 1.0, 0, 0, 0, rand_seed=1)  # always a new layer
        while mutation.architecture_mutate(agent) != "add_layer":
            pass
    monkeypatch.setattr(flat_params.FlatTraining, "build", classmethod(lambda *_: None))
    for batch in data[1:]:
        per_tensor.learn(batch)
    monkeypatch.undo()
    for batch in data[1:]:
        flat.learn(batch)
    assert flat.__dict__.get("_flat") is not None
    # The new layer's parameters have taken 3 steps, the others 4.
    steps = {float(s["step"]) for s in flat.optimizers["optimizer"].state.values()}
    assert steps == {3.0, 4.0}
    for a, b in zip(flat.actor.parameters(), per_tensor.actor.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_views_start_on_the_boundaries_of_tensors_of_their_own() -> None:
    """Matrix kernels round by alignment: every view starts where a tensor of its own
    would, so a network computes bit for bit what it computed before its parameters moved
    into the buffer (and what a copy restored from a checkpoint computes)."""
    from agilerl.algorithms import PPO

    agent = PPO(spaces.Box(0.0, 1.0, (1,)), spaces.Box(-1.0, 1.0, (1,)), seed=0, net_config={
        "latent_dim": 16, "encoder_config": {"hidden_size": [32]},
        "head_config": {"hidden_size": [30]}})
    network = agent.actor_critic
    obs = torch.tensor([[0.0], [1.0]])
    with torch.no_grad():
        before = network(obs)
        flat = flat_params.FlatTraining.build(network, None, agent.optimizers["optimizer"])
        assert flat is not None
        after = network(obs)
    for t in (*flat.params, *flat.grads, flat.exp_avg, flat.exp_avg_sq):
        assert t.data_ptr() % flat_params.ALIGN_BYTES == 0
    for a, b in zip(before, after, strict=True):
        assert torch.equal(a, b)
