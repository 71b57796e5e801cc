"""An asynchronous vector env with a few worker processes, each stepping a chunk of envs.

Gymnasium's ``AsyncVectorEnv`` starts one process per sub-env. With more sub-envs than
cores (16 envs on 2 cores is the manifest default) most of each step goes to
inter-process round trips and context switches. Here ``num_processes`` processes (default:
one per available core, at most one per sub-env) each hold a ``SyncVectorEnv`` over a
contiguous chunk of the sub-envs; a step is one message per worker each way.

Sub-env ``i`` is seeded with ``seed + i`` exactly as in a ``SyncVectorEnv``, so for one
seed and one action sequence both produce the same trajectories. Autoreset happens inside
the workers' ``SyncVectorEnv`` in the mode given (``NEXT_STEP`` by default).

Workers ignore SIGINT and SIGTERM: Ctrl-C in a terminal, ``timeout``, systemd, Kubernetes
and Slurm signal every process of the job, and the main process must be able to finish its
step and write a checkpoint with its workers still answering; it closes them afterwards.
The signals are blocked in the main process while a worker starts, so there is no moment
in which a fresh worker still has the main process's handlers. A worker that dies anyway
(SIGKILL, the OOM killer) or raises is reported as :class:`EnvWorkerError`, naming the env.

Workers are forked where the platform allows (Linux, macOS' ``fork``), so env factories
built from user files executed under synthetic module names need not be importable in
the child; pass ``context`` to choose another start method.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.util as mp_util
import os
import signal
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, cast

import numpy as np
from gymnasium import Env
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import CloudpickleWrapper, batch_space

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.envs.pettingzoo_env import PettingZooVectorEnv

__all__ = ["ChunkedAsyncVectorEnv", "EnvWorkerError", "default_num_processes"]

NestedArrays: TypeAlias = "np.ndarray | dict[str, NestedArrays] | tuple[NestedArrays, ...]"
"""Batched observations or actions: an array, or a dict/tuple of them (composite spaces)."""
VectorInfo: TypeAlias = "dict[str, np.ndarray | VectorInfo]"
"""A vector env's info: arrays over the sub-envs (with ``_key`` masks), or nested infos."""
ChunkFactory: TypeAlias = "Callable[[Sequence[Callable[[], object]]], PettingZooVectorEnv]"
"""Builds a worker's vector env over its chunk's env factories (None: a SyncVectorEnv)."""

#: Signals a job scheduler or a terminal sends to every process of a job.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class EnvWorkerError(RuntimeError):
    """An env worker process died or raised; the vector env is closed and unusable.

    The message is one paragraph naming the env and the worker; when a sub-env raised,
    ``worker_traceback`` holds the worker's traceback.
    """

    def __init__(self, message: str, worker_traceback: str | None = None) -> None:
        super().__init__(message)
        self.worker_traceback = worker_traceback


def default_num_processes(num_envs: int) -> int:
    """One env process per core this process may use, at most one per sub-env (not to be
    confused with ``training.num_workers``, the processes population members train in)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(num_envs, cores))


def _chunk_worker(
    pipe: Connection,
    parent_pipe: Connection,
    env_fns: Any,
    autoreset_mode: AutoresetMode,
    chunk_factory: ChunkFactory | None = None,
) -> None:
    # ``env_fns`` is a CloudpickleWrapper around this worker's list of env factories;
    # ``chunk_factory`` (None: a SyncVectorEnv) builds the chunk's vector env from them.
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked by the parent around the start
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    parent_pipe.close()
    env: SyncVectorEnv | PettingZooVectorEnv | None = None
    try:
        if chunk_factory is None:
            env = SyncVectorEnv(env_fns.fn, autoreset_mode=autoreset_mode)
        else:
            env = chunk_factory(env_fns.fn)
        pipe.send(("ok", None))
        while True:
            command, data = pipe.recv()
            if command == "step":
                pipe.send(("ok", env.step(data)))
            elif command == "reset":
                seeds, options = data
                pipe.send(("ok", env.reset(seed=seeds, options=options)))
            elif command == "close":
                pipe.send(("ok", None))
                break
            else:  # pragma: no cover - internal protocol
                raise RuntimeError(f"unknown command {command!r}")
    except (EOFError, BrokenPipeError):  # the main process went away
        pass
    except Exception as exc:
        pipe.send(("error", (type(exc).__name__, str(exc), traceback.format_exc())))
    finally:
        if env is not None:
            env.close()
        pipe.close()


def _split(batch: object, start: int, stop: int) -> NestedArrays:
    if isinstance(batch, dict):
        return {key: _split(value, start, stop) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_split(value, start, stop) for value in batch)
    return np.asarray(batch)[start:stop]


def _concat(parts: Sequence[NestedArrays]) -> NestedArrays:
    # every chunk's part has the structure of the first (one space)
    first = parts[0]
    if isinstance(first, dict):
        dicts = cast("Sequence[dict[str, NestedArrays]]", parts)
        return {key: _concat([part[key] for part in dicts]) for key in first}
    if isinstance(first, tuple):
        tuples = cast("Sequence[tuple[NestedArrays, ...]]", parts)
        return tuple(_concat([part[i] for part in tuples]) for i in range(len(first)))
    return np.concatenate(cast("Sequence[np.ndarray]", parts), axis=0)


def _merge_infos(infos: Sequence[VectorInfo], sizes: Sequence[int]) -> VectorInfo:
    """Merge per-chunk vector infos (arrays plus ``_key`` masks) into one vector info."""
    keys: list[str] = []
    for info in infos:
        keys += [key for key in info if key not in keys]
    merged: VectorInfo = {}
    for key in keys:
        present = [info[key] for info in infos if key in info]
        if isinstance(present[0], dict):  # a nested info in every chunk that has the key
            nested = cast("list[VectorInfo]", [info.get(key, {}) for info in infos])
            merged[key] = _merge_infos(nested, sizes)
            continue
        template = np.asarray(present[0])
        parts = [
            np.asarray(info[key])
            if key in info
            else np.zeros((size, *template.shape[1:]), dtype=template.dtype)
            for info, size in zip(infos, sizes, strict=True)
        ]
        merged[key] = np.concatenate(parts, axis=0)
    return merged


def _wrap(env_fns: list[Callable[[], object]]) -> CloudpickleWrapper:
    """Cloudpickle the factories (lambdas and closures pickle under any start method)."""
    return CloudpickleWrapper(cast(Any, env_fns))


def _kill_workers(processes: list[BaseProcess]) -> None:
    """Stop workers left running at interpreter exit (an env never closed). They ignore
    SIGTERM, which is all multiprocessing's own exit handler sends before it joins them."""
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()


def _start_ignoring_stop_signals(process: BaseProcess) -> None:
    """Start ``process`` with SIGINT/SIGTERM blocked until it has set them to ignored (a
    forked child inherits the parent's handlers and its signal mask)."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        process.start()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class ChunkedAsyncVectorEnv(VectorEnv):
    """Vector env over ``num_processes`` subprocesses, each running a chunk of sub-envs."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_processes: int | None = None,
        autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
        context: str | None = None,
        name: str | None = None,
    ):
        """``name``: how errors name the env (its id), e.g. ``"LunarLander-v3"``."""
        if not env_fns:
            raise ValueError("ChunkedAsyncVectorEnv needs at least one env")
        self.num_envs = len(env_fns)
        workers = num_processes or default_num_processes(self.num_envs)
        workers = max(1, min(workers, self.num_envs))
        bounds = np.linspace(0, self.num_envs, workers + 1).round().astype(int)
        self._slices = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

        dummy = env_fns[0]()
        self.name = name or str(getattr(dummy.spec, "id", None) or type(dummy).__name__)
        self.metadata = {**dummy.metadata, "autoreset_mode": autoreset_mode}
        self.render_mode = dummy.render_mode
        self.single_observation_space = dummy.observation_space
        self.single_action_space = dummy.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        dummy.close()
        del dummy

        if context is None and "fork" in mp.get_all_start_methods():
            context = "fork"
        self._start_workers(env_fns, autoreset_mode, mp.get_context(context))
        # Runs at exit before multiprocessing terminates (SIGTERM) and joins its children.
        mp_util.Finalize(self, _kill_workers, args=(self.processes,), exitpriority=10)
        self._receive_all()  # every worker built its envs (or raised here)

    def _start_workers(
        self, env_fns: Sequence[Callable[[], object]], autoreset_mode: AutoresetMode,
        ctx: Any, chunk_factory: ChunkFactory | None = None,
    ) -> None:
        """One worker process per slice of ``self._slices`` (``chunk_factory``: what the
        worker builds over its factories; None for a ``SyncVectorEnv``)."""
        self._pipes: list[Connection] = []
        self.processes: list[BaseProcess] = []
        self._closed = False
        for start, stop in self._slices:
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_chunk_worker,
                name=f"{type(self).__name__}-{start}:{stop}",
                args=(child, parent, _wrap(list(env_fns[start:stop])), autoreset_mode,
                      chunk_factory),
                daemon=True,
            )
            self._pipes.append(parent)
            self.processes.append(process)
            _start_ignoring_stop_signals(process)
            child.close()

    def _worker_label(self, index: int) -> str:
        start, stop = self._slices[index]
        return (f"env {self.name!r}: sub-env worker process {self.processes[index].pid} "
                f"(sub-envs {start} to {stop - 1})")

    def _send_all(self, messages: Sequence[tuple[str, object]]) -> None:
        for index, (pipe, message) in enumerate(zip(self._pipes, messages, strict=True)):
            try:
                pipe.send(message)
            except (BrokenPipeError, ConnectionResetError, OSError):
                self._fail(index, None)

    def _receive_all(self) -> list[Any]:
        results, failed = [], None
        for index, pipe in enumerate(self._pipes):
            try:
                status, payload = pipe.recv()
            except (EOFError, ConnectionResetError, OSError):
                status, payload = "died", None
            if status != "ok" and failed is None:
                failed = (index, payload)
            results.append(payload)
        if failed is not None:
            self._fail(*failed)
        return results

    def _fail(self, index: int, error: tuple[str, str, str] | None) -> NoReturn:
        """Close every worker and raise :class:`EnvWorkerError` for worker ``index``."""
        label = self._worker_label(index)
        process = self.processes[index]
        self.close(terminate=True)
        if error is not None:
            name, message, trace = error
            raise EnvWorkerError(f"{label} raised {name}: {message}", worker_traceback=trace)
        code = process.exitcode
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        elif code is not None:
            how = f"exited with status {code}"
        else:
            how = "stopped answering"
        raise EnvWorkerError(f"{label} {how}; the environment cannot continue")

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, object] | None = None,
    ) -> tuple[NestedArrays, VectorInfo]:
        if seed is None or isinstance(seed, int):
            seeds: list[int | None] = [
                None if seed is None else seed + i for i in range(self.num_envs)
            ]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        if seed is not None:
            self._np_random_seed = seeds[0]
        self._send_all([("reset", (seeds[start:stop], options)) for start, stop in self._slices])
        results = self._receive_all()
        obs = _concat([r[0] for r in results])
        return obs, _merge_infos([r[1] for r in results], self._sizes)

    def step(
        self, actions: object
    ) -> tuple[NestedArrays, np.ndarray, np.ndarray, np.ndarray, VectorInfo]:
        self._send_all([("step", _split(actions, start, stop)) for start, stop in self._slices])
        results = self._receive_all()
        obs = _concat([r[0] for r in results])
        rewards = np.concatenate([r[1] for r in results])
        terminated = np.concatenate([r[2] for r in results])
        truncated = np.concatenate([r[3] for r in results])
        return (
            obs,
            rewards,
            terminated,
            truncated,
            _merge_infos([r[4] for r in results], self._sizes),
        )

    @property
    def _sizes(self) -> list[int]:
        return [stop - start for start, stop in self._slices]

    def close(self, terminate: bool = False, **kwargs: object) -> None:
        if self._closed:
            return
        self._closed = True
        for pipe, process in zip(self._pipes, self.processes, strict=True):
            if not terminate and process.is_alive():
                try:
                    pipe.send(("close", None))
                    if pipe.poll(5):
                        pipe.recv()
                except (BrokenPipeError, EOFError, OSError):
                    pass
            process.join(timeout=5 if not terminate else 0.1)
            if process.is_alive():
                process.kill()  # workers ignore SIGTERM (see the module docs)
                process.join()
            pipe.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close(terminate=True)
