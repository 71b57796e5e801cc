"""``training.max_wall_seconds``: each run has its own deadline, and it reaches the member
trainers, in the run's context, wherever they run (this process, worker processes)."""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any

import pytest

from agilerl.core.member_training import Deadline, RunContext, TrainReport
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
    """Members that count steps; ``on_train(member, deadline)`` runs inside each call, with
    the deadline the members were built with (as a member trainer's context holds it)."""

    def __init__(self, n: int, on_train: Any, deadline: Deadline | None) -> None:
        self.counts = [0] * n
        self.on_train = on_train
        self.deadline = deadline

    def __len__(self) -> int:
        return len(self.counts)

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        self.on_train(member, self.deadline)
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

    deadline_a = Deadline(0.05)
    run_a, run_b = _Members(2, train_a, deadline_a), _Members(2, train_b, None)
    state_a, state_b = LoopState(), LoopState()
    original = run_b.evaluate

    def evaluate_b(member: int, *, seed: int) -> float:
        b_done_member_0.set()
        return original(member, seed=seed)

    run_b.evaluate = evaluate_b  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def go(backend: _Members, state: LoopState) -> None:
        try:
            run_generations(backend, LoopSettings(max_steps=200, evo_steps=100, seed=1),
                            state, _Hooks(), deadline=backend.deadline)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(run_b, state_b)),
               threading.Thread(target=go, args=(run_a, state_a))]
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


def _context_trainer(context: RunContext) -> Any:
    """A member trainer that reports what its run context holds."""
    deadline = context.deadline

    def train(agent: _Agent, steps: int, *, seed: int) -> TrainReport:
        agent.steps[-1] += steps
        left = deadline.seconds_left() if deadline is not None else -1.0
        return TrainReport(steps=steps, metrics={
            "seconds_left": left, "run_seed": float(context.seed),
            "on_cpu": float(context.device == "cpu"), "has_env": float(context.env is not None)})

    return train


def _reports(workers: int, deadline: Deadline | None) -> list[dict[str, float]]:
    setup = PopulationSetup(agents=[_Agent(index=i) for i in range(2)], env=_Env(),
                            env_factory=_make_env, member_trainer_factory=_context_trainer,
                            training_spec=None, seed=17, device="cpu", deadline=deadline)
    backend = make_backend(setup, BackendSettings(num_workers=workers))
    try:
        assert type(backend).__name__ == ("ProcessPopulation" if workers > 1 else
                                          "LocalPopulation")
        return [backend.train(m, 10, seed=m).metrics for m in range(2)]
    finally:
        backend.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_run_context_reaches_member_trainers_in_workers(workers: int) -> None:
    """Every member trainer, in this process or a worker, reads the run's deadline, seed
    and device from its context, with its own env in it."""
    reports = _reports(workers, Deadline(60.0))
    assert all(0 < r["seconds_left"] <= 60 for r in reports)
    assert all(r["run_seed"] == 17 and r["on_cpu"] and r["has_env"] for r in reports)
    assert [r["seconds_left"] for r in _reports(workers, None)] == [-1.0, -1.0]


def test_a_context_sent_elsewhere_leaves_the_env_and_memory_behind() -> None:
    context = RunContext(env=_Env(), memory=None, training_spec=None,
                         seed=5, device="cpu", deadline=Deadline(30.0))
    sent = pickle.loads(pickle.dumps(context.portable()))
    assert sent.env is None and sent.memory is None
    assert (sent.seed, sent.device) == (5, "cpu")
    assert sent.deadline is not None and 29.0 < sent.deadline.seconds_left() <= 30.0
