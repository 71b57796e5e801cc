"""Members living in Ray actors: ``training.backend: ray`` (``--backend ray``).

Each actor (:class:`MemberHost`, one CPU) holds a group of members (member ``m`` lives in
actor ``m % actors``) with its own replica of the env and of the shared replay memory, and
runs their ``train``/``evaluate`` calls exactly as :class:`~agilerl.population.local.
LocalPopulation` does (same per-call seeding, same torch thread count), so a Ray run gives
the same members as a sequential run of the same seed.

Where states go: every call that changes a member returns its new state as a separate
object that stays in Ray's object store; the driver keeps only the reference (the member's
*last state*). Selection copies a member by handing that reference to the destination
actor, and mutation sends the (small) operator from actor to actor in slot order, so its
random draws happen in the same order as in one process. The driver fetches states only to
write a checkpoint (exactly the local backend's checkpoint, so runs resume across
backends) and to hand the final population back.

A lost actor (its process or node died) is re-created from its members' last states, with
a warning, and the call it was running is run again; the run goes on unchanged. Shared
replay memory: each actor's replica starts every training phase from the same memory; the
members' additions are merged into every replica (and the driver's copy, for checkpoints)
in member order by :meth:`RayPopulation.end_training_phase`.

Placement: ``ray.init(address)`` with ``training.ray_address`` (``host:port``, ``ray://``
or ``auto``; none starts Ray on this machine). Actors are spread over the cluster's nodes,
or, when the environment variable ``AGILERL_RAY_PLACEMENT_GROUP`` names a placement group
(the Arena server reserves one of ``num_nodes`` bundles on distinct nodes per job), one
actor per bundle of that group.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import ray

from agilerl.population.backend import (
    Deadline,
    EvalJob,
    MemberFailure,
    TrainJob,
    TrainReport,
)
from agilerl.population.backends import (
    BackendSettings,
    MemberContext,
    PopulationSetup,
    register_backend,
)
from agilerl.population.ray_cluster import NAMESPACE, PLACEMENT_GROUP_ENV, unreachable
from agilerl.population.shared_memory import ExperienceDelta, SharedReplay, shareable
from agilerl.training.errors import TrainingSetupError

#: Times one member's call is retried on re-created actors before the run fails.
MAX_RECOVERIES = 3


class RayMemberFailure(MemberFailure):
    """A member's call raised in its Ray actor, or its actor could not be re-created."""


class MemberHost:
    """The actor: some members, their env and memory replicas, and the calls on them."""

    def __init__(self, recipe: Mapping[str, Any], slots: int) -> None:
        import torch

        from agilerl.population.local import LocalPopulation

        threads = recipe["torch_threads"]
        if threads:
            torch.set_num_threads(int(threads))
        self.agent_class = recipe["agent_class"]
        self.device = recipe["device"]
        self.env = recipe["env_factory"]()
        # Arrays from the object store are read-only views of it: the replica owns copies.
        self.memory = copy.deepcopy(recipe["memory"])
        #: the generation rule on this actor's memory replica (several members share it)
        self.shared = SharedReplay(self.memory) if recipe["shared"] else None
        context = MemberContext(env=self.env, memory=self.memory,
                                training_spec=recipe["training_spec"],
                                algorithm_spec=recipe["algorithm_spec"],
                                paradigm=recipe["paradigm"])
        # Seeding and calls as in one process; the memory rule is applied here, across
        # the whole population, not by this partial LocalPopulation (hence no memory).
        self.members = LocalPopulation(
            [None] * slots, self.env, recipe["member_trainer_factory"](context),
            eval_steps=recipe["eval_steps"], eval_loop=recipe["eval_loop"])

    def _result(self, member: int) -> tuple[dict[str, Any], dict[str, Any]]:
        agent = self.members.agents[member]
        info = {"steps": int(agent.steps[-1]), "hyperparameters": dict(agent.hyperparameters)}
        return info, dict(agent.get_state())

    def load(self, member: int, state: Mapping[str, Any],
             index: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        own = copy.deepcopy(dict(state))  # own arrays, not read-only object-store views
        if index is not None:
            own["index"] = index
        self.members.agents[member] = self.agent_class.from_state(own, device=self.device)
        return self._result(member)

    def train(self, member: int, steps: int, seed: int, deadline: Deadline | None = None
              ) -> tuple[TrainReport, Any, dict[str, Any], dict[str, Any]]:
        """Train one member; also returns what it added to the shared memory (or None)."""
        if self.shared is not None:
            self.shared.begin_member()
        report = self.members.train(member, steps, seed=seed, deadline=deadline)
        delta = self.shared.end_member() if self.shared is not None else None
        return (report, delta, *self._result(member))

    def evaluate(self, member: int, seed: int) -> tuple[float, dict[str, Any], dict[str, Any]]:
        fitness = self.members.evaluate(member, seed=seed)
        return (fitness, *self._result(member))

    def mutate(self, member: int, operator: Any, pre_training: bool,
               exempt: bool) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """Mutate one member with ``operator`` as ``operator.mutation(population)`` would at
        this slot: an ``exempt`` member (the elite in slot 0) still draws its kind."""
        agent = self.members.agents[member]
        operator = copy.deepcopy(operator)
        if exempt:
            mutated = operator.mutation([agent], pre_training_mut=pre_training)
        else:
            mutated = operator.mutation([agent], pre_training_mut=pre_training,
                                        indices=[agent.index])
        self.members.agents[member] = mutated[0]
        return (operator, *self._result(member))

    def set_hyperparameters(self, member: int, values: Mapping[str, Any]
                            ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.members.set_hyperparameters(member, values)
        return self._result(member)

    def node_id(self) -> str:
        """The Ray node this actor runs on."""
        return str(ray.get_runtime_context().get_node_id())

    def end_phase(self, *deltas: ExperienceDelta) -> None:
        """Merge every member's additions of this phase, in member order, into the replica."""
        if self.shared is not None:
            self.shared.end_phase(list(deltas))

    def memory_state(self) -> dict[str, Any] | None:
        """The replica's state (with one member, the only copy of the memory)."""
        return self.memory.state_dict() if self.memory is not None else None

    def load_memory(self, state: Mapping[str, Any]) -> None:
        self.memory.load_state_dict(copy.deepcopy(dict(state)))
        if self.shared is not None:
            self.shared = SharedReplay(self.memory)


class RayPopulation:
    """The population seam over Ray actors (see the module docstring)."""

    def __init__(self, setup: PopulationSetup, settings: BackendSettings) -> None:
        if str(setup.device) != "cpu":
            raise TrainingSetupError(
                f"--backend ray trains members on the cluster's CPUs in this version; "
                f"device {setup.device!r} is not supported with it (use --device cpu)")
        self.size = len(setup.agents)
        self._initial = list(setup.agents)
        self.agent_class = type(setup.agents[0])
        self.device = setup.device
        self.memory = setup.memory
        #: The driver's copy of the shared memory (for checkpoints and re-created actors):
        #: the members' deltas of the current phase are its ``pending`` list.
        self.shared: SharedReplay | None = (
            SharedReplay(setup.memory, setup.pending_experience)
            if self.size > 1 and shareable(setup.memory) else None)
        self._actors: list[Any] = []
        self._last: list[Any] = [None] * self.size
        self._info: list[dict[str, Any]] = [{} for _ in range(self.size)]
        self._deltas: dict[int, Any] = {}
        self._closed = False
        self._started_ray = _connect(settings.ray_address)
        try:
            self._start(setup, settings)
        except BaseException:
            self.close()
            raise

    def _start(self, setup: PopulationSetup, settings: BackendSettings) -> None:
        """Start the actors and load every member into its actor."""
        self._phase: list[Any] = [ray.put(d) for d in (self.shared.pending if self.shared
                                                        else [])]
        self._recipe = ray.put({
            "agent_class": self.agent_class, "device": setup.device,
            "env_factory": setup.env_factory, "memory": setup.memory,
            "shared": self.shared is not None,
            "member_trainer_factory": setup.member_trainer_factory,
            "training_spec": setup.training_spec, "algorithm_spec": setup.algorithm_spec,
            "paradigm": setup.paradigm, "eval_steps": setup.eval_steps,
            "eval_loop": setup.eval_loop, "torch_threads": setup.torch_threads,
        })
        self._placement = _named_placement_group()
        self._actors = [self._new_actor(k) for k in range(self._actor_count(settings))]
        for member, agent in enumerate(setup.agents):
            self._call(member, "load", member, ray.put(dict(agent.get_state())))
        nodes = set(self.actor_nodes())
        if not setup.extra.get("verbose", True):
            return
        placed = " in the reserved placement group" if self._placement is not None else ""
        print(f"{len(self._actors)} Ray actors on {len(nodes)} node"
              f"{'s' if len(nodes) != 1 else ''}{placed} (member m in actor m % "
              f"{len(self._actors)})", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ actors
    def _actor_count(self, settings: BackendSettings) -> int:
        if self._placement is not None:
            return min(self.size, self._placement.bundle_count)
        if settings.num_workers > 1:
            return min(self.size, settings.num_workers)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        return max(1, min(self.size, cpus))

    def _new_actor(self, k: int) -> Any:
        options: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0}
        if self._placement is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                self._placement, placement_group_bundle_index=k)
        else:
            options["scheduling_strategy"] = "SPREAD"
        return ray.remote(MemberHost).options(**options).remote(self._recipe, self.size)

    def _actor(self, member: int) -> Any:
        return self._actors[member % len(self._actors)]

    def _group(self, member: int) -> list[int]:
        k = len(self._actors)
        return list(range(member % k, self.size, k))

    def _submit(self, member: int, method: str, *args: Any) -> list[Any]:
        """Start ``method`` on ``member``'s actor; refs ``[result..., info, state]``."""
        n = _RETURNS[method]
        return list(getattr(self._actor(member), method).options(num_returns=n).remote(*args))

    def _finish(self, member: int, refs: list[Any]) -> Any:
        """Wait for a call started by :meth:`_submit`; record the member's info and last
        state; return the call's own result (None for ``load``/``set_hyperparameters``)."""
        try:
            info = ray.get(refs[-2])
        except ray.exceptions.RayTaskError as exc:  # the member's own code raised
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            raise RayMemberFailure(f"{type(cause).__name__}: {cause}", member,
                                   worker_traceback=str(exc)) from None
        self._info[member] = info
        self._last[member] = refs[-1]
        if len(refs) == 4:  # train: its memory delta, added to the phase's when yielded
            self._deltas[member] = refs[1]
        return _fetch(refs[0]) if len(refs) >= 3 else None

    def _commit_delta(self, member: int) -> None:
        """``member`` is yielded as trained: its delta joins the phase's (member order)."""
        ref = self._deltas.pop(member, None)
        if self.shared is not None and ref is not None:
            self.shared.pending.append(_fetch(ref))
            self._phase.append(ref)

    def _call(self, member: int, method: str, *args: Any) -> Any:
        """Run one call on ``member``'s actor, re-creating the actor if it is lost."""
        for attempt in range(MAX_RECOVERIES + 1):
            refs = self._submit(member, method, *args)
            try:
                return self._finish(member, refs)
            except ray.exceptions.RayActorError as exc:
                self._recover(member, exc, attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _recover(self, member: int, exc: BaseException, attempt: int) -> None:
        """Replace ``member``'s lost actor by a new one holding its members' last states."""
        k = member % len(self._actors)
        if attempt >= MAX_RECOVERIES:
            raise RayMemberFailure(
                f"its Ray actor (members {self._group(member)}) was lost {attempt + 1} times "
                f"in a row ({type(exc).__name__})", member) from None
        warnings.warn(f"Ray actor of members {self._group(member)} was lost "
                      f"({type(exc).__name__}); re-creating it from their last states",
                      RuntimeWarning, stacklevel=3)
        with _suppress_ray_errors():
            ray.kill(self._actors[k], no_restart=True)
        self._actors[k] = self._new_actor(k)
        if self.memory is not None:
            if self.shared is None:
                raise RayMemberFailure("its Ray actor was lost with the replay memory, "
                                       "which only that actor held", member) from None
            ray.get(self._actors[k].load_memory.remote(self.shared.memory.state_dict()))
        for slot in self._group(member):
            if self._last[slot] is not None:
                refs = self._submit(slot, "load", slot, self._last[slot])
                try:
                    self._finish(slot, refs)
                except ray.exceptions.ObjectLostError:
                    raise RayMemberFailure("its last state was lost with its Ray node",
                                           slot) from None

    def actor_nodes(self) -> list[str]:
        """The Ray node of each actor (actor ``k`` holds members ``k, k + actors, ...``)."""
        return list(ray.get([actor.node_id.remote() for actor in self._actors]))

    # ------------------------------------------------------------------ protocol
    def __len__(self) -> int:
        return self.size

    def train(self, member: int, steps: int, *, seed: int,
              deadline: Deadline | None = None) -> TrainReport:
        return next(iter(self.train_members([TrainJob(member, steps, seed, deadline)])))[1]

    def evaluate(self, member: int, *, seed: int) -> float:
        return self.evaluate_members([EvalJob(member, seed)])[0]

    def train_members(
        self, jobs: Sequence[TrainJob], *, stop: Callable[[], bool] | None = None
    ) -> Iterator[tuple[int, TrainReport]]:
        """Start jobs strictly in order, each as soon as its member's actor is free, and
        yield them in order: once ``stop()`` holds nothing more starts, so the members
        trained are always a prefix of ``jobs``."""
        pending = list(jobs)
        running: dict[int, tuple[TrainJob, list[Any], float]] = {}  # actor -> job
        done: dict[int, TrainReport] = {}
        order = [job.member for job in jobs]
        yielded = 0
        while yielded < len(order):
            while pending and not (stop is not None and stop()):
                job = pending[0]
                if job.steps == 0:
                    done[job.member] = TrainReport(steps=0)
                    pending.pop(0)
                    continue
                k = job.member % len(self._actors)
                if k in running:
                    break
                refs = self._submit(job.member, "train", job.member, job.steps, job.seed,
                                    job.deadline)
                running[k] = (job, refs, time.perf_counter())
                pending.pop(0)
            if not running and order[yielded] not in done:
                return  # stopped
            if running:
                self._collect(running, done)
            while yielded < len(order) and order[yielded] in done:
                member = order[yielded]
                self._commit_delta(member)
                yield member, done.pop(member)
                yielded += 1

    def _collect(self, running: dict[int, tuple[TrainJob, list[Any], float]],
                 done: dict[int, TrainReport]) -> None:
        """Wait for one running train call to end; a lost actor's call runs again."""
        by_ref = {refs[-2]: k for k, (_, refs, _) in running.items()}
        ready, _ = ray.wait(list(by_ref), num_returns=1)
        k = by_ref[ready[0]]
        job, refs, _started = running.pop(k)
        try:
            report = self._finish(job.member, refs)
        except ray.exceptions.RayActorError as exc:
            self._recover(job.member, exc, 0)
            report = self._call(job.member, "train", job.member, job.steps, job.seed,
                                job.deadline)
        done[job.member] = report

    def end_training_phase(self) -> None:
        if self.shared is None:
            return
        phase, self._phase = self._phase, []
        merging = [actor.end_phase.remote(*phase) for actor in self._actors]
        self.shared.end_phase()
        ray.get(merging)

    def evaluate_members(self, jobs: Sequence[EvalJob]) -> list[float]:
        started = {job.member: (self._actor(job.member),
                                self._submit(job.member, "evaluate", job.member, job.seed))
                   for job in jobs}
        fitnesses = []
        for job in jobs:
            actor, refs = started[job.member]
            try:
                fitnesses.append(float(self._finish(job.member, refs)))
            except ray.exceptions.RayActorError as exc:
                if self._actor(job.member) is actor:  # not yet re-created for a sibling
                    self._recover(job.member, exc, 0)
                fitnesses.append(float(self._call(job.member, "evaluate", job.member,
                                                  job.seed)))
        return fitnesses

    def get_state(self, member: int) -> dict[str, Any]:
        return dict(_fetch(self._last[member]))

    def set_state(self, member: int, state: Mapping[str, Any]) -> None:
        self._call(member, "load", member, ray.put(dict(state)))

    def copy_members(self, sources: Mapping[int, int]) -> None:
        """Slot ``dst`` becomes a copy of slot ``sources[dst]`` (index set to ``dst``); the
        state goes from actor to actor through the object store, never through here."""
        last = {dst: self._last[src] for dst, src in sources.items()}  # read before writes
        for dst, ref in last.items():
            self._call(dst, "load", dst, ref, dst)

    def apply_mutation(self, operator: Any, *, pre_training: bool = False,
                       members: Sequence[int] | None = None) -> None:
        slots = list(range(self.size)) if members is None else sorted(set(members))
        elite_kept = not (getattr(operator, "mutate_elite", True) or pre_training)
        current = operator
        for slot in slots:
            exempt = members is None and slot == 0 and elite_kept
            current = self._call(slot, "mutate", slot, current, pre_training, exempt)
        if current is not operator:  # carry the operator's random state on in this process
            operator.__dict__.update(current.__dict__)

    def set_hyperparameters(self, member: int, values: Mapping[str, Any]) -> None:
        self._call(member, "set_hyperparameters", member, dict(values))

    def steps(self, member: int) -> int:
        return int(self._info[member]["steps"])

    def hyperparameters(self, member: int) -> dict[str, Any]:
        return dict(self._info[member]["hyperparameters"])

    def memory_state(self) -> dict[str, Any] | None:
        if self.shared is not None:
            return self.shared.state_dict()
        if self.memory is None:
            return None
        return dict(_fetch(self._actors[0].memory_state.remote()))

    def agents_here(self) -> list[Any]:
        if self._closed:  # ray.get would quietly start a new, empty Ray instance here
            raise RuntimeError("the Ray backend is closed: its members' states went with "
                               "its Ray session (take them before close())")
        try:
            states = [_fetch(ref) for ref in self._last]
        except ray.exceptions.RayError as exc:  # a failed run: keep its own error in front
            warnings.warn(f"the members' last states could not be fetched from Ray "
                          f"({type(exc).__name__}); the trainer keeps its members as they "
                          "were before this train() call (the last checkpoint has them)",
                          RuntimeWarning, stacklevel=2)
            return list(self._initial)
        return [self.agent_class.from_state(s, device=self.device) for s in states]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.shared is None and self.memory is not None and self._actors:
            # one member: its memory lived in the actor; the trainer keeps it for train()
            with _suppress_ray_errors():
                self.memory.load_state_dict(_fetch(self._actors[0].memory_state.remote()))
        for actor in self._actors:
            with _suppress_ray_errors():
                ray.kill(actor, no_restart=True)
        self._actors = []
        if self._started_ray:
            ray.shutdown()


def _fetch(ref: Any) -> Any:
    """An object of the object store as this process's own copy: ``ray.get`` maps arrays
    in place, and they would change under us once the store frees or reuses them."""
    return copy.deepcopy(ray.get(ref))


#: Return values of each actor method: [own results..., info, state].
_RETURNS = {"load": 2, "set_hyperparameters": 2, "evaluate": 3, "mutate": 3, "train": 4}


def _connect(address: str | None) -> bool:
    """Join the cluster at ``address`` unless this process already is a Ray driver; True
    when this call connected (and so the backend disconnects when it closes)."""
    if ray.is_initialized():
        return False
    where = f"--ray-address / training.ray_address {address!r}"
    problem = unreachable(address)
    if problem is not None:
        raise TrainingSetupError(f"{where}: no Ray cluster answers there ({problem})")
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.ERROR,
                 log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise TrainingSetupError(f"{where}: cannot reach a Ray cluster there ({exc})") from None
    return True


def _named_placement_group() -> Any:
    """The placement group named by ``AGILERL_RAY_PLACEMENT_GROUP``, ready, or None."""
    name = os.environ.get(PLACEMENT_GROUP_ENV)
    if not name:
        return None
    from ray.util import get_placement_group

    try:
        group = get_placement_group(name)
    except ValueError:
        raise TrainingSetupError(f"{PLACEMENT_GROUP_ENV} = {name!r}: no such placement group "
                                 f"in Ray namespace {NAMESPACE!r}") from None
    ray.get(group.ready(), timeout=300)
    return group


class _suppress_ray_errors:  # noqa: N801 - used like contextlib.suppress
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is not None and issubclass(exc[0], ray.exceptions.RayError | ValueError)


def _ray_backend(setup: PopulationSetup, settings: BackendSettings) -> RayPopulation:
    return RayPopulation(setup, settings)


register_backend("ray", _ray_backend)  # type: ignore[arg-type]

