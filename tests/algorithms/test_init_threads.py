"""Initial weights do not depend on torch's intra-op thread count."""

from __future__ import annotations

import torch

from agilerl.modules.mlp import EvolvableMLP

ARCH = {
    "in_dim": 4, "out_dim": 2, "hidden_size": [128, 128], "activation": "ReLU",
    "output_activation": None, "layer_norm": True, "init_layers": True, "output_vanish": True,
    "min_hidden_layers": 1, "max_hidden_layers": 3, "min_mlp_nodes": 16, "max_mlp_nodes": 256,
}  # fmt: skip


def test_orthogonal_init_is_the_same_on_one_and_two_threads():
    previous = torch.get_num_threads()
    try:
        weights = []
        for threads in (2, 1):
            torch.set_num_threads(threads)
            mlp = EvolvableMLP(ARCH, torch.Generator().manual_seed(7))
            weights.append(mlp.state_dict())
            assert torch.get_num_threads() == threads  # the setting is restored
    finally:
        torch.set_num_threads(previous)
    for key, value in weights[0].items():
        assert torch.equal(value, weights[1][key]), key
