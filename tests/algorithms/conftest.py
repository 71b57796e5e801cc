"""Shared fixtures for algorithm tests: small networks, single-threaded torch."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)

SMALL_NET = {
    "latent_dim": 16,
    "encoder_config": {"arch": "mlp", "hidden_size": [32]},
    "head_config": {"hidden_size": [32]},
}


@pytest.fixture
def small_net() -> dict:
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in SMALL_NET.items()}
