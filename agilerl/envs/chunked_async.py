"""An asynchronous vector env with a few worker processes, each stepping a chunk of envs.

Gymnasium's ``AsyncVectorEnv`` starts one process per sub-env. With more sub-envs than
cores (16 envs on 2 cores is the manifest default) most of each step goes to
inter-process round trips and context switches. Here ``num_workers`` processes (default:
one per available core, at most one per sub-env) each hold a ``SyncVectorEnv`` over a
contiguous chunk of the sub-envs; a step is one message per worker each way.

Sub-env ``i`` is seeded with ``seed + i`` exactly as in a ``SyncVectorEnv``, so for one
seed and one action sequence both produce the same trajectories. Autoreset happens inside
the workers' ``SyncVectorEnv`` in the mode given (``NEXT_STEP`` by default). Workers ignore
Ctrl-C (it reaches every process of the terminal's process group): the main process
handles it, e.g. finishes its step and checkpoints, and closes them.

Workers are forked where the platform allows (Linux, macOS' ``fork``), so env factories
built from user files executed under synthetic module names need not be importable in
the child; pass ``context`` to choose another start method.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, cast

import numpy as np
from gymnasium import Env
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import CloudpickleWrapper, batch_space

__all__ = ["ChunkedAsyncVectorEnv", "default_num_workers"]


def default_num_workers(num_envs: int) -> int:
    """One worker per core this process may use, at most one per sub-env."""
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
) -> None:
    # ``env_fns`` is a CloudpickleWrapper around this worker's list of env factories.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent_pipe.close()
    env: SyncVectorEnv | None = None
    try:
        env = SyncVectorEnv(env_fns.fn, autoreset_mode=autoreset_mode)
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


def _split(batch: Any, start: int, stop: int) -> Any:
    if isinstance(batch, dict):
        return {key: _split(value, start, stop) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_split(value, start, stop) for value in batch)
    return np.asarray(batch)[start:stop]


def _concat(parts: Sequence[Any]) -> Any:
    first = parts[0]
    if isinstance(first, dict):
        return {key: _concat([part[key] for part in parts]) for key in first}
    if isinstance(first, tuple):
        return tuple(_concat([part[i] for part in parts]) for i in range(len(first)))
    return np.concatenate(parts, axis=0)


def _merge_infos(infos: Sequence[dict[str, Any]], sizes: Sequence[int]) -> dict[str, Any]:
    """Merge per-chunk vector infos (arrays plus ``_key`` masks) into one vector info."""
    keys: list[str] = []
    for info in infos:
        keys += [key for key in info if key not in keys]
    merged: dict[str, Any] = {}
    for key in keys:
        present = [info[key] for info in infos if key in info]
        if isinstance(present[0], dict):
            merged[key] = _merge_infos([info.get(key, {}) for info in infos], sizes)
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


def _wrap(env_fns: list[Callable[[], Env]]) -> Any:
    """Cloudpickle the factories (lambdas and closures pickle under any start method)."""
    return CloudpickleWrapper(cast(Any, env_fns))


class ChunkedAsyncVectorEnv(VectorEnv):
    """Vector env over ``num_workers`` subprocesses, each running a chunk of sub-envs."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int | None = None,
        autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
        context: str | None = None,
    ):
        if not env_fns:
            raise ValueError("ChunkedAsyncVectorEnv needs at least one env")
        self.num_envs = len(env_fns)
        workers = num_workers or default_num_workers(self.num_envs)
        workers = max(1, min(workers, self.num_envs))
        bounds = np.linspace(0, self.num_envs, workers + 1).round().astype(int)
        self._slices = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

        dummy = env_fns[0]()
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
        ctx: Any = mp.get_context(context)
        self._pipes: list[Connection] = []
        self.processes: list[Any] = []
        self._closed = False
        for start, stop in self._slices:
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_chunk_worker,
                name=f"ChunkedAsyncVectorEnv-{start}:{stop}",
                args=(child, parent, _wrap(list(env_fns[start:stop])), autoreset_mode),
                daemon=True,
            )
            self._pipes.append(parent)
            self.processes.append(process)
            process.start()
            child.close()
        self._receive_all()  # every worker built its envs (or raised here)

    def _receive_all(self) -> list[Any]:
        results, error = [], None
        for pipe in self._pipes:
            try:
                status, payload = pipe.recv()
            except EOFError:
                status, payload = "error", ("EOFError", "worker exited unexpectedly", "")
            if status == "error" and error is None:
                error = payload
            results.append(payload)
        if error is not None:
            name, message, trace = error
            self.close(terminate=True)
            raise RuntimeError(f"Sub-env worker raised {name}: {message}\n{trace}")
        return results

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
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
        for pipe, (start, stop) in zip(self._pipes, self._slices, strict=True):
            pipe.send(("reset", (seeds[start:stop], options)))
        results = self._receive_all()
        obs = _concat([r[0] for r in results])
        return obs, _merge_infos([r[1] for r in results], self._sizes)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        for pipe, (start, stop) in zip(self._pipes, self._slices, strict=True):
            pipe.send(("step", _split(actions, start, stop)))
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

    def close(self, terminate: bool = False, **kwargs: Any) -> None:
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
                process.terminate()
                process.join()
            pipe.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close(terminate=True)
