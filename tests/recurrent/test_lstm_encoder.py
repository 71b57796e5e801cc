"""The evolvable LSTM encoder: step/sequence agreement, episode starts, mutations in bounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agilerl.modules.lstm import LSTMEncoder, lstm_arch

SPEC = {"hidden_state_size": 16, "num_layers": 2, "dropout": 0.0, "min_hidden_state_size": 8,
        "max_hidden_state_size": 32, "min_layers": 1, "max_layers": 3}


def _encoder(**overrides) -> LSTMEncoder:
    return LSTMEncoder(lstm_arch({**SPEC, **overrides}, 5, 8, "Tanh"),
                       torch.Generator().manual_seed(0))


def _inputs(steps: int = 7, batch: int = 3) -> torch.Tensor:
    return torch.randn(steps, batch, 5, generator=torch.Generator().manual_seed(1))


def test_sequence_equals_steps_with_state_zeroed_at_episode_starts():
    enc, x = _encoder(), _inputs()
    starts = torch.zeros(7, 3, dtype=torch.bool)
    starts[3, 1] = starts[5, 0] = True
    state = torch.randn(3, *enc.state_shape, generator=torch.Generator().manual_seed(2))
    steps, h = [], state
    for t in range(7):
        if t > 0:
            h = h * (~starts[t]).float().view(-1, 1, 1)
        out, h = enc(x[t], h)
        steps.append(out)
    assert torch.allclose(enc.sequence(x, state, starts), torch.stack(steps), atol=1e-6)
    # without the starts the sequence differs: the state really is carried
    assert not torch.allclose(enc.sequence(x, state), torch.stack(steps), atol=1e-4)


def test_state_shape_and_zero_initial_state():
    enc = _encoder()
    assert enc.state_shape == (4, 16)
    assert torch.equal(enc.initial_state(5), torch.zeros(5, 4, 16))


def test_add_nodes_keeps_the_function_exactly():
    enc, x = _encoder(), _inputs()
    plan = enc.draw_plan("add_nodes", np.random.default_rng(0), [])
    grown = enc.mutated(plan)
    assert grown.arch["hidden_state_size"] == 16 + plan["nodes"]
    assert torch.allclose(grown.sequence(x, grown.initial_state(3)),
                          enc.sequence(x, enc.initial_state(3)), atol=1e-6)


@pytest.mark.parametrize(("op", "field", "change"), [
    ("add_layer", "num_layers", 1), ("remove_layer", "num_layers", -1),
    ("remove_nodes", "hidden_state_size", -8),
])
def test_mutations_change_the_architecture_and_still_run(op, field, change):
    enc, x = _encoder(), _inputs()
    rng = np.random.default_rng(3)
    plan = enc.draw_plan(op, rng, [])
    while op == "remove_nodes" and plan["nodes"] != 8:
        plan = enc.draw_plan(op, rng, [])
    new = enc.mutated(plan)
    assert new.arch[field] == enc.arch[field] + change
    assert new.sequence(x, new.initial_state(3)).shape == (7, 3, 8)
    assert LSTMEncoder(new.architecture()).architecture() == new.architecture()


def test_mutations_respect_the_spec_bounds():
    rng = np.random.default_rng(0)
    at_max = _encoder(hidden_state_size=32, num_layers=3)
    assert at_max.draw_plan("add_nodes", rng, []) is None
    assert at_max.draw_plan("add_layer", rng, []) is None
    at_min = _encoder(hidden_state_size=8, num_layers=1)
    assert at_min.draw_plan("remove_nodes", rng, []) is None
    assert at_min.draw_plan("remove_layer", rng, []) is None
    big = _encoder(hidden_state_size=30).mutated({"op": "add_nodes", "nodes": 32, "seed": 0})
    assert big.arch["hidden_state_size"] == 32


def test_activation_plan_leaves_an_lstm_unchanged_and_latent_resizes():
    enc, x = _encoder(), _inputs()
    same = enc.mutated({"op": "activation", "activation": "ReLU", "seed": 0})
    assert torch.equal(same.sequence(x, same.initial_state(3)), enc.sequence(x, enc.initial_state(3)))
    wider = enc.resized(out_dim=12, seed=1)
    out = wider.sequence(x, wider.initial_state(3))
    assert out.shape == (7, 3, 12)
    assert torch.allclose(out[..., :8], enc.sequence(x, enc.initial_state(3)))
