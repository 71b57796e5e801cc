"""The centralised critic: every agent's observation and action, evolvable per encoder."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from agilerl.networks.centralised_q import CentralisedQNetwork
from agilerl.networks.config import normalise_net_config

AGENTS = ["speaker_0", "listener_0"]
OBS = {
    "speaker_0": spaces.Box(-1, 1, (3,), np.float32),
    "listener_0": spaces.Box(-1, 1, (11,), np.float32),
}
ACTIONS = {"speaker_0": 3, "listener_0": 5}


def _config(latent: int = 16, **encoder: object) -> dict:
    return normalise_net_config({
        "latent_dim": latent, "min_latent_dim": 8, "max_latent_dim": 64,
        "encoder_config": {"arch": "mlp", "hidden_size": [32], **encoder},
        "head_config": {"hidden_size": [32]},
    })


def _critic(configs: dict | None = None) -> CentralisedQNetwork:
    configs = configs or {a: _config() for a in AGENTS}
    return CentralisedQNetwork.build(AGENTS, OBS, ACTIONS, configs, configs[AGENTS[0]],
                                     torch.Generator().manual_seed(0))


def _batch(n: int = 7) -> tuple[dict, dict]:
    gen = torch.Generator().manual_seed(1)
    obs = {a: torch.rand((n, OBS[a].shape[0]), generator=gen) for a in AGENTS}
    act = {a: torch.rand((n, ACTIONS[a]), generator=gen) for a in AGENTS}
    return obs, act


def test_value_depends_on_every_agents_observation_and_action() -> None:
    critic = _critic()
    obs, act = _batch()
    q = critic(obs, act)
    assert q.shape == (7,)
    for agent in AGENTS:
        changed_obs = {**obs, agent: obs[agent] + 1.0}
        changed_act = {**act, agent: act[agent] + 1.0}
        assert not torch.allclose(critic(changed_obs, act), q)
        assert not torch.allclose(critic(obs, changed_act), q)


def test_groups_keep_their_own_encoder_config() -> None:
    configs = {"speaker_0": _config(latent=8), "listener_0": _config(latent=24)}
    critic = _critic(configs)
    assert critic.encoder("speaker_0").out_dim == 8
    assert critic.encoder("listener_0").out_dim == 24
    assert critic.head("q").arch["in_dim"] == 3 + 5 + 8 + 24


def test_latent_mutation_of_one_encoder_keeps_the_value_function() -> None:
    critic = _critic()
    obs, act = _batch()
    before = critic(obs, act)
    for agent, op in (("speaker_0", "add_nodes"), ("speaker_0", "remove_nodes"),
                      ("listener_0", "add_nodes")):
        plan = {"target": f"latent:{agent}", "op": op, "nodes": 8, "seed": 3}
        grown = critic.mutated(plan)
        width = critic.encoder(agent).out_dim + (8 if op == "add_nodes" else -8)
        assert grown.encoder(agent).out_dim == width
        if op == "add_nodes":  # new latent units enter the head with zero weights
            torch.testing.assert_close(grown(obs, act), before)
        else:
            assert grown(obs, act).shape == before.shape
        rebuilt = CentralisedQNetwork.from_architecture(grown.architecture())
        assert rebuilt.architecture() == grown.architecture()


def test_drawn_architecture_mutations_apply() -> None:
    critic = _critic()
    rng = np.random.default_rng(0)
    obs, act = _batch()
    for op in ("add_layer", "remove_layer", "add_nodes", "remove_nodes", "activation"):
        plan = critic.draw_plan(op, rng, ["ReLU", "Tanh"])
        if plan is None:
            continue
        mutated = critic.mutated(plan)
        assert mutated(obs, act).shape == (7,)


def test_vector_observations_reach_the_head_through_one_dense_layer() -> None:
    # The configured encoder has a hidden layer of 32; the critic's does not, and no
    # mutation adds one (deep observation paths destabilised speaker-listener's actors).
    critic = _critic()
    rng = np.random.default_rng(0)
    for agent in AGENTS:
        encoder = critic.encoder(agent)
        assert encoder.arch["hidden_size"] == []
        assert len(list(encoder.linears)) == 1
        assert not encoder.can("add_layer")
    for _ in range(20):
        plan = critic.draw_plan("add_layer", rng, ["ReLU"])
        assert plan is not None and plan["target"] == "head:q"
