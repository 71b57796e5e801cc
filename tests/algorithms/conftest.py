"""Shared fixtures for algorithm tests: small networks, single-threaded torch."""

from __future__ import annotations

import pytest
import torch

from agilerl.hpo.dormant import network_scores

torch.set_num_threads(1)

SMALL_NET = {
    "latent_dim": 16,
    "encoder_config": {"arch": "mlp", "hidden_size": [32]},
    "head_config": {"hidden_size": [32]},
}


@pytest.fixture
def small_net() -> dict:
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in SMALL_NET.items()}


def assert_same_dormancy_scores(a, b) -> None:
    """The gradients kept for ReGraMa (``agilerl.hpo.dormant``) match: a stacked update
    keeps what each member's own update keeps."""
    sa, sb = network_scores(a.networks), network_scores(b.networks)
    assert sa.keys() == sb.keys()
    for net in sa:
        assert sa[net].keys() == sb[net].keys()
        for path, layers in sa[net].items():
            for x, y in zip(layers, sb[net][path], strict=True):
                assert (x is None) == (y is None), f"{net}.{path}"
                if x is not None:
                    torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-7, msg=f"{net}.{path}")

