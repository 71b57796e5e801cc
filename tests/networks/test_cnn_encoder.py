"""The CNN encoder: image layouts, uint8 scaling, mutations within bounds that keep the
function where they claim to, rebuilding from the architecture, optimizer state carried."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import PPO
from agilerl.hpo.mutation import Mutations
from agilerl.modules.cnn import EvolvableCNN, channels_last, feature_sizes
from agilerl.networks.config import normalise_net_config
from agilerl.networks.q_network import QNetwork


def _config(**encoder) -> dict:
    cnn = {"channel_size": [8, 16], "kernel_size": [3, 3], "stride_size": [2, 1],
           "min_channel_size": 4, "max_channel_size": 40, "max_hidden_layers": 3, **encoder}
    return normalise_net_config({"latent_dim": 16, "arch": "cnn", "encoder_config": cnn,
                                 "head_config": {"hidden_size": [16], "layer_norm": False}})


def _image(shape, dtype=np.uint8) -> spaces.Box:
    return spaces.Box(0, 255, shape, dtype)


def _pixels(n: int, shape, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (n, *shape), generator=torch.Generator().manual_seed(seed),
                         dtype=torch.uint8)


@pytest.mark.parametrize(("shape", "last"), [((3, 20, 20), False), ((20, 20, 3), True),
                                             ((4, 84, 84), False), ((84, 84, 4), True),
                                             ((210, 160, 3), True), ((16, 10, 10), False)])
def test_the_channel_axis_is_read_from_the_space(shape, last):
    assert channels_last(shape) is last


def test_channels_last_images_give_what_channels_first_ones_give():
    first = QNetwork.build(_image((3, 20, 20)), 2, _config(), torch.Generator().manual_seed(0))
    last = QNetwork.build(_image((20, 20, 3)), 2, _config(), torch.Generator().manual_seed(0))
    images = _pixels(5, (3, 20, 20))
    torch.testing.assert_close(last(images.permute(0, 2, 3, 1)), first(images))


def test_uint8_images_are_scaled_once_in_the_network():
    """A uint8 image equals the same picture given as floats in [0, 1] to a network built
    for a float space (same weights): the scaling happens once, inside the encoder."""
    byte_net = QNetwork.build(_image((3, 20, 20)), 2, _config(), torch.Generator().manual_seed(0))
    float_space = spaces.Box(0.0, 1.0, (3, 20, 20), np.float32)
    float_net = QNetwork.build(float_space, 2, _config(), torch.Generator().manual_seed(0))
    assert byte_net.encoder("encoder").arch["scale"] == pytest.approx(1 / 255)
    assert float_net.encoder("encoder").arch["scale"] == 1.0
    images = _pixels(4, (3, 20, 20))
    torch.testing.assert_close(byte_net(images), float_net(images.float() / 255.0))


def test_convolutions_that_shrink_the_image_to_nothing_are_refused():
    with pytest.raises(ValueError, match="shrink the 8x8 image"):
        QNetwork.build(_image((3, 8, 8)), 2, _config(kernel_size=[8, 4], stride_size=[4, 2]),
                       torch.Generator())


@pytest.mark.parametrize("op", ["add_nodes", "add_layer", "remove_nodes", "remove_layer"])
def test_mutations_stay_in_bounds_and_keep_the_function_where_claimed(op):
    net = QNetwork.build(_image((3, 20, 20)), 2, _config(), torch.Generator().manual_seed(0))
    images = _pixels(6, (3, 20, 20))
    rng = np.random.default_rng(3)
    kept = 0
    for _ in range(15):
        plan = net.draw_plan(op, rng, ["ReLU"])
        if plan is None:
            break
        new = net.mutated(plan)
        cnn = new.encoder("encoder")
        assert isinstance(cnn, EvolvableCNN)
        assert 1 <= len(cnn.arch["channel_size"]) <= 3
        assert all(4 <= c <= 40 for c in cnn.arch["channel_size"])
        assert all(h >= 1 and w >= 1 for h, w in feature_sizes(cnn.arch))
        # what the network says it keeps is what it keeps
        preserving = net.preserves_function(plan)
        same = torch.allclose(new(images), net(images), atol=1e-5, rtol=1e-5)
        assert same == preserving, plan
        kept += preserving and plan["target"] == "encoder:encoder"
        rebuilt = QNetwork.from_architecture(new.architecture())
        rebuilt.load_state_dict(new.state_dict())
        torch.testing.assert_close(rebuilt(images), new(images))
        net = new
    if op in ("add_nodes", "add_layer"):
        assert kept, "no function-keeping CNN mutation was drawn"


def test_population_mutations_on_a_cnn_agent_carry_the_optimizer_state():
    space = _image((3, 20, 20))
    agent = PPO(space, spaces.Discrete(2), net_config=_config(), seed=0, num_envs=2)
    opt = agent.optimizers["optimizer"]
    images = _pixels(4, (3, 20, 20))
    logits, value = agent.actor_critic(images)
    (logits.pow(2).sum() + value.pow(2).sum()).backward()
    opt.step()
    before = {name: opt.state[p]["exp_avg"].clone()
              for name, p in agent.actor_critic.named_parameters()}
    plan = {"target": "encoder:encoder", "op": "add_nodes", "layer": 0, "channels": 8,
            "seed": 1}
    agent.apply_architecture_mutation("actor_critic", plan)
    opt = agent.optimizers["optimizer"]
    after = {name: opt.state[p]["exp_avg"] for name, p in agent.actor_critic.named_parameters()}
    grown = "encoders.encoder.convs.0.weight"  # 8 -> 16 output channels
    assert after[grown].shape[0] == 16
    assert torch.equal(after[grown][:8], before[grown])
    assert not after[grown][8:].any()
    assert torch.equal(after["heads.value.linears.0.weight"],
                       before["heads.value.linears.0.weight"])
    mutations = Mutations(0, 1, 0.5, 1, 1, 0, rand_seed=0)
    for _ in range(8):
        mutations.mutation([agent])
        env_action, *_ = agent.get_action(images.numpy())
        assert env_action.shape == (4,)
