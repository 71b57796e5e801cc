"""``training.max_wall_seconds``: each run has its own deadline, and it reaches the member
trainers wherever they run (this process, worker processes)."""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any

import pytest

from agilerl.core.member_training import Deadline, TrainReport
from agilerl.population.backend import SequentialCalls
from agilerl.population.backends import BackendSettings, PopulationSetup, make_backend
from agilerl.training.loop import LoopSettings, LoopState, run_generations


def test_a_deadline_travels_as_the_seconds_left() -> None:
    deadline = Deadline(30.0)
    copy = pickle.loads(pickle.dumps(deadline))
    assert 29.0 < copy.seconds_left() <= 30.0 and not copy.spent()
    spent = pickle.loads(pickle.dumps(Deadline(-1.0)))
    assert spent.spent() and spent.seconds_left() < 0


class _Hooks:
    def on_member_trained(self, state, member, report):
        pass

    def on_generation(self, state, metrics):
        pass

    def on_evolved(self, state, elite, fitnesses):
        pass

    def checkpoint(self, state, *, reason):
        pass

    def interrupt_requested(self):
        return False


class _Members(SequentialCalls):
    """Members that count steps; ``on_train(member, deadline)`` runs inside each call."""

    def __init__(self, n: int, on_train: Any) -> None:
        self.counts = [0] * n
        self.on_train = on_train

    def __len__(self) -> int:
        return len(self.counts)

    def train(self, member: int, steps: int, *, seed: int,
              deadline: Deadline | None = None) -> TrainReport:
        self.on_train(member, deadline)
        self.counts[member] += steps
        return TrainReport(steps=steps, seconds=0.01)

    def evaluate(self, member: int, *, seed: int) -> float:
        return 0.0

    def steps(self, member: int) -> int:
        return self.counts[member]

    def hyperparameters(self, member: int) -> dict[str, Any]:
        return {}


def test_two_runs_in_one_process_have_their_own_wall_budget() -> None:
    """Run A (budget 0.05 s) spends its budget while run B (no budget) trains in another
    thread; B must train every member to max_steps and A must stop after its first member."""
    a_spent, b_done_member_0 = threading.Event(), threading.Event()

    def train_a(member: int, deadline: Deadline | None) -> None:
        while deadline is not None and not deadline.spent():
            time.sleep(0.01)
        a_spent.set()
        b_done_member_0.wait(timeout=10)  # A's budget is spent while B decides what to train

    def train_b(member: int, deadline: Deadline | None) -> None:
        assert deadline is None
        a_spent.wait(timeout=10)

    run_a, run_b = _Members(2, train_a), _Members(2, train_b)
    state_a, state_b = LoopState(), LoopState()
    original = run_b.evaluate

    def evaluate_b(member: int, *, seed: int) -> float:
        b_done_member_0.set()
        return original(member, seed=seed)

    run_b.evaluate = evaluate_b  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def go(backend: _Members, state: LoopState, budget: float | None) -> None:
        try:
            run_generations(backend, LoopSettings(max_steps=200, evo_steps=100, seed=1,
                                                  max_wall_seconds=budget), state, _Hooks())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(run_b, state_b, None)),
               threading.Thread(target=go, args=(run_a, state_a, 0.05))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert run_b.counts == [200, 200] and state_b.finished and not state_b.out_of_time
    assert run_a.counts == [100, 0] and state_a.out_of_time and not state_a.finished


class _Agent:
    """A member with no weights: what the process pool needs to move it."""

    def __init__(self, steps: int = 0, index: int = 0) -> None:
        self.steps = [steps]
        self.index = index
        self.device = "cpu"
        self.hyperparameters: dict[str, Any] = {}

    def get_state(self) -> dict[str, Any]:
        return {"steps": self.steps[-1], "index": self.index}

    @classmethod
    def from_state(cls, state: dict[str, Any], device: str = "cpu") -> _Agent:
        return cls(state["steps"], state["index"])

    def test(self, env: Any, max_steps: Any = None, loop: int = 1) -> float:
        return 0.0


class _Env:
    def reset(self, seed: int | None = None) -> None:
        return None


def _make_env() -> _Env:
    return _Env()


def _seconds_left_trainer(context: Any) -> Any:
    def train(agent: _Agent, steps: int, *, seed: int,
              deadline: Deadline | None = None) -> TrainReport:
        agent.steps[-1] += steps
        left = deadline.seconds_left() if deadline is not None else -1.0
        return TrainReport(steps=steps, metrics={"seconds_left": left})

    return train


@pytest.mark.parametrize("workers", [1, 2])
def test_the_deadline_reaches_member_trainers_in_workers(workers: int) -> None:
    setup = PopulationSetup(agents=[_Agent(index=i) for i in range(2)], env=_Env(),
                            env_factory=_make_env, member_trainer_factory=_seconds_left_trainer,
                            training_spec=None)
    backend = make_backend(setup, BackendSettings(num_workers=workers))
    try:
        assert type(backend).__name__ == ("ProcessPopulation" if workers > 1 else
                                          "LocalPopulation")
        left = [backend.train(m, 10, seed=m, deadline=Deadline(60.0)).metrics["seconds_left"]
                for m in range(2)]
        assert all(0 < s <= 60 for s in left)
        assert backend.train(0, 10, seed=3).metrics["seconds_left"] == -1.0
    finally:
        backend.close()
