"""The generation loop against a fake backend: ordering, budgets, evolution regimes,
early stop, checkpoints and exact continuation after an interruption."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from agilerl.core.member_training import TrainReport
from agilerl.population.backend import SequentialCalls
from agilerl.training.loop import (
    Interrupted,
    LoopSettings,
    LoopState,
    run_generations,
)


class FakeBackend(SequentialCalls):
    """Members are dicts; training adds noise drawn from the global RNG the loop seeds."""

    def __init__(self, n: int) -> None:
        self.members = [{"w": 0.0, "steps": 0} for _ in range(n)]
        self.calls: list[tuple[str, int]] = []

    def __len__(self) -> int:
        return len(self.members)

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        random.seed(seed)
        self.members[member]["w"] += random.random()
        self.members[member]["steps"] += steps
        self.calls.append(("train", member))
        return TrainReport(steps=steps, score=self.members[member]["w"], seconds=0.01)

    def evaluate(self, member: int, *, seed: int) -> float:
        self.calls.append(("eval", member))
        return self.members[member]["w"] * 100

    def get_state(self, member: int) -> dict[str, Any]:
        return copy.deepcopy(self.members[member])

    def set_state(self, member: int, state: dict[str, Any]) -> None:
        self.members[member] = copy.deepcopy(state)

    def steps(self, member: int) -> int:
        return self.members[member]["steps"]

    def hyperparameters(self, member: int) -> dict[str, Any]:
        return {"lr": 0.1}


class Hooks:
    def __init__(self, interrupt_after_trained: int | None = None) -> None:
        self.generations: list[dict[str, Any]] = []
        self.checkpoints: list[tuple[str, dict[str, Any]]] = []
        self.trained = 0
        self.interrupt_after = interrupt_after_trained
        self.backend: FakeBackend | None = None

    def on_member_trained(self, state, member, report):
        self.trained += 1

    def on_generation(self, state, metrics):
        self.generations.append(metrics)

    def on_evolved(self, state, elite, fitnesses):
        pass

    def checkpoint(self, state, *, reason):
        self.checkpoints.append((reason, {"loop": copy.deepcopy(state.state_dict()),
                                          "members": copy.deepcopy(self.backend.members)}))

    def interrupt_requested(self):
        return self.interrupt_after is not None and self.trained >= self.interrupt_after


class CopyBestEvolution:
    """Selection on fitnesses through get_state/set_state; no mutation maths."""

    evolves = True
    mutates_before_training = False

    def evolve(self, backend, fitnesses):
        best = max(range(len(fitnesses)), key=fitnesses.__getitem__)
        state = backend.get_state(best)
        for m in range(len(backend)):
            if m != best:
                backend.set_state(m, state)
        return best

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def _run(backend, hooks, settings, state=None, evolution=None):
    hooks.backend = backend
    return run_generations(backend, settings, state or LoopState(), hooks, evolution)


def test_generation_order_and_budget():
    backend, hooks = FakeBackend(3), Hooks()
    fitnesses = _run(backend, hooks, LoopSettings(max_steps=250, evo_steps=100, seed=1))
    assert [backend.steps(m) for m in range(3)] == [250, 250, 250]  # last segment shortened
    assert len(hooks.generations) == 3 and len(fitnesses) == 3
    assert backend.calls[:6] == [("train", 0), ("train", 1), ("train", 2),
                                 ("eval", 0), ("eval", 1), ("eval", 2)]
    metrics = hooks.generations[-1]
    assert metrics["train/global_step"] == 750
    assert metrics["eval/best_fitness"] == max(fitnesses)


def test_same_seed_same_run_and_different_seed_differs():
    def final(seed):
        backend = FakeBackend(2)
        _run(backend, Hooks(), LoopSettings(max_steps=300, evo_steps=100, seed=seed))
        return backend.members

    assert final(7) == final(7)
    assert final(7) != final(8)


def test_evolution_runs_only_with_both_operators():
    backend = FakeBackend(3)
    _run(backend, Hooks(), LoopSettings(max_steps=100, evo_steps=100, seed=3),
         evolution=CopyBestEvolution())
    assert len({m["w"] for m in backend.members}) == 1  # everyone copied the elite


def test_early_stop_after_window():
    backend, hooks = FakeBackend(2), Hooks()
    _run(backend, hooks, LoopSettings(max_steps=10_000, evo_steps=100, seed=1, target_score=1.0))
    assert len(hooks.generations) == 3  # window of 3 generations, target trivially met


def test_scheduled_checkpoints():
    backend, hooks = FakeBackend(2), Hooks()
    _run(backend, hooks, LoopSettings(max_steps=500, evo_steps=100, seed=1, checkpoint_steps=200))
    assert [r for r, _ in hooks.checkpoints] == ["scheduled", "scheduled"]  # at 200 and 400


@pytest.mark.parametrize("interrupt_after", [1, 2, 4])
def test_interrupt_and_resume_is_exact(interrupt_after):
    settings = LoopSettings(max_steps=400, evo_steps=100, seed=11)
    reference = FakeBackend(3)
    _run(reference, Hooks(), settings, evolution=CopyBestEvolution())

    backend, hooks = FakeBackend(3), Hooks(interrupt_after_trained=interrupt_after)
    with pytest.raises(Interrupted):
        _run(backend, hooks, settings, evolution=CopyBestEvolution())
    reason, saved = hooks.checkpoints[-1]
    assert reason == "interrupted"

    resumed = FakeBackend(3)
    resumed.members = saved["members"]
    state = LoopState()
    state.load_state_dict(saved["loop"])
    _run(resumed, Hooks(), settings, state=state, evolution=CopyBestEvolution())
    assert resumed.members == reference.members


class RecordingEvolution(CopyBestEvolution):
    """Records the evolution calls the loop makes and when."""

    mutates_before_training = True

    def __init__(self, evolves: bool) -> None:
        self.evolves = evolves
        self.calls: list[tuple[str, list[int]]] = []

    def pre_training(self, backend):
        self.calls.append(("pre", [backend.steps(m) for m in range(len(backend))]))

    def evolve(self, backend, fitnesses):
        self.calls.append(("evolve", [backend.steps(m) for m in range(len(backend))]))
        return super().evolve(backend, fitnesses)


@pytest.mark.parametrize("evolves", [True, False])
def test_pre_training_mutation_once_before_any_training(evolves):
    evolution, backend = RecordingEvolution(evolves), FakeBackend(2)
    _run(backend, Hooks(), LoopSettings(max_steps=300, evo_steps=100, seed=2),
         evolution=evolution)
    kinds = [kind for kind, _ in evolution.calls]
    assert evolution.calls[0] == ("pre", [0, 0])  # before any member trained
    assert kinds.count("pre") == 1
    assert kinds.count("evolve") == (3 if evolves else 0)


def test_pre_training_mutation_not_repeated_on_resume():
    resumed = LoopState()
    resumed.pre_mutation_done = True  # as restored from a checkpoint
    evolution = RecordingEvolution(evolves=True)
    _run(FakeBackend(2), Hooks(), LoopSettings(max_steps=100, evo_steps=100, seed=2),
         state=resumed, evolution=evolution)
    assert [kind for kind, _ in evolution.calls] == ["evolve"]


class VectorBackend(FakeBackend):
    """Trains whole vector steps of ``num_envs`` env steps (floor), as off-policy members do."""

    num_envs = 16

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        steps = max(1, steps // self.num_envs) * self.num_envs
        return super().train(member, steps, seed=seed)


def test_a_remainder_shorter_than_a_generation_is_not_preceded_by_evolution():
    # 10,000 / 5,000 with 16 envs: 4,992 steps a generation leave a remainder of 16 steps;
    # evolving before it would judge just-mutated members on 16 steps of training.
    evolution, backend, hooks = RecordingEvolution(evolves=True), VectorBackend(2), Hooks()
    _run(backend, hooks, LoopSettings(max_steps=10_000, evo_steps=5_000, seed=2),
         evolution=evolution)
    assert [backend.steps(m) for m in range(2)] == [10_000, 10_000]
    assert len(hooks.generations) == 3
    evolved_at = [steps for kind, steps in evolution.calls if kind == "evolve"]
    assert evolved_at == [[4_992, 4_992], [10_000, 10_000]]  # not at 9,984, before the 16


def test_generations_are_numbered_from_one():
    backend, hooks = FakeBackend(2), Hooks()
    _run(backend, hooks, LoopSettings(max_steps=300, evo_steps=100, seed=1))
    assert [m["train/generation"] for m in hooks.generations] == [1, 2, 3]
