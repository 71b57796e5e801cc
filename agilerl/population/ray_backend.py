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
a warning, and the call it was running is run again; where no new actor can be placed
within the recovery timeout (``AGILERL_RAY_RECOVERY_TIMEOUT``, default 30 s), its members
move to the remaining actors on other nodes. Either way the run goes on unchanged. When
nothing can take them, or their last states went with the node, the run stops with
:class:`RayMemberFailure` naming the member and the node; every wait after a loss is
bounded by that timeout, so a lost node never hangs the driver. Shared
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

import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import ray

from agilerl.core.errors import TrainingSetupError
from agilerl.core.member_training import Agent, TrainReport
from agilerl.population.backend import EvalJob, MemberFailure, MutationOperator, TrainJob
from agilerl.population.backends import (
    BackendSettings,
    PopulationSetup,
    register_backend,
)
from agilerl.population.ray_cluster import RECOVERY_TIMEOUT_ENV
from agilerl.population.ray_driver import (
    connect,
    fetch,
    named_placement_group,
    recovery_timeout,
    suppress_ray_errors,
)
from agilerl.population.ray_host import HostInfo, HostRecipe, MemberHost
from agilerl.population.shared_memory import ExperienceDelta, SharedReplay, shareable

T = TypeVar("T")

#: Times one member's call is retried on re-created actors before the run fails.
MAX_RECOVERIES = 3


class RayMemberFailure(MemberFailure):
    """A member's call raised in its Ray actor, or its actor could not be re-created."""


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
        #: the actor index holding each member (``m % actors`` until a lost actor's
        #: members move to the others) and the Ray node id of each actor
        self._home = [0] * self.size
        self._nodes: list[str | None] = []
        #: seconds to wait for a replacement actor or for a state after a loss
        self._timeout = recovery_timeout()
        self._broken = False
        self._last: list[ray.ObjectRef[dict[str, object]] | None] = [None] * self.size
        self._info: list[HostInfo] = [{} for _ in range(self.size)]
        self._deltas: dict[int, ray.ObjectRef[ExperienceDelta]] = {}
        self._closed = False
        self._started_ray = connect(settings.ray_address)
        try:
            self._start(setup, settings)
        except BaseException:
            self.close()
            raise

    def _start(self, setup: PopulationSetup, settings: BackendSettings) -> None:
        """Start the actors and load every member into its actor."""
        self._phase: list[ray.ObjectRef[ExperienceDelta]] = [
            ray.put(d) for d in (self.shared.pending if self.shared else [])]
        self._recipe = ray.put(HostRecipe({
            "agent_class": self.agent_class,
            "env_factory": setup.env_factory, "memory": setup.memory,
            "shared": self.shared is not None,
            "member_trainer_factory": setup.member_trainer_factory,
            "eval_steps": setup.eval_steps,
            "eval_loop": setup.eval_loop, "torch_threads": setup.torch_threads,
        }))
        # Sent with each actor as it starts, not kept in the object store: the deadline
        # it carries is pickled as the seconds left then, so an actor started again after
        # a node loss gets the run's deadline, not a fresh budget.
        self._context = setup.context().portable()
        self._placement = named_placement_group()
        self._actors = [self._new_actor(k) for k in range(self._actor_count(settings))]
        self._home = [m % len(self._actors) for m in range(self.size)]
        self._nodes = list(self.actor_nodes())
        for member, agent in enumerate(setup.agents):
            self._call(member, "load", member, ray.put(dict(agent.get_state())))
        nodes = set(self._nodes)
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
        options: dict[str, object] = {"num_cpus": 1, "max_restarts": 0}
        if self._placement is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                self._placement, placement_group_bundle_index=k)
        else:
            options["scheduling_strategy"] = "SPREAD"
        return ray.remote(MemberHost).options(**options).remote(self._recipe, self._context,
                                                                self.size)

    def _actor(self, member: int) -> Any:
        return self._actors[self._home[member]]

    def _group(self, member: int) -> list[int]:
        """The members held by ``member``'s actor."""
        k = self._home[member]
        return [m for m in range(self.size) if self._home[m] == k]

    def _live_actors(self) -> list[Any]:
        return [actor for actor in self._actors if actor is not None]

    def _submit(self, member: int, method: str,
                *args: object) -> list[ray.ObjectRef[object]]:
        """Start ``method`` on ``member``'s actor; refs ``[result..., info, state]``."""
        n = _RETURNS[method]
        return list(getattr(self._actor(member), method).options(num_returns=n).remote(*args))

    def _finish(self, member: int, refs: list[ray.ObjectRef[object]],
                timeout: float | None = None) -> object:
        """Wait for a call started by :meth:`_submit` (at most ``timeout`` seconds: else
        ``GetTimeoutError``); record the member's info and last state; return the call's own
        result (None for ``load``/``set_hyperparameters``)."""
        try:
            info = cast(HostInfo, ray.get(refs[-2], timeout=timeout))
        except ray.exceptions.RayTaskError as exc:  # the member's own code raised
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            raise RayMemberFailure(f"{type(cause).__name__}: {cause}", member,
                                   worker_traceback=str(exc)) from None
        self._info[member] = info
        self._last[member] = cast("ray.ObjectRef[dict[str, object]]", refs[-1])
        if len(refs) == 4:  # train: its memory delta, added to the phase's when yielded
            # (fetched only with a shared memory, where every trained member has one)
            self._deltas[member] = cast("ray.ObjectRef[ExperienceDelta]", refs[1])
        return fetch(refs[0]) if len(refs) >= 3 else None

    def _commit_delta(self, member: int) -> None:
        """``member`` is yielded as trained: its delta joins the phase's (member order)."""
        ref = self._deltas.pop(member, None)
        if self.shared is not None and ref is not None:
            self.shared.pending.append(self._fetch(ref, member, "what it added to the replay "
                                                   "memory"))
            self._phase.append(ref)

    def _fetch(self, ref: ray.ObjectRef[T] | None, member: int, what: str) -> T:
        """:func:`~agilerl.population.ray_driver.fetch` of an object a member's actor made,
        within the recovery timeout: one that went with its node fails the run, naming it."""
        assert ref is not None, f"member {member} has no state: it was never loaded"
        try:
            return fetch(ref, timeout=self._timeout)
        except (ray.exceptions.ObjectLostError, ray.exceptions.GetTimeoutError,
                ray.exceptions.RayActorError) as exc:
            raise self._failure(member, f"{what} was lost with its Ray actor on "
                                f"{self._node_text(self._home[member])} "
                                f"({type(exc).__name__})") from None

    def _call(self, member: int, method: str, *args: object) -> object:
        """Run one call on ``member``'s actor, re-creating the actor if it is lost."""
        for attempt in range(MAX_RECOVERIES + 1):
            refs = self._submit(member, method, *args)
            try:
                return self._finish(member, refs)
            except ray.exceptions.RayActorError as exc:
                self._recover(member, exc, attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _recover(self, member: int, exc: BaseException, attempt: int) -> None:
        """Replace ``member``'s lost actor by a new one holding its members' last states;
        where none can be placed in time (its node is gone and no other has a free CPU),
        move those members to the remaining actors. Fails with :class:`RayMemberFailure`,
        naming the node, when neither works or a last state went with the node."""
        k, group = self._home[member], self._group(member)
        where = self._node_text(k)
        lost_node = self._nodes[k]
        if attempt >= MAX_RECOVERIES:
            raise self._failure(member, f"its Ray actor (members {group}) on {where} was "
                                f"lost {attempt + 1} times in a row ({type(exc).__name__})")
        warnings.warn(f"Ray actor of members {group} on {where} was lost "
                      f"({type(exc).__name__}); re-creating it from their last states",
                      RuntimeWarning, stacklevel=3)
        with suppress_ray_errors():
            ray.kill(self._actors[k], no_restart=True)
        self._actors[k] = self._new_actor(k)
        try:
            self._nodes[k] = str(ray.get(self._actors[k].node_id.remote(),
                                         timeout=self._timeout))
        except ray.exceptions.GetTimeoutError:
            self._move_members(k, group, member, lost_node)
        else:
            self._reload_memory(k, member, where)
        for slot in group:
            if self._last[slot] is not None:
                self._reload(slot, where)

    def _move_members(self, k: int, group: list[int], member: int,
                      lost_node: str | None) -> None:
        """No new actor could be placed: actor ``k``'s members go to the other actors,
        but not to those on the node it was lost with (they went with it)."""
        with suppress_ray_errors():
            ray.kill(self._actors[k], no_restart=True)
        self._actors[k] = None
        others = [j for j, actor in enumerate(self._actors)
                  if actor is not None and self._nodes[j] != lost_node]
        if not others or (self.memory is not None and self.shared is None):
            self._nodes[k] = lost_node  # named as the node it was lost with
            raise self._failure(member, f"its Ray actor (members {group}) on "
                                f"{self._node_text(k)} was lost and no new one could be "
                                f"placed on the cluster within {self._timeout:g} s "
                                f"({RECOVERY_TIMEOUT_ENV}): the cluster has no free CPU "
                                "for it")
        for i, slot in enumerate(group):
            self._home[slot] = others[i % len(others)]
        warnings.warn(f"no new Ray actor could be placed within {self._timeout:g} s: members "
                      f"{group} move to the remaining actors {others}",
                      RuntimeWarning, stacklevel=4)

    def _reload_memory(self, k: int, member: int, where: str) -> None:
        """A new actor ``k`` gets the shared memory from the driver's copy."""
        if self.memory is None:
            return
        if self.shared is None:
            raise self._failure(member, f"its Ray actor on {where} was lost with the replay "
                                "memory, which only that actor held")
        try:
            ray.get(self._actors[k].load_memory.remote(self.shared.memory.state_dict()),
                    timeout=self._timeout)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
            raise self._failure(member, f"the Ray actor re-created for it after a loss on "
                                f"{where} failed too ({type(exc).__name__})") from None

    def _reload(self, slot: int, where: str) -> None:
        """Load ``slot``'s last state into its (new) actor, within the recovery timeout."""
        refs = self._submit(slot, "load", slot, self._last[slot])
        try:
            self._finish(slot, refs, timeout=self._timeout)
        except (ray.exceptions.ObjectLostError, ray.exceptions.GetTimeoutError):
            raise self._failure(slot, f"its last state was lost with its Ray actor on "
                                f"{where}") from None
        except ray.exceptions.RayActorError as exc:
            raise self._failure(slot, f"after its Ray actor on {where} was lost, the actor "
                                f"taking it over on {self._node_text(self._home[slot])} "
                                f"was lost too ({type(exc).__name__})") from None

    def _failure(self, member: int, what: str) -> RayMemberFailure:
        """The run cannot go on (and no member state is fetched from here on)."""
        self._broken = True
        return RayMemberFailure(what, member)

    def _node_text(self, k: int) -> str:
        """Actor ``k``'s Ray node as a user finds it: its address, id and whether it is
        still alive (as far as the cluster knows)."""
        node = self._nodes[k] if k < len(self._nodes) else None
        if node is None:
            return "an unknown Ray node"
        try:
            known = {n.get("NodeID"): n for n in ray.nodes()}
        except Exception:  # noqa: BLE001 - only the message's detail depends on it
            known = {}
        info = known.get(node, {})
        address = info.get("NodeManagerAddress", "?")
        # alive means "not yet found dead": the cluster takes seconds to notice a loss
        state = "" if not info or info.get("Alive") else ", dead"
        return f"Ray node {address} (id {node[:12]}{state})"

    def actor_nodes(self) -> list[str]:
        """The Ray node of each actor (actor ``k`` holds members ``k, k + actors, ...``)."""
        return list(ray.get([actor.node_id.remote() for actor in self._live_actors()]))

    # ------------------------------------------------------------------ protocol
    def __len__(self) -> int:
        return self.size

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        return next(iter(self.train_members([TrainJob(member, steps, seed)])))[1]

    def evaluate(self, member: int, *, seed: int) -> float:
        return self.evaluate_members([EvalJob(member, seed)])[0]

    def train_members(
        self, jobs: Sequence[TrainJob], *, stop: Callable[[], bool] | None = None
    ) -> Iterator[tuple[int, TrainReport]]:
        """Start jobs strictly in order, each as soon as its member's actor is free, and
        yield them in order: once ``stop()`` holds nothing more starts, so the members
        trained are always a prefix of ``jobs``."""
        pending = list(jobs)
        running: dict[int, tuple[TrainJob, list[ray.ObjectRef[object]], float]] = {}  # by actor
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
                k = self._home[job.member]
                if k in running:
                    break
                refs = self._submit(job.member, "train", job.member, job.steps, job.seed)
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

    def _collect(self, running: dict[int, tuple[TrainJob, list[ray.ObjectRef[object]], float]],
                 done: dict[int, TrainReport]) -> None:
        """Wait for one running train call to end; a lost actor's call runs again."""
        by_ref = {refs[-2]: k for k, (_, refs, _) in running.items()}
        ready, _ = ray.wait(list(by_ref), num_returns=1)
        k = by_ref[ready[0]]
        job, refs, _started = running.pop(k)
        try:
            report = cast(TrainReport, self._finish(job.member, refs))
        except ray.exceptions.RayActorError as exc:
            self._recover(job.member, exc, 0)
            report = cast(TrainReport, self._call(job.member, "train", job.member, job.steps,
                                                  job.seed))
        done[job.member] = report

    def end_training_phase(self) -> None:
        if self.shared is None:
            return
        phase, self._phase = self._phase, []
        merging = [actor.end_phase.remote(*phase) for actor in self._live_actors()]
        self.shared.end_phase()
        for actor, merged in zip(self._live_actors(), merging, strict=True):
            try:
                ray.get(merged, timeout=self._timeout)
            except ray.exceptions.RayActorError:
                pass  # re-created from the driver's (merged) copy at its next call
            except ray.exceptions.RayError:  # a delta went with a lost node: the driver has it
                ray.get(actor.load_memory.remote(self.shared.memory.state_dict()),
                        timeout=self._timeout)

    def evaluate_members(self, jobs: Sequence[EvalJob]) -> list[float]:
        started = {job.member: (self._actor(job.member),
                                self._submit(job.member, "evaluate", job.member, job.seed))
                   for job in jobs}
        fitnesses = []
        for job in jobs:
            actor, refs = started[job.member]
            try:
                fitnesses.append(float(cast(float, self._finish(job.member, refs))))
            except ray.exceptions.RayActorError as exc:
                if self._actor(job.member) is actor:  # not yet re-created for a sibling
                    self._recover(job.member, exc, 0)
                fitnesses.append(float(cast(float, self._call(job.member, "evaluate",
                                                              job.member, job.seed))))
        return fitnesses

    def get_state(self, member: int) -> dict[str, object]:
        state: dict[str, object] = self._fetch(self._last[member], member, "its last state")
        return dict(state)

    def set_state(self, member: int, state: Mapping[str, object]) -> None:
        self._call(member, "load", member, ray.put(dict(state)))

    def copy_members(self, sources: Mapping[int, int]) -> None:
        """Slot ``dst`` becomes a copy of slot ``sources[dst]`` (index set to ``dst``); the
        state goes from actor to actor through the object store, never through here."""
        last = {dst: self._last[src] for dst, src in sources.items()}  # read before writes
        for dst, ref in last.items():
            self._call(dst, "load", dst, ref, dst)

    def apply_mutation(self, operator: MutationOperator, *, pre_training: bool = False,
                       members: Sequence[int] | None = None) -> None:
        slots = list(range(self.size)) if members is None else sorted(set(members))
        elite_kept = not (getattr(operator, "mutate_elite", True) or pre_training)
        current = operator
        for slot in slots:
            exempt = members is None and slot == 0 and elite_kept
            current = cast(MutationOperator,
                           self._call(slot, "mutate", slot, current, pre_training, exempt))
        if current is not operator:  # carry the operator's random state on in this process
            operator.__dict__.update(current.__dict__)

    def set_hyperparameters(self, member: int, values: Mapping[str, object]) -> None:
        self._call(member, "set_hyperparameters", member, dict(values))

    def steps(self, member: int) -> int:
        return int(self._info[member]["steps"])

    def hyperparameters(self, member: int) -> dict[str, object]:
        return dict(self._info[member]["hyperparameters"])

    def memory_state(self) -> Mapping[str, object] | None:
        if self.shared is not None:
            return self.shared.state_dict()
        if self.memory is None:
            return None
        return dict(self._fetch(self._actors[0].memory_state.remote(), 0, "its replay memory"))

    def agents_here(self) -> list[Agent]:
        if self._closed:  # ray.get would quietly start a new, empty Ray instance here
            raise RuntimeError("the Ray backend is closed: its members' states went with "
                               "its Ray session (take them before close())")
        try:
            if self._broken:  # some went with a lost node: fetching the rest would not help
                raise RayMemberFailure("some went with a lost Ray node")
            states = [self._fetch(ref, m, "its last state") for m, ref in enumerate(self._last)]
        except (ray.exceptions.RayError, RayMemberFailure) as exc:
            # a failed run: keep its own error in front
            warnings.warn(f"the members' last states could not be fetched from Ray "
                          f"({exc}); the trainer keeps its members as they were before "
                          "this train() call (the last checkpoint has them)",
                          RuntimeWarning, stacklevel=2)
            return list(self._initial)
        return [self.agent_class.from_state(s, device=self.device) for s in states]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.shared is None and self.memory is not None and self._live_actors():
            # one member: its memory lived in the actor; the trainer keeps it for train()
            with suppress_ray_errors():
                self.memory.load_state_dict(fetch(self._actors[0].memory_state.remote(),
                                                   timeout=self._timeout))
        for actor in self._live_actors():
            with suppress_ray_errors():
                ray.kill(actor, no_restart=True)
        self._actors = []
        if self._started_ray:
            ray.shutdown()


#: Return values of each actor method: [own results..., info, state].
_RETURNS = {"load": 2, "set_hyperparameters": 2, "evaluate": 3, "mutate": 3, "train": 4}


def _ray_backend(setup: PopulationSetup, settings: BackendSettings) -> RayPopulation:
    return RayPopulation(setup, settings)


register_backend("ray", _ray_backend)

