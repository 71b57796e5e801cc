"""The worker process of :class:`agilerl.population.pool.ProcessPopulation`.

A worker holds the members it last trained or was sent, its own env and a replica of the
shared replay memory, and answers one request at a time from the driver over a pipe
(messages are pickled tuples, see :func:`serve`). It ignores the stop signals a terminal or
job scheduler sends to the whole process group (the driver decides when members stop), and
dies with its parent (the driver, or the fork server that exits with the driver): on Linux
the kernel kills it when the parent dies (even by SIGKILL); elsewhere a watchdog thread
notices that its parent changed.
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
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.population.backend import Deadline

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PR_SET_PDEATHSIG = 1


@dataclass
class WorkerInit:
    """What a worker is started with (sent once, pickled)."""

    env_factory: Any
    member_trainer_factory: Any
    training_spec: Any
    algorithm_spec: Any
    paradigm: str
    memory: Any
    """A copy of the driver's committed shared memory, the handle of a read-only memory
    (``open_here()`` opens it in the worker), or None."""
    agent_class: Any
    eval_steps: int | None
    eval_loop: int
    torch_threads: int
    device: str


def send(conn: Connection, message: Any) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive(conn: Connection) -> Any:
    return pickle.loads(conn.recv_bytes())


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


def _malloc_trim() -> Callable[[], Any]:
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


class _Worker:
    def __init__(self, init: WorkerInit) -> None:
        import torch

        torch.set_num_threads(max(1, int(init.torch_threads)))
        from agilerl.population.backends import MemberContext
        from agilerl.population.shared_memory import SharedReplay, shareable

        self.init = init
        self.env = init.env_factory()
        opened = getattr(init.memory, "open_here", None)  # a read-only memory's handle
        self.memory = opened() if callable(opened) else init.memory
        self.shared = SharedReplay(self.memory) if shareable(self.memory) else None
        context = MemberContext(env=self.env, memory=self.memory,
                                training_spec=init.training_spec,
                                algorithm_spec=init.algorithm_spec, paradigm=init.paradigm)
        with warnings.catch_warnings():  # the driver has shown them (ProcessPopulation)
            warnings.simplefilter("ignore")
            self.train_member = init.member_trainer_factory(context)
        self.agents: dict[int, Any] = {}

    def load(self, member: int, state: Any) -> Any:
        if state is not None:
            self.agents[member] = self.init.agent_class.from_state(state, device=self.init.device)
        return self.agents[member]

    def train(self, member: int, steps: int, seed: int, state: Any,
              deadline: Deadline | None) -> tuple[Any, ...]:
        from agilerl.checkpoint.rng import seed_everything

        agent = self.load(member, state)
        seed_everything(seed)
        start = time.perf_counter()
        if self.shared is not None:
            self.shared.begin_member()
        report = self.train_member(agent, steps, seed=seed, deadline=deadline)
        delta = self.shared.end_member() if self.shared is not None else None
        report.seconds = time.perf_counter() - start
        return report, delta, int(agent.steps[-1])

    def evaluate(self, member: int, seed: int, state: Any) -> tuple[float, dict[str, Any]]:
        from agilerl.checkpoint.rng import seed_everything

        agent = self.load(member, state)
        seed_everything(seed)
        self.env.reset(seed=seed)
        fitness = float(agent.test(self.env, max_steps=self.init.eval_steps,
                                   loop=self.init.eval_loop))
        return fitness, dict(agent.get_state())

    def merge(self, deltas: list[Any]) -> None:
        if self.shared is not None:
            self.shared.end_phase(deltas)

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


def serve(conn: Connection) -> None:
    """The worker's main loop. Requests and replies:

    ``("init", WorkerInit)`` -> ``("ready",)``; ``("train", member, steps, seed, state|None,
    deadline|None)`` -> ``("trained", member, report, delta, steps)``; ``("evaluate", member, seed,
    state|None)`` -> ``("evaluated", member, fitness, state)``; ``("get", member)`` ->
    ``("state", member, state)``; ``("merge", deltas)`` -> no reply; ``("stop",)`` -> exit.
    Any failure -> ``("error", member, summary, traceback)``, then the worker exits.
    """
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked by the driver around the start
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _die_with_parent()
    # Started as a daemon (never joined at the driver's exit), yet a member's env may step
    # its sub-envs in processes of its own, which daemons may not start.
    multiprocessing.current_process().daemon = False
    worker: _Worker | None = None
    member: int | None = None
    release_freed_memory = _malloc_trim()
    try:
        while True:
            release_freed_memory()
            try:
                request = receive(conn)
            except (EOFError, OSError):
                return
            kind, member = request[0], (request[1] if len(request) > 1 and
                                        isinstance(request[1], int) else None)
            if kind == "stop":
                return
            if kind == "init":
                worker = _Worker(request[1])
                send(conn, ("ready",))
            elif worker is None:
                raise RuntimeError(f"request {kind!r} before init")
            elif kind == "train":
                send(conn, ("trained", member, *worker.train(*request[1:])))
            elif kind == "evaluate":
                send(conn, ("evaluated", member, *worker.evaluate(*request[1:])))
            elif kind == "get":
                send(conn, ("state", member, dict(worker.agents[request[1]].get_state())))
            elif kind == "merge":
                worker.merge(request[1])
            else:
                raise RuntimeError(f"unknown request {kind!r}")
    except BaseException as exc:  # report anything, then exit: the driver stops the run
        summary = f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(OSError, ValueError):
            send(conn, ("error", member, summary, traceback.format_exc()))
    finally:
        if worker is not None:
            worker.close()
        sys.stdout.flush()
