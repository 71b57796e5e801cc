"""Runs the same updates through an algorithm's closed form and through autograd."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest


def learn_both_ways(agents: list[Any], chain_class: type, network_name: str,
                    make_batch: Callable[[Any, np.random.Generator], Any],
                    monkeypatch: pytest.MonkeyPatch, *, activation: str = "ReLU",
                    updates: int = 6, mutate_at: int = 4,
                    learn: Callable[[Any, Any], dict[str, Any]] | None = None,
                    ) -> list[list[dict[str, Any]]]:
    """What ``updates`` ``learn(agent, batch)`` calls (default: the agent's ``learn``
    metrics) give for each of two identical agents: the first through the closed form,
    the second through autograd (``chain_class.of`` patched to None), on the same batches
    (``make_batch(agent, rng)``). A learning-rate change comes before update 2 and an
    ``add_nodes`` mutation of ``network_name`` before update ``mutate_at``, so the flat
    buffers must follow both."""
    history = []
    for i, agent in enumerate(agents):
        if i == 1:
            monkeypatch.setattr(chain_class, "of", classmethod(lambda cls, network: None))
        rng = np.random.default_rng(0)
        metrics = []
        for step in range(updates):
            if step == 2:
                agent.set_hyperparameter("lr", 3e-3)
            if step == mutate_at:
                plan = agent.networks[network_name].draw_plan(
                    "add_nodes", np.random.default_rng(1), [activation])
                agent.apply_architecture_mutation(network_name, plan)
            batch = make_batch(agent, rng)
            metrics.append(agent.learn(batch) if learn is None else learn(agent, batch))
        history.append(metrics)
    assert agents[0].__dict__.get("_flat") is not None  # the closed form ran, flat
    assert agents[1].__dict__.get("_flat") is None
    return history
