"""Choosing a population backend: ``training.backend``/``num_workers`` -> a backend object.

A backend is built by a factory registered under a name (``local`` is built in; ``ray``
registers itself when :mod:`agilerl.population.ray_backend` is importable) from two things:

- :class:`~agilerl.population.setup.PopulationSetup`, what every backend receives: the
  agents, the driver's env and shared replay memory, the run's seed, device and deadline,
  and picklable factories that rebuild an equivalent env and the paradigm's member trainer
  in another process;
- :class:`BackendSettings`, where members should live (the manifest's ``training.backend``,
  ``num_workers``, ``ray_address``, or the CLI's ``--backend``, ``--workers``,
  ``--ray-address``).

Whatever the backend, the driver writes checkpoints from ``get_state`` and the shared
memory's state, so a checkpoint does not depend on where members trained.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from agilerl.core.errors import (
    ArgumentError,
    MissingExtraError,
    TrainingSetupError,
    UnsupportedSettingError,
)
from agilerl.population.backend import PopulationBackend
from agilerl.population.setup import PopulationSetup

__all__ = ["AUTO_WORKERS", "BACKENDS", "BackendSettings", "PopulationSetup", "make_backend",
           "register_backend", "usable_cores"]

BACKENDS = ("local", "ray")
"""The names ``training.backend`` accepts (the schema's enum)."""

#: Modules that register a backend when imported, by backend name.
_PLUGINS = {"ray": "agilerl.population.ray_backend"}


@dataclass
class BackendSettings:
    """Where members live: ``training.backend``, ``num_workers``, ``ray_address``."""

    backend: str = "local"
    num_workers: int = 0
    """Local backend: 1 in this process, N > 1 worker processes, :data:`AUTO_WORKERS` (0,
    the schema's default) one per usable core, in this process where workers cannot help."""
    ray_address: str | None = None
    batched_updates: bool = False
    """Same-architecture members take their gradient steps together (local, one process)."""

    @classmethod
    def from_training(cls, training: object, *, backend: str | None = None,
                      num_workers: int | None = None,
                      ray_address: str | None = None) -> BackendSettings:
        """The manifest's ``training`` settings, each overridden by a given argument."""
        chosen = backend if backend is not None else getattr(training, "backend", None)
        workers = num_workers if num_workers is not None else getattr(training, "num_workers",
                                                                      None)
        address = ray_address if ray_address is not None else getattr(training, "ray_address",
                                                                      None)
        if ray_address is not None and (chosen or "local") != "ray":
            # Given on its own it would be ignored: members would train here, not on the
            # cluster the user named.
            raise ArgumentError(
                f"ray_address={ray_address!r:.80} (--ray-address) needs the ray backend, but "
                f"this run's backend is {chosen or 'local'!r}: add --backend ray (backend='ray'"
                "), or set training.backend: ray in the manifest")
        return cls(backend=str(chosen or "local"),
                   num_workers=int(AUTO_WORKERS if workers is None else workers),
                   ray_address=address,
                   batched_updates=bool(getattr(training, "batched_updates", False)))

    def workers_for(self, members: int, threads_per_worker: int = 1) -> int:
        """Worker processes for ``members`` members, each running ``threads_per_worker``
        torch threads (1: train in this process). Automatic: one per usable core, as many
        as the cores hold at that many threads each, at most one per member."""
        wanted = self.num_workers if self.num_workers != AUTO_WORKERS else \
            usable_cores() // max(1, int(threads_per_worker))
        return max(1, min(int(wanted), int(members)))


AUTO_WORKERS = 0
"""``training.num_workers`` (and ``--workers``) value for one worker per usable core."""


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, e.g. a container's or
    ``taskset``'s share, rather than every core of the machine)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1  # pragma: no cover - macOS, Windows


BackendFactory = Callable[[PopulationSetup, BackendSettings], PopulationBackend]

_REGISTRY: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make ``training.backend: name`` build members with ``factory(setup, settings)``."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r} (training.backend accepts "
                         f"{', '.join(BACKENDS)})")
    _REGISTRY[name] = factory


def _local(setup: PopulationSetup, settings: BackendSettings) -> PopulationBackend:
    from agilerl.population.local import LocalPopulation

    automatic = settings.num_workers == AUTO_WORKERS
    workers = settings.workers_for(len(setup.agents), int(setup.torch_threads or 1))
    if automatic and (settings.batched_updates or not setup.worker_processes
                      or _runs_processes()):
        workers = 1
    if settings.batched_updates:
        from agilerl.population.lockstep import LockstepPopulation, refuse_unbatchable

        refuse_unbatchable(setup, workers)
        return LockstepPopulation.from_setup(setup)
    if workers > 1:
        from agilerl.population.pool import ProcessPopulation, WorkersUnavailable

        try:
            return ProcessPopulation(setup, workers)
        except WorkersUnavailable:
            if not automatic:  # asked for by number: say why it cannot be done
                raise
    return LocalPopulation.from_setup(setup)


def _runs_processes() -> bool:
    """This process already has worker processes (the env's sub-env workers): they use
    the cores, and a member worker cannot start its own."""
    import multiprocessing

    return bool(multiprocessing.active_children())


register_backend("local", _local)


def make_backend(setup: PopulationSetup, settings: BackendSettings) -> PopulationBackend:
    """The backend ``settings`` asks for, holding ``setup``'s members.

    Raises :class:`TrainingSetupError` for an unknown backend and
    :class:`MissingExtraError` when the ray backend is asked for without Ray installed.
    """
    name = settings.backend
    if name not in BACKENDS:
        raise TrainingSetupError(f"training.backend = {name!r}: unknown backend (choose "
                                 f"{' or '.join(BACKENDS)})")
    if settings.batched_updates and name != "local":
        raise UnsupportedSettingError(
            f"training.batched_updates needs the local backend (members in one process), "
            f"not training.backend = {name!r}: set one of them differently")
    if name not in _REGISTRY and name in _PLUGINS:
        _load_plugin(name)
    if name not in _REGISTRY:
        raise TrainingSetupError(f"training.backend = {name!r} is not available in this "
                                 "version of agilerl")
    return _REGISTRY[name](setup, settings)


def _load_plugin(name: str) -> None:
    if name == "ray":
        try:
            importlib.import_module("ray")
        except ImportError:
            raise MissingExtraError(
                "training.backend = 'ray' (--backend ray) needs Ray: pip install 'agilerl[ray]'"
            ) from None
    try:
        importlib.import_module(_PLUGINS[name])
    except ModuleNotFoundError as exc:
        if exc.name != _PLUGINS[name]:
            raise
