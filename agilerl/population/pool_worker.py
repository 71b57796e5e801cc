"""The workers of :class:`agilerl.population.pool.ProcessPopulation`.

A worker holds the members it last trained or was sent, its own env and a replica of the
shared replay memory, and answers one request at a time from the driver over a pipe
(messages are pickled tuples, see :func:`serve_requests`). One worker is a thread of the
driver itself (the driver only waits while members train, so its core trains a member
too); the others are processes (:func:`serve`). A worker process ignores the stop signals a
terminal or job scheduler sends to the whole process group (the driver decides when members
stop), and dies with its parent (the driver, or the fork server that exits with the
driver): on Linux the kernel kills it when the parent dies (even by SIGKILL); elsewhere a
watchdog thread notices that its parent changed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, cast

from agilerl.population.resident_pages import release_library_pages

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.components.replay_buffer import ReplayBuffer
    from agilerl.core.member_training import (
        Agent,
        EnvFactory,
        MemberTrainerFactory,
        RunContext,
        TrainReport,
    )
    from agilerl.population.backend import MemberEnv
    from agilerl.population.shared_memory import ExperienceDelta

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PR_SET_PDEATHSIG = 1


@dataclass
class WorkerInit:
    """What a worker is started with (sent once, pickled)."""

    env_factory: EnvFactory
    member_trainer_factory: MemberTrainerFactory
    context: RunContext
    """The driver's run context without its env and memory (the worker puts in its own)."""
    memory: object
    """A copy of the driver's committed shared memory, the handle of a read-only memory
    (``open_here()`` opens it in the worker), or None."""
    agent_class: type[Agent]
    eval_steps: int | None
    eval_loop: int
    torch_threads: int


Message = tuple[object, ...]
"""A request or reply: a tuple whose first item names its kind (see :func:`serve_requests`)."""
TrainRequest = tuple[str, int, int, int, "Mapping[str, object] | None"]
EvaluateRequest = tuple[str, int, int, "Mapping[str, object] | None"]
TrainedReply = tuple[str, int, "TrainReport", "ExperienceDelta | None", int]
EvaluatedReply = tuple[str, int, float, dict[str, object]]
StateReply = tuple[str, int, dict[str, object]]
ErrorReply = tuple[str, int | None, str, str]


def send(conn: Connection, message: Message) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive(conn: Connection) -> Message:
    """The next message on ``conn`` (every message sent is a tuple, see :func:`send`)."""
    return cast(Message, pickle.loads(conn.recv_bytes()))


def _die_with_parent() -> None:
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="agilerl-parent-watch", daemon=True).start()


def _malloc_trim() -> Callable[[], object]:
    """glibc's ``malloc_trim(0)``: hand the heap's free pages back to the system. A worker
    frees most of what a request allocated (pickled states, batches, the generation's
    rollouts), and without this those pages stay resident, fragmented, until the next
    request grows past them; with it the worker's memory is what it holds (a no-op where
    the C library has no ``malloc_trim``)."""
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return lambda: None
    return lambda: trim(0)


@contextlib.contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    """Torch ops on ``count`` intra-op threads for the duration (the setting is per
    process: the driver's own worker thread restores the driver's afterwards)."""
    import torch

    previous = torch.get_num_threads()
    if previous != count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


class _Worker:
    def __init__(self, init: WorkerInit, driver_memory: object = None) -> None:
        from agilerl.population.shared_memory import SharedReplay, shareable

        self.init = init
        # the run's env, built by the trainer's env builder: every kind resets and closes
        self.env = cast("MemberEnv", init.env_factory())
        #: The driver's own shared memory (the driver's thread): the driver merges the
        #: phase's deltas into it, so this worker has nothing to merge.
        self.merged_by_driver = driver_memory is not None
        opened = getattr(init.memory, "open_here", None)  # a read-only memory's handle
        # the run's memory (the trainer's replay memory or dataset, as the driver sent it,
        # or opened here from its handle)
        self.memory = cast("ReplayBuffer | OfflineDataset | None",
                           driver_memory if driver_memory is not None else
                           opened() if callable(opened) else init.memory)
        self.shared = SharedReplay(self.memory) if shareable(self.memory) else None
        self.context = replace(init.context, env=self.env, memory=self.memory)
        with warnings.catch_warnings():  # the driver has shown them (ProcessPopulation)
            warnings.simplefilter("ignore")
            self.train_member = init.member_trainer_factory(self.context)
        self.agents: dict[int, Agent] = {}

    def load(self, member: int, state: Mapping[str, object] | None) -> Agent:
        if state is not None:
            self.agents[member] = self.init.agent_class.from_state(state,
                                                                  device=self.context.device)
        return self.agents[member]

    def train(self, member: int, steps: int, seed: int, state: Mapping[str, object] | None
              ) -> tuple[TrainReport, ExperienceDelta | None, int]:
        from agilerl.checkpoint.rng import seed_everything

        agent = self.load(member, state)
        seed_everything(seed)
        start = time.perf_counter()
        if self.shared is not None:
            self.shared.begin_member()
        report = self.train_member(agent, steps, seed=seed)
        delta = self.shared.end_member() if self.shared is not None else None
        report.seconds = time.perf_counter() - start
        return report, delta, int(agent.steps[-1])

    def evaluate(self, member: int, seed: int,
                 state: Mapping[str, object] | None) -> tuple[float, dict[str, object]]:
        from agilerl.checkpoint.rng import seed_everything

        agent = self.load(member, state)
        seed_everything(seed)
        self.env.reset(seed=seed)
        fitness = float(agent.test(self.env, max_steps=self.init.eval_steps,
                                   loop=self.init.eval_loop))
        return fitness, dict(agent.get_state())

    def merge(self, deltas: list[ExperienceDelta]) -> None:
        if self.shared is None:
            return
        if self.merged_by_driver:
            self.shared.pending = []
        else:
            self.shared.end_phase(deltas)

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


def serve(conn: Connection) -> None:
    """A worker process's main: ignore the process group's stop signals, die with the
    parent, then :func:`serve_requests` until told to stop."""
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked by the driver around the start
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _die_with_parent()
    # Started as a daemon (never joined at the driver's exit), yet a member's env may step
    # its sub-envs in processes of its own, which daemons may not start.
    multiprocessing.current_process().daemon = False
    try:
        serve_requests(conn, own_process=True)
    finally:
        sys.stdout.flush()


def serve_requests(conn: Connection, *, own_process: bool = False,
                   driver_memory: object = None) -> None:
    """Answer the driver's requests on ``conn`` until ``("stop",)`` or the driver's end of
    the pipe closes (the loop of a worker process, and of the driver's own worker thread).
    Requests and replies:

    ``("init", WorkerInit)`` -> ``("ready",)``; ``("train", member, steps, seed,
    state|None)`` -> ``("trained", member, report, delta, steps)``; ``("evaluate", member, seed,
    state|None)`` -> ``("evaluated", member, fitness, state)``; ``("get", member)`` ->
    ``("state", member, state)``; ``("merge", deltas)`` -> no reply; ``("stop",)`` -> return.
    A failure of any kind -> ``("error", member, summary, traceback)``, then it returns. Its end of
    the pipe is closed on return, so the driver sees it go whatever happened.

    A worker process (``own_process``) sets its torch thread count once; the driver's
    thread sets it around each request and gives the driver its own setting back between.
    The driver's thread trains on the driver's shared replay memory (``driver_memory``)
    rather than a replica of it.

    A worker process hands back its library pages (:func:`release_library_pages`) as each
    training phase begins: what evaluating, loading and mutating members touched in torch's
    libraries is not kept resident through training (the driver does the same for itself).
    """
    worker: _Worker | None = None
    member: int | None = None
    last = ""  # the previous request's kind
    release_freed_memory = _malloc_trim()
    try:
        while True:
            release_freed_memory()
            try:
                request = receive(conn)
            except (EOFError, OSError):
                return
            kind, member = cast(str, request[0]), (request[1] if len(request) > 1 and
                                        isinstance(request[1], int) else None)
            if kind == "stop":
                return
            if kind == "init":
                init = cast(WorkerInit, request[1])
                threads = max(1, int(init.torch_threads))
                if own_process:
                    import torch

                    torch.set_num_threads(threads)
                with _torch_threads(threads):
                    worker = _Worker(init, driver_memory)
                send(conn, ("ready",))
            elif worker is None:
                raise RuntimeError(f"request {kind!r} before init")
            else:
                if own_process and kind == "train" and last != "train":
                    release_library_pages()  # a training phase starts (see the docstring)
                last = kind
                with _torch_threads(max(1, int(worker.init.torch_threads))):
                    reply = _answer(worker, kind, request)
                if reply is not None:
                    send(conn, reply)
    except BaseException as exc:  # report anything, then stop: the driver stops the run
        summary = f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(OSError, ValueError):
            send(conn, ("error", member, summary, traceback.format_exc()))
    finally:
        if worker is not None:
            worker.close()
        conn.close()


def _answer(worker: _Worker, kind: str, request: Message) -> Message | None:
    member = request[1]
    if kind == "train":
        return ("trained", member, *worker.train(*cast(TrainRequest, request)[1:]))
    if kind == "evaluate":
        return ("evaluated", member, *worker.evaluate(*cast(EvaluateRequest, request)[1:]))
    if kind == "get":
        return ("state", member, dict(worker.agents[cast(int, member)].get_state()))
    if kind == "merge":
        worker.merge(cast("list[ExperienceDelta]", request[1]))
        return None
    raise RuntimeError(f"unknown request {kind!r}")
