"""``cosine_lr_schedule_config``: warm-up then cosine decay per optimizer step, as the
reference chains torch's LinearLR and CosineAnnealingLR; carried through checkpoints."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from llm_helpers import algorithm_settings, reasoning_manifest

from agilerl.llm.lr_schedule import CosineSchedule

LORA = {"lora_r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0}


def _torch_rates(base: float, epochs: int, proportion: float, steps: int) -> list[float]:
    """The rate of each optimizer step under the reference's scheduler chain."""
    from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR

    warm = int(epochs * proportion)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base)
    low = CosineSchedule.MIN_LR
    chain = SequentialLR(optimizer, [
        LinearLR(optimizer, start_factor=low / base, end_factor=1.0, total_iters=warm),
        CosineAnnealingLR(optimizer, T_max=2 * (epochs - warm), eta_min=low)],
        milestones=[warm])
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        chain.step()
    return rates


@pytest.mark.parametrize(("epochs", "proportion"), [(10, 0.2), (7, 0.5), (5, 0.9)])
def test_the_schedule_is_the_reference_scheduler_chain(epochs: int, proportion: float) -> None:
    schedule = CosineSchedule(epochs, proportion)
    expected = _torch_rates(0.01, epochs, proportion, 2 * epochs)
    ours = [schedule.lr(0.01, k) for k in range(2 * epochs)]
    assert ours == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_without_warm_up_the_decay_starts_at_the_base_rate() -> None:
    schedule = CosineSchedule(10, 0.0)
    assert schedule.lr(0.01, 0) == pytest.approx(0.01)
    assert schedule.lr(0.01, 10) == pytest.approx((0.01 + 1e-8) / 2)
    rates = [schedule.lr(0.01, k) for k in range(11)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))


@pytest.mark.parametrize(("setting", "message"), [
    ({"num_epochs": 0}, "cosine_lr_schedule_config.num_epochs = 0"),
    ({"num_epochs": 5, "warmup_proportion": 1.5}, "warmup_proportion = 1.5"),
    ({"epochs": 5}, "cosine_lr_schedule_config.epochs: unknown setting"),
])
def test_a_malformed_schedule_is_refused_naming_the_field(setting: dict[str, Any],
                                                          message: str) -> None:
    from agilerl.algorithms import algorithm_class
    from agilerl.core.errors import UnsupportedAlgorithmError
    from agilerl.models import ALGO_REGISTRY
    from agilerl.training.paradigms import check_settings

    spec = ALGO_REGISTRY["GRPO"].model_validate(
        {"group_size": 2, "cosine_lr_schedule_config": setting})
    with pytest.raises(UnsupportedAlgorithmError, match=message):
        check_settings(algorithm_class("GRPO"), spec)


def _agent(tiny_model: Path, **extra: Any) -> Any:
    from agilerl.algorithms import algorithm_class

    settings = algorithm_settings("GRPO", pretrained_model_name_or_path=str(tiny_model),
                                  max_model_len=64, lora_config=LORA, **extra)
    settings.pop("name")
    return algorithm_class("GRPO")(**settings)


def _rates_of_updates(agent: Any, updates: int) -> list[float]:
    from agilerl.algorithms.core.llm_policy import Experience

    seen: list[float] = []
    step = agent.optimizer.step

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.append(agent.optimizer.param_groups[0]["lr"])
        return step(*args, **kwargs)

    agent.optimizer.step = record
    torch.manual_seed(0)
    rollout = agent.generate([[5, 6, 7], [8, 9]], group_size=2)
    for _ in range(updates):
        metrics = agent.learn(Experience(rollout, np.array([1.0, 0.0, 0.0, 1.0]), group_size=2))
        assert metrics["lr"] == seen[-1]
    del agent.optimizer.step
    return seen


def test_members_step_at_the_scheduled_rates_and_keep_their_place(tiny_model: Path) -> None:
    config = {"num_epochs": 4, "warmup_proportion": 0.5}
    agent = _agent(tiny_model, lr=0.01, cosine_lr_schedule_config=config)
    schedule = CosineSchedule(4, 0.5)
    assert _rates_of_updates(agent, 3) == pytest.approx([schedule.lr(0.01, k) for k in range(3)])
    resumed = type(agent).from_state(agent.get_state())  # checkpoint, selection, clone
    assert resumed.optimizer_steps == 3
    resumed.set_hyperparameter("lr", 0.02)  # a mutated rate keeps the schedule's place
    assert _rates_of_updates(resumed, 1) == pytest.approx([schedule.lr(0.02, 3)])
    assert 1e-8 < schedule.lr(0.02, 3) < 0.02 and not math.isclose(schedule.lr(0.02, 3), 0.02)


def test_a_manifest_with_a_schedule_trains(tiny_model: Path, token_task: Path) -> None:
    from agilerl.training.trainer import LocalTrainer

    manifest = reasoning_manifest(tiny_model, token_task, pop_size=1, evolve=False,
                                  algorithm={"cosine_lr_schedule_config": {"num_epochs": 10}})
    trainer = LocalTrainer.from_manifest(manifest, seed=0)
    population, _ = trainer.train(verbose=False)
    assert population[0].optimizer_steps == 2
    assert population[0].optimizer.param_groups[0]["lr"] == pytest.approx(
        CosineSchedule(10).lr(float(population[0].lr), 1))
