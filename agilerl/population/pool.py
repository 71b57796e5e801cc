"""Members trained and evaluated concurrently in worker processes on this machine.

:class:`ProcessPopulation` (``training.num_workers`` > 1, ``--workers N``) runs N workers
(:mod:`agilerl.population.pool_worker`), each with one torch thread and its own env: N - 1
worker processes, each with a replica of the shared replay memory, and one thread of the
driver itself, on the driver's memory. The driver only waits while members train, so the
thread puts its core to work without the memory of another process (an interpreter,
torch's pages and the heap it writes). The driver keeps the members as agent objects
for selection, mutation and checkpoints; a member's weights travel at most once each way per
generation: to a worker when the worker's copy is older than the driver's (after evolution),
and back with its evaluation. Training jobs start in member order, one per free worker, and
every call is seeded exactly as in :class:`~agilerl.population.local.LocalPopulation`, with
the same shared-memory rule (:mod:`agilerl.population.shared_memory`), so the run is
bit-identical to training the members one after another in one process.

While the workers run a phase's jobs the driver's main thread only sends, receives, waits
and reports progress (it builds no agent then: building one draws from the process's random generators,
which the driver's worker thread is using), so a member's result does not depend on whether
the thread or a process trained it.

A worker that dies or raises stops the run with :class:`MemberWorkerError`, naming the
member (the loop adds the generation); the driver writes no checkpoint then, so the last
one stays as it was. Worker processes ignore process-group stop signals (the driver
finishes the members in flight, checkpoints and stops them) and die with the driver.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, NoReturn, cast

from agilerl.core.errors import TrainingSetupError
from agilerl.core.member_training import Agent, TrainReport
from agilerl.population.backend import (
    EvalJob,
    MemberFailure,
    MutationOperator,
    TrainJob,
)
from agilerl.population.pool_worker import (
    ErrorReply,
    EvaluatedReply,
    Message,
    StateReply,
    TrainedReply,
    WorkerInit,
    receive,
    send,
    serve,
    serve_requests,
)
from agilerl.population.resident_pages import release_library_pages
from agilerl.population.setup import PopulationSetup
from agilerl.population.shared_memory import SharedReplay, shareable

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.components.replay_buffer import ReplayBuffer

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class MemberWorkerError(MemberFailure):
    """A worker process died or raised while it held a member; the run cannot continue."""


class WorkersUnavailable(TrainingSetupError):
    """This run's env, memory or agents cannot be sent to worker processes (found before
    any worker starts, so ``training.num_workers: 0`` can train in this process instead)."""


class _DriverThread:
    """The driver's own worker: a thread of this process, with a process's handle."""

    sentinel = None
    exitcode = None

    def __init__(self, conn: Connection, index: int, memory: object) -> None:
        self.pid = os.getpid()
        self._thread = threading.Thread(target=serve_requests, args=(conn,),
                                        kwargs={"driver_memory": memory},
                                        name=f"agilerl-member-worker-{index}", daemon=True)
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def kill(self) -> None:
        """A thread cannot be killed: closing the driver's end of its pipe stops it after
        the request it is serving (:func:`_kill` does)."""


class _Worker:
    """The driver's handle on one worker (a process, or the driver's own thread)."""

    def __init__(self, index: int, process: BaseProcess | _DriverThread,
                 conn: Connection) -> None:
        self.index = index
        self.process = process
        self.conn = conn
        self.busy: tuple[str, int] | None = None  # (request kind, member) awaiting a reply

    @property
    def waitables(self) -> list[Connection | int]:
        """What ``multiprocessing.connection.wait`` watches for its reply or its end."""
        sentinel = self.process.sentinel
        return [self.conn] if sentinel is None else [self.conn, sentinel]

    def describe(self) -> str:
        if isinstance(self.process, _DriverThread):
            return "the driver's worker thread"
        code = self.process.exitcode
        if code is None:
            return f"worker process {self.process.pid}"
        how = (f"was killed by {signal.Signals(-code).name}" if code < 0 and
               -code in signal.valid_signals() else f"exited with status {code}")
        return f"worker process {self.process.pid} {how}"


class ProcessPopulation:
    """The population seam over ``workers`` worker processes (see the module docstring)."""

    def __init__(self, setup: PopulationSetup, workers: int) -> None:
        if setup.memory is not None and not (shareable(setup.memory) or
                                             getattr(setup.memory, "read_only", False)):
            raise WorkersUnavailable(
                f"training.num_workers = {workers}: a {type(setup.memory).__name__} memory "
                "cannot be shared by worker processes; use training.num_workers: 1")
        self.agents: list[Agent] = list(setup.agents)
        self.memory = setup.memory
        self.shared = (SharedReplay(setup.memory, setup.pending_experience)
                       if shareable(setup.memory) else None)
        self._holder: list[int | None] = [None] * len(self.agents)  # worker with a copy
        self._current: list[bool] = [True] * len(self.agents)  # driver copy up to date
        self._steps = [int(a.steps[-1]) for a in self.agents]
        self._workers: list[_Worker] = []
        self._closed = False
        self._unfreeze = False  # this object froze the collector's generations (see _start)
        context = setup.context()
        init = WorkerInit(
            env_factory=setup.env_factory, member_trainer_factory=setup.member_trainer_factory,
            context=context.portable(), memory=_for_workers(self.memory),
            agent_class=type(self.agents[0]), eval_steps=setup.eval_steps,
            eval_loop=setup.eval_loop, torch_threads=int(setup.torch_threads or 1),
        )
        # Built here once as well, so what it warns about reaches the caller as in a
        # sequential run (the workers build theirs quietly).
        setup.member_trainer_factory(context)
        self._finalizer = weakref.finalize(self, _kill, self._workers)
        self._start(workers, init)

    # ------------------------------------------------------------------ processes
    def _start(self, count: int, init: WorkerInit) -> None:
        try:
            message = pickle.dumps(("init", init), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # a custom env, memory or agent class that cannot travel
            raise WorkersUnavailable(
                f"training.num_workers = {count}: the environment, replay memory or agents "
                f"cannot be sent to worker processes ({type(exc).__name__}: {exc}); use "
                "training.num_workers: 1") from None
        preload = (type(self.agents[0]).__module__,
                   type(init.member_trainer_factory).__module__)
        ctx, here = _context(preload, init.context.device)
        if here:
            # Forked from this process, workers share its pages until either side writes to
            # them. Everything so far goes into the collector's permanent generation until
            # the workers stop: no collection, here or in a worker, then writes to (and so
            # copies) the pages of those objects; a full collection here would otherwise
            # copy most of the Python heap once more. The load-time pages of the shared
            # libraries are handed back first: workers map only the pages they use.
            release_library_pages()
            if gc.get_freeze_count() == 0:
                gc.freeze()
                self._unfreeze = True
        try:  # processes first: a thread running at a fork would be lost in the child
            for index in range(1, count):
                self._workers.append(self._spawn(ctx, index))
            parent_conn, child_conn = mp.Pipe()
            # it trains on the driver's own memory, into which end_training_phase merges
            own = self.memory if self.shared is not None else None
            self._workers.insert(0, _Worker(0, _DriverThread(child_conn, 0, own), parent_conn))
        except BaseException:
            self.close()
            raise
        for worker in self._workers:
            try:
                worker.conn.send_bytes(message)
            except (OSError, ValueError):
                self._fail(worker, None)
        for worker in self._workers:
            worker.busy = ("init", -1)
        for worker in self._workers:
            self._reply(worker)

    @staticmethod
    def _spawn(ctx: ForkContext | ForkServerContext | SpawnContext, index: int) -> _Worker:
        parent_conn, child_conn = ctx.Pipe()
        process = ctx.Process(target=serve, args=(child_conn,),
                              name=f"agilerl-member-worker-{index}", daemon=True)
        blocked = (signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
                   if hasattr(signal, "pthread_sigmask") else None)
        try:  # the child unblocks them once it ignores them
            process.start()
        finally:
            if blocked is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        child_conn.close()
        return _Worker(index, process, parent_conn)

    def _send(self, worker: _Worker, message: Message, member: int | None = None) -> None:
        try:
            send(worker.conn, message)
        except (OSError, ValueError):
            self._fail(worker, member)

    def _reply(self, worker: _Worker) -> Message:
        member = worker.busy[1] if worker.busy else None
        try:
            message = receive(worker.conn)
        except (EOFError, OSError):
            self._fail(worker, member)
        worker.busy = None
        if message[0] == "error":
            _, failed, summary, trace = cast(ErrorReply, message)
            self._fail(worker, failed, summary, trace)
        return tuple(message)

    def _fail(self, worker: _Worker, member: int | None, summary: str | None = None,
              trace: str | None = None) -> NoReturn:
        worker.process.join(timeout=2)
        member = None if member is not None and member < 0 else member
        what = (f"{worker.describe()} raised {summary}" if summary is not None else
                worker.describe())
        self.close()
        raise MemberWorkerError(what, member, trace)

    # ------------------------------------------------------------------ scheduling
    def _run(self, tasks: Sequence[tuple[int, Callable[[_Worker], Message]]],
             place: Callable[[int, list[_Worker]], _Worker | None],
             stop: Callable[[], bool] | None = None
             ) -> Iterator[tuple[int, int, Message]]:
        """Start ``tasks`` ``(member, request(worker))`` in order, one per free worker
        (``place`` picks one among the free, or None to wait), and yield ``(member, worker
        index, reply)`` in task order. Once ``stop()`` is true no further task starts."""
        pending = deque(tasks)
        replies: dict[int, tuple[int, Message]] = {}
        order = [member for member, _ in tasks]
        done = 0
        while done < len(order):
            free = [w for w in self._workers if w.busy is None]
            while pending and free and not (stop is not None and stop()):
                member, request = pending[0]
                worker = place(member, free)
                if worker is None:
                    break
                pending.popleft()
                free.remove(worker)
                self._send(worker, request(worker), member)
                worker.busy = ("task", member)
            busy = [w for w in self._workers if w.busy is not None]
            if not busy:
                return  # stopped before every task started
            ready = wait([item for w in busy for item in w.waitables])
            for worker in busy:
                if any(item in ready for item in worker.waitables):
                    member = worker.busy[1] if worker.busy else -1
                    replies[member] = (worker.index, self._reply(worker))
            while done < len(order) and order[done] in replies:
                index, reply = replies.pop(order[done])
                yield order[done], index, reply
                done += 1

    def _state_for(self, member: int, worker: _Worker) -> dict[str, object] | None:
        """The member's state to send with a request, or None when ``worker`` has it."""
        if self._holder[member] == worker.index:
            return None
        return self.get_state(member)

    # ------------------------------------------------------------------ the seam
    def __len__(self) -> int:
        return len(self.agents)

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        """One member's training call (in a worker); see :meth:`train_members`."""
        for _, report in self.train_members([TrainJob(member, steps, seed)]):
            return report
        raise RuntimeError(f"member {member} was not trained")  # pragma: no cover

    def evaluate(self, member: int, *, seed: int) -> float:
        return self.evaluate_members([EvalJob(member, seed)])[0]

    def train_members(
        self, jobs: Sequence[TrainJob], *, stop: Callable[[], bool] | None = None
    ) -> Iterator[tuple[int, TrainReport]]:
        runnable = [job for job in jobs if job.steps]
        by_member = {job.member: job for job in runnable}
        if runnable:  # what evolution and evaluation touched in torch's libraries goes
            release_library_pages()  # (each worker process does the same)

        def request(job: TrainJob) -> Callable[[_Worker], Message]:
            return lambda w: ("train", job.member, job.steps, job.seed,
                              self._state_for(job.member, w))

        def place(member: int, free: list[_Worker]) -> _Worker:
            holder = self._holder[member]
            return next((w for w in free if w.index == holder), free[0])

        replies = self._run([(job.member, request(job)) for job in runnable], place, stop)
        for job in jobs:
            if job.member not in by_member:
                if stop is not None and stop():
                    return
                yield job.member, TrainReport(steps=0)
                continue
            reply = next(replies, None)
            if reply is None:
                return
            member, index, message = reply
            _, _, report, delta, steps = cast(TrainedReply, message)
            self._holder[member] = index
            self._current[member] = False
            self._steps[member] = steps
            if self.shared is not None and delta is not None:
                self.shared.pending.append(delta)
            yield member, report

    def end_training_phase(self) -> None:
        if self.shared is None:
            return
        deltas = list(self.shared.pending)
        self.shared.end_phase()
        for worker in self._workers:  # the driver's thread shares the memory just merged
            self._send(worker, ("merge", [] if isinstance(worker.process, _DriverThread)
                                else deltas))

    def evaluate_members(self, jobs: Sequence[EvalJob]) -> list[float]:
        def request(job: EvalJob) -> Callable[[_Worker], Message]:
            return lambda w: ("evaluate", job.member, job.seed, self._state_for(job.member, w))

        def place(member: int, free: list[_Worker]) -> _Worker | None:
            holder = self._holder[member]
            if holder is None:
                return free[0]
            return next((w for w in free if w.index == holder), None)

        fitnesses, states = [], []
        for member, index, message in self._run(
                [(job.member, request(job)) for job in jobs], place):
            _, _, fitness, state = cast(EvaluatedReply, message)
            self._holder[member] = index
            states.append((member, state))
            fitnesses.append(float(fitness))
        for member, state in states:  # every worker is idle now (see the module docstring)
            self._replace(member, state)
        return fitnesses

    def memory_state(self) -> Mapping[str, object] | None:
        if self.shared is not None:
            return self.shared.state_dict()
        return self.memory.state_dict() if self.memory is not None else None

    def agents_here(self) -> list[Agent]:
        if self._closed:  # after a worker failed: what the driver holds (a member that was
            return self.agents  # training in a worker is as it was sent there)
        for member in range(len(self.agents)):
            self._bring_back(member)
        return self.agents

    def get_state(self, member: int) -> dict[str, object]:
        self._bring_back(member)
        return dict(self.agents[member].get_state())

    def set_state(self, member: int, state: Mapping[str, object]) -> None:
        agent = self.agents[member]
        self.agents[member] = type(agent).from_state(state, device=agent.device)
        self._changed_here(member)

    def apply_mutation(self, operator: MutationOperator, *, pre_training: bool = False,
                       members: Sequence[int] | None = None) -> None:
        slots = list(range(len(self.agents))) if members is None else sorted(set(members))
        for member in slots:
            self._bring_back(member)
        if members is None:
            self.agents = list(operator.mutation(self.agents, pre_training_mut=pre_training))
        else:
            chosen = [self.agents[m] for m in slots]
            mutated = operator.mutation(chosen, pre_training_mut=pre_training,
                                        indices=[agent.index for agent in chosen])
            for slot, agent in zip(slots, mutated, strict=True):
                self.agents[slot] = agent
        for member in slots:
            self._changed_here(member)

    def set_hyperparameters(self, member: int, values: Mapping[str, object]) -> None:
        self._bring_back(member)
        agent = self.agents[member]
        current = agent.hyperparameters
        for name, value in values.items():
            if current.get(name) != value:
                # only a mutable (numeric) hyperparameter differs between members
                assert isinstance(value, int | float)
                agent.set_hyperparameter(name, value)
        self._changed_here(member)

    def steps(self, member: int) -> int:
        return int(self.agents[member].steps[-1]) if self._current[member] else \
            self._steps[member]

    def hyperparameters(self, member: int) -> dict[str, object]:
        self._bring_back(member)
        return dict(self.agents[member].hyperparameters)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            with contextlib.suppress(OSError, ValueError):
                send(worker.conn, ("stop",))
        for worker in self._workers:
            worker.process.join(timeout=5)
        _kill(self._workers)
        self._thaw()

    def _thaw(self) -> None:
        """Give the objects frozen before the workers forked back to the collector."""
        if self._unfreeze:
            self._unfreeze = False
            gc.unfreeze()

    # ------------------------------------------------------------------ bookkeeping
    def _bring_back(self, member: int) -> None:
        """Make the driver's copy of ``member`` current (fetch it from its worker)."""
        if self._current[member]:
            return
        holder = self._holder[member]
        worker = self._workers[holder] if holder is not None else None
        if worker is None:
            raise RuntimeError(f"member {member} is neither here nor in a worker")
        self._send(worker, ("get", member), member)
        worker.busy = ("get", member)
        _, _, state = cast(StateReply, self._reply(worker))
        self._replace(member, state)

    def _replace(self, member: int, state: Mapping[str, object]) -> None:
        agent = self.agents[member]
        self.agents[member] = type(agent).from_state(state, device=agent.device)
        self._current[member] = True
        self._steps[member] = int(self.agents[member].steps[-1])

    def _changed_here(self, member: int) -> None:
        self._holder[member] = None
        self._current[member] = True
        self._steps[member] = int(self.agents[member].steps[-1])


def _context(modules: tuple[str, ...],
             device: str) -> tuple[ForkContext | ForkServerContext | SpawnContext, bool]:
    """Where workers come from, and whether that is this process.

    Forked from this process where that is safe (:func:`_can_fork_here`): they start in
    milliseconds and share torch, the envs' modules and everything built so far with this
    process (copy-on-write), so each worker costs only the pages it writes. Otherwise from a
    fork server that imported torch, ``modules`` (the agent's, the member trainer
    factory's) and the envs once (workers share those pages with each other); spawned fresh
    interpreters where there is no fork server (not POSIX).
    """
    if _can_fork_here(device):
        return mp.get_context("fork"), True
    if "forkserver" not in mp.get_all_start_methods():  # pragma: no cover - not POSIX
        return mp.get_context("spawn"), False
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([*modules, "agilerl.population.fork_preload"])
    return ctx, False


def _can_fork_here(device: str) -> bool:
    """Forking this process is safe: POSIX, members on the CPU and CUDA never initialised
    here, and no other Python thread (one holding a lock at the fork would leave it locked
    in the worker). Torch's and BLAS's own thread pools are fork-aware, and workers run one
    torch thread."""
    if "fork" not in mp.get_all_start_methods() or not str(device).startswith("cpu"):
        return False
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return False
    return threading.active_count() == 1


def _for_workers(memory: ReplayBuffer | OfflineDataset | None) -> object:
    """What workers get of the driver's memory: a copy of a replay buffer (each applies the
    shared-memory rule to its own), or the handle of a read-only memory that opens the
    same data in each worker (an offline dataset's memory-mapped files)."""
    handle = getattr(memory, "worker_handle", None)
    return handle() if callable(handle) else memory


def _kill(workers: list[_Worker]) -> None:
    """Stop workers still running (after close, or when the driver forgets them): kill the
    processes; the driver's thread stops when its pipe closes."""
    for worker in workers:
        if worker.process.is_alive() and not isinstance(worker.process, _DriverThread):
            worker.process.kill()
            worker.process.join(timeout=5)
        worker.conn.close()
