"""The SimBa residual encoder: built from the manifest's config through the encoder
factory, evolvable within its bounds, and usable by DDPG/TD3 networks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import DDPG, TD3
from agilerl.modules.encoders import encoder_architecture, encoder_from_architecture
from agilerl.modules.simba import SimbaEncoder
from agilerl.networks.config import normalise_net_config

OBS = spaces.Box(-1.0, 1.0, (5,), dtype=np.float32)
ACTIONS = spaces.Box(-2.0, 2.0, (2,), dtype=np.float32)


def _config(**encoder) -> dict:
    section = {"latent_dim": 16, "simba": True,
               "encoder_config": {"hidden_size": 32, "num_blocks": 2, **encoder},
               "head_config": {"hidden_size": [16]}}
    return normalise_net_config(section, "DeterministicActorSpec")


def _encoder(seed: int = 0, **encoder) -> SimbaEncoder:
    arch = encoder_architecture(_config(**encoder), OBS)
    enc = encoder_from_architecture(arch, torch.Generator().manual_seed(seed))
    assert isinstance(enc, SimbaEncoder)
    return enc


@pytest.mark.parametrize("section", [
    {"simba": True, "encoder_config": {"hidden_size": 32, "num_blocks": 2}},
    {"arch": "simba", "encoder_config": {"hidden_size": 32, "num_blocks": 2}},
    {"encoder_config": {"arch": "simba", "hidden_size": 32, "num_blocks": 2}},
], ids=["simba-flag", "top-level-arch", "encoder-arch"])
def test_every_manifest_spelling_builds_simba(section):
    config = normalise_net_config({"latent_dim": 16, **section}, "DeterministicActorSpec")
    arch = encoder_architecture(config, OBS)
    assert arch["kind"] == "simba" and arch["hidden_size"] == 32 and arch["num_blocks"] == 2
    out = encoder_from_architecture(arch)(torch.rand(4, 5))
    assert out.shape == (4, 16)


def test_same_seed_same_weights_and_architecture_round_trip():
    a, b = _encoder(3), _encoder(3)
    x = torch.rand(8, 5)
    torch.testing.assert_close(a(x), b(x))
    rebuilt = encoder_from_architecture(a.architecture())
    rebuilt.load_state_dict(a.state_dict())
    torch.testing.assert_close(rebuilt(x), a(x))
    assert not torch.equal(_encoder(4)(x), a(x))


def test_added_block_preserves_the_function():
    enc = _encoder()
    plan = enc.draw_plan("add_layer", np.random.default_rng(0), [])
    grown = enc.mutated(plan)
    assert grown.arch["num_blocks"] == 3
    x = torch.rand(8, 5)
    with torch.no_grad():
        torch.testing.assert_close(grown(x), enc(x))


def test_mutations_respect_the_spec_bounds():
    rng = np.random.default_rng(0)
    enc = _encoder(num_blocks=1, min_blocks=1, max_blocks=2, min_mlp_nodes=16,
                   max_mlp_nodes=48)
    assert enc.draw_plan("remove_layer", rng, []) is None
    enc = enc.mutated(enc.draw_plan("add_layer", rng, []))
    assert enc.draw_plan("add_layer", rng, []) is None
    for _ in range(5):
        plan = enc.draw_plan("add_nodes", rng, [])
        if plan is None:
            break
        enc = enc.mutated(plan)
    assert enc.arch["hidden_size"] == 48
    for _ in range(5):
        plan = enc.draw_plan("remove_nodes", rng, [])
        if plan is None:
            break
        enc = enc.mutated(plan)
    assert enc.arch["hidden_size"] == 16
    assert enc(torch.rand(3, 5)).shape == (3, 16)
    assert enc.resized(out_dim=24)(torch.rand(3, 5)).shape == (3, 24)
    assert enc.activation is None  # no activation mutation for SimBa


def test_num_blocks_outside_bounds_is_refused():
    with pytest.raises(ValueError, match="num_blocks"):
        _encoder(num_blocks=5, max_blocks=4)


@pytest.mark.parametrize("cls", [DDPG, TD3])
@pytest.mark.parametrize("op", ["add_layer", "remove_layer", "add_nodes", "remove_nodes"])
def test_ddpg_and_td3_evolve_simba_networks(cls, op):
    agent = cls(OBS, ACTIONS, net_config=_config(), seed=0, share_encoders=True)
    encoder = agent.networks["actor"].encoder("encoder")
    assert isinstance(encoder, SimbaEncoder)
    before = encoder.architecture()
    plan = {"target": "encoder:encoder", **encoder.draw_plan(op, np.random.default_rng(1), [])}
    agent.apply_architecture_mutation("actor", plan)
    assert agent.networks["actor"].encoder("encoder").architecture() != before
    archs = {n: net.architecture()["encoders"] for n, net in agent.networks.items()}
    assert all(a == archs["actor"] for a in archs.values())  # shared: one encoder shape
    rng = np.random.default_rng(0)
    batch = {"obs": rng.uniform(-1, 1, (16, 5)).astype(np.float32),
             "action": rng.uniform(-2, 2, (16, 2)).astype(np.float32),
             "reward": rng.normal(size=16).astype(np.float32),
             "next_obs": rng.uniform(-1, 1, (16, 5)).astype(np.float32),
             "done": np.zeros(16, dtype=bool)}
    agent.learn(batch)
    agent.learn(batch)
    action = agent.greedy_action(batch["obs"])
    assert action.shape == (16, 2) and np.all(np.abs(action) <= 2.0)
    clone = agent.clone()
    np.testing.assert_array_equal(clone.greedy_action(batch["obs"]), action)
