"""The encoder factory: every network builds its encoders by arch, rebuilds them from
their architecture, and mutates them through the encoder's own plans."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import DQN, PPO
from agilerl.modules.encoder import EvolvableEncoder
from agilerl.modules.encoders import encoder_class, encoder_from_architecture
from agilerl.modules.mlp import MLPEncoder
from agilerl.modules.multi_input import MultiInputEncoder
from agilerl.networks.actor_critic import ActorCritic
from agilerl.networks.config import normalise_net_config
from agilerl.networks.q_network import QNetwork

TUPLE_SPACE = spaces.Tuple((spaces.Discrete(5), spaces.Discrete(3, start=1)))
DICT_SPACE = spaces.Dict(
    {"pos": spaces.Box(-1.0, 1.0, (3,), np.float32), "mode": spaces.Discrete(4)}
)


def _net(arch: str = "mlp", **encoder) -> dict:
    config = {"hidden_size": [16]} if arch == "mlp" else {"mlp_config": {"hidden_size": [16]}}
    return normalise_net_config(
        {"latent_dim": 8, "encoder_config": {"arch": arch, **config, **encoder},
         "head_config": {"hidden_size": [16]}}
    )


def test_the_factory_names_each_arch_and_refuses_unknown_ones():
    assert encoder_class("mlp") is MLPEncoder
    assert encoder_class("multiinput") is MultiInputEncoder
    assert issubclass(MLPEncoder, EvolvableEncoder)
    with pytest.raises(NotImplementedError, match="'nosuch' is not supported"):
        encoder_class("nosuch")


def test_the_mlp_encoder_keeps_the_mlp_parameter_names_and_tags_its_kind():
    net = QNetwork.build(4, 2, _net(), torch.Generator().manual_seed(0))
    assert isinstance(net.encoder("encoder"), MLPEncoder)
    assert net.architecture()["encoders"]["encoder"]["kind"] == "mlp"
    assert "encoders.encoder.linears.0.weight" in dict(net.named_parameters())


def test_an_architecture_without_kind_rebuilds_as_an_mlp():
    net = QNetwork.build(4, 2, _net(), torch.Generator().manual_seed(0))
    arch = net.architecture()
    del arch["encoders"]["encoder"]["kind"]  # as saved before encoders were pluggable
    rebuilt = QNetwork.from_architecture(arch)
    rebuilt.load_state_dict(net.state_dict())
    obs = torch.randn(5, 4)
    torch.testing.assert_close(rebuilt(obs), net(obs))


def test_the_mlp_encoder_refuses_images_and_composite_spaces():
    image = spaces.Box(0, 255, (3, 8, 8), np.uint8)
    with pytest.raises(ValueError, match="use encoder arch 'cnn'"):
        QNetwork.build(image, 2, _net(), torch.Generator())
    with pytest.raises(ValueError, match="use encoder arch 'multiinput'"):
        QNetwork.build(TUPLE_SPACE, 2, _net(), torch.Generator())


@pytest.mark.parametrize("space", [TUPLE_SPACE, DICT_SPACE], ids=["tuple", "dict"])
@pytest.mark.parametrize("vector_mlp", [False, True])
def test_every_network_class_takes_the_multi_input_encoder(space, vector_mlp):
    config = _net("multiinput", vector_space_mlp=vector_mlp)
    gen = torch.Generator().manual_seed(0)
    q = QNetwork.build(space, 3, config, gen)
    ac = ActorCritic.build(space, 3, continuous=False, net_config=config, share_encoders=False,
                           action_std_init=0.5, generator=gen)
    from agilerl.core.spaces import ObsEncoder

    obs = ObsEncoder(space)(space.sample() if False else _batch(space, 6), torch.device("cpu"))
    assert q(obs).shape == (6, 3)
    logits, value = ac(obs)
    assert logits.shape == (6, 3) and value.shape == (6,)
    for net in (q, ac):
        rebuilt = type(net).from_architecture(net.architecture())
        rebuilt.load_state_dict(net.state_dict())
        torch.testing.assert_close(rebuilt(obs), net(obs))


def _batch(space, n: int):
    rng = np.random.default_rng(0)
    if isinstance(space, spaces.Tuple):
        return tuple(rng.integers(s.start, s.start + s.n, size=n) for s in space.spaces)
    return {"pos": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            "mode": rng.integers(0, 4, size=n)}


def test_vector_only_multi_input_equals_one_mlp_over_the_one_hot_parts():
    """A Tuple of Discrete parts without ``vector_space_mlp``: one-hot parts concatenated
    into the MLP of ``mlp_config`` (the reference's Blackjack network)."""
    encoder = encoder_from_architecture(
        MultiInputEncoder.architecture_from_config(
            _net("multiinput")["encoder_config"], TUPLE_SPACE, 8
        ),
        torch.Generator().manual_seed(0),
    )
    obs = {"0": torch.tensor([0, 4]), "1": torch.tensor([0, 2])}  # indices from start
    flat = torch.zeros(2, 8)
    flat[0, 0] = flat[1, 4] = flat[0, 5] = flat[1, 7] = 1.0
    torch.testing.assert_close(encoder(obs), encoder.mlp(flat))


@pytest.mark.parametrize("op", ["add_nodes", "add_layer", "remove_nodes", "remove_layer"])
def test_multi_input_mutations_respect_bounds_and_keep_the_function_where_they_can(op):
    config = _net("multiinput", vector_space_mlp=True, min_latent_dim=8, max_latent_dim=48)
    for mlp in (config["encoder_config"]["mlp_config"], config["head_config"]):
        mlp.update(layer_norm=False, max_hidden_layers=3, min_mlp_nodes=8, max_mlp_nodes=64)
    net = QNetwork.build(DICT_SPACE, 2, config, torch.Generator().manual_seed(0))
    from agilerl.core.spaces import ObsEncoder

    obs = ObsEncoder(DICT_SPACE)(_batch(DICT_SPACE, 16), torch.device("cpu"))
    rng = np.random.default_rng(1)
    for _ in range(12):
        plan = net.draw_plan(op, rng, ["ReLU"])
        if plan is None:
            break
        new = net.mutated(plan)
        assert new(obs).shape == (16, 2)
        if op in ("add_nodes", "add_layer"):  # zero-started units and identity layers
            torch.testing.assert_close(new(obs), net(obs), atol=1e-5, rtol=1e-5, msg=str(plan))
        # the network says what it keeps, and it keeps exactly that
        same = torch.allclose(new(obs), net(obs), atol=1e-5, rtol=1e-5)
        assert net.preserves_function(plan) == same == (op in ("add_nodes", "add_layer")), plan
        encoder = new.encoder("encoder")
        assert isinstance(encoder, MultiInputEncoder)
        for part in encoder.part_encoders.values():
            assert 8 <= part.out_dim <= 48
            assert all(8 <= h <= 64 for h in part.arch["hidden_size"])
            assert 1 <= len(part.arch["hidden_size"]) <= 3
        rebuilt = QNetwork.from_architecture(new.architecture())
        rebuilt.load_state_dict(new.state_dict())
        torch.testing.assert_close(rebuilt(obs), new(obs))
        net = new


def test_agents_on_composite_spaces_act_learn_and_round_trip_their_state():
    net = _net("multiinput")
    dqn = DQN(DICT_SPACE, spaces.Discrete(2), net_config=net, seed=0, batch_size=4)
    ppo = PPO(TUPLE_SPACE, spaces.Discrete(2), net_config=net, seed=0)
    batch = _batch(DICT_SPACE, 4)
    assert dqn.get_action(batch).shape == (4,)
    stored = dqn.obs_encoder.storable(batch)
    metrics = dqn.learn({"obs": stored, "next_obs": stored, "action": np.zeros(4, np.int64),
                         "reward": np.ones(4, np.float32), "done": np.zeros(4, np.float32)})
    assert np.isfinite(metrics["loss"])
    clone = DQN.from_state(copy.deepcopy(dqn.get_state()))
    np.testing.assert_array_equal(clone.greedy_action(batch), dqn.greedy_action(batch))
    assert ppo.get_action(_batch(TUPLE_SPACE, 3))[0].shape == (3,)


@pytest.mark.parametrize("space", [
    spaces.Discrete(4, start=1), spaces.Box(-1, 1, (2, 3), np.float32),
    spaces.Box(0, 255, (3, 8, 8), np.uint8), TUPLE_SPACE, DICT_SPACE,
], ids=["discrete", "box", "image", "tuple", "dict"])
def test_network_input_batches_are_idempotent(space):
    """Rollouts store ``numpy(obs)`` and the learner converts it again: nothing changes."""
    from agilerl.core.spaces import ObsEncoder

    encoder = ObsEncoder(space)
    space.seed(0)
    raw = [space.sample() for _ in range(5)]
    if isinstance(space, spaces.Dict):
        batch = {k: np.stack([r[k] for r in raw]) for k in space.spaces}
    elif isinstance(space, spaces.Tuple):
        batch = tuple(np.stack([r[i] for r in raw]) for i in range(len(space.spaces)))
    else:
        batch = np.stack(raw)
    once = encoder.numpy(batch)
    twice = encoder.numpy(once)
    assert once.shape[0] == 5 and twice.dtype == once.dtype
    np.testing.assert_array_equal(twice, once)


def test_multi_input_mutations_carry_the_optimizer_state():
    agent = PPO(DICT_SPACE, spaces.Discrete(2), seed=0,
                net_config=_net("multiinput", vector_space_mlp=True))
    from agilerl.core.spaces import ObsEncoder

    obs = ObsEncoder(DICT_SPACE)(_batch(DICT_SPACE, 8), torch.device("cpu"))
    logits, value = agent.actor_critic(obs)
    (logits.pow(2).sum() + value.pow(2).sum()).backward()
    agent.optimizers["optimizer"].step()
    opt = agent.optimizers["optimizer"]
    before = {n: opt.state[p]["exp_avg"].clone() for n, p in agent.actor_critic.named_parameters()}
    plan = {"target": "encoder:encoder", "module": "part:pos", "op": "add_nodes", "layer": 0,
            "nodes": 16, "seed": 2}
    agent.apply_architecture_mutation("actor_critic", plan)
    opt = agent.optimizers["optimizer"]
    after = {n: opt.state[p]["exp_avg"] for n, p in agent.actor_critic.named_parameters()}
    grown = "encoders.encoder.part_encoders.pos.linears.0.weight"  # 16 -> 32 rows
    assert after[grown].shape[0] == 32
    assert torch.equal(after[grown][:16], before[grown]) and not after[grown][16:].any()
    kept = "encoders.encoder.mlp.linears.0.weight"
    assert torch.equal(after[kept], before[kept])
