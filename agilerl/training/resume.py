"""Resuming a LocalTrainer from a checkpoint folder or an agent file."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from agilerl.checkpoint import (
    Checkpoint,
    CheckpointError,
    ResumeMismatchError,
    find_checkpoint,
)
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.core.algorithm_spec import algo_name
from agilerl.population.shared_memory import PENDING_KEY
from agilerl.training.loop import EvolutionState, LoopState, LoopStateDict
from agilerl.training.paradigms import paradigm

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.checkpoint.rng import RngState
    from agilerl.components.offline_dataset import DatasetState
    from agilerl.components.replay_buffer import ReplayState
    from agilerl.core.member_training import Agent
    from agilerl.core.value_types import JsonObject
    from agilerl.hpo.multi_frequency import MFState
    from agilerl.hpo.tournament import TournamentState
    from agilerl.population.shared_memory import ExperienceDelta, ExperienceDeltaState
    from agilerl.training.trainer import LocalTrainer


class TrainerState(TypedDict, total=False):
    """``trainer.pt`` of a checkpoint (what ``TrainSession`` writes), with ``checkpoint``
    and ``manifest`` added when a run resumes from it; after a ``train()`` call the trainer
    keeps ``loop`` and ``evolution`` only, to continue from."""

    seed: int
    algorithm: str
    paradigm: str
    loop: LoopStateDict
    evolution: EvolutionState
    rng: RngState
    settings: dict[str, object]
    logger_step: int
    reason: str
    checkpoint: Path
    manifest: JsonObject | None


class ResumeWithoutReplayBufferWarning(UserWarning):
    """A resumed off-policy run starts with an empty replay buffer because its checkpoint
    was written without one: it continues, but not exactly (the CLI prints the warning)."""


@dataclass(frozen=True)
class Resumed:
    """What a checkpoint or agent file gives a trainer (which keeps it)."""

    population: list[Agent]
    """The members, restored (an agent file: one in every slot)."""
    state: TrainerState | None = None
    """The loop state to continue from (None: an agent file; training starts a new loop)."""
    seed: int | None = None
    """The run seed the checkpoint was written with (None: the trainer's own stands)."""
    experience_pending: list[ExperienceDelta | ExperienceDeltaState] | None = None
    """The memory deltas of a training phase the checkpoint interrupted (None: the
    checkpoint's replay memory was not restored)."""


def load_resume(trainer: LocalTrainer, path: str | os.PathLike[str]) -> Resumed:
    """Load ``path`` for ``trainer``: its members and run seed, returned, and its replay
    memory, loaded into ``trainer.memory``.

    * A checkpoint folder (or a folder holding checkpoint folders: the newest, see
      :func:`~agilerl.checkpoint.find_checkpoint`) written for the same environment,
      algorithm, network and population size (:class:`ResumeMismatchError` lists what
      differs otherwise) restores every member, the replay memory, the run seed and the loop state, so the
      run continues exactly where it stopped.
    * A single agent file (``save_checkpoint`` / an elite) is loaded into every slot
      (slot indices kept), as the reference library does; training starts a new loop.
    """
    target = Path(path)
    if target.is_file():
        return Resumed(_load_agent_file(trainer, target))
    checkpoint = find_checkpoint(target)
    state = _trainer_state(checkpoint)
    if state.get("algorithm") == algo_name(trainer.algorithm_spec):
        evolution = state.get("evolution")
        _check_selection_state(trainer, checkpoint.path,
                               evolution.get("selection") if evolution else None)
    _check_fits(trainer, checkpoint, state)
    template = trainer.population[0]
    population = []
    for i in range(checkpoint.pop_size):
        member = checkpoint.member_state(i)
        try:
            population.append(type(template).from_state(member, device=trainer.device))
        except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
            raise CheckpointError(
                f"checkpoint {checkpoint.path}: member_{i}.pt cannot be restored into a "
                f"{algo_name(trainer.algorithm_spec)} agent ({type(exc).__name__}: {exc})"
            ) from None
    pending: list[ExperienceDelta | ExperienceDeltaState] | None = None
    if trainer.memory is not None:
        buffer = checkpoint.replay_buffer()
        if buffer is None and paradigm(trainer.paradigm).replay_memory:
            warnings.warn(
                f"checkpoint {checkpoint.path} holds no replay buffer (it was written with "
                "checkpoint_replay_buffer=False): the resumed run starts with an empty replay "
                "buffer, so it is not an exact continuation and will diverge from the "
                "uninterrupted run", ResumeWithoutReplayBufferWarning, stacklevel=3)
        elif buffer is not None:
            try:
                # replay_buffer.pt holds the state of the run's memory, of this class
                if isinstance(trainer.memory, ReplayBuffer):
                    trainer.memory.load_state_dict(cast("ReplayState", buffer))
                else:
                    trainer.memory.load_state_dict(cast("DatasetState", buffer))
                pending = list(buffer.get(PENDING_KEY, []))
            except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
                raise CheckpointError(
                    f"checkpoint {checkpoint.path}: replay_buffer.pt cannot be restored "
                    f"({type(exc).__name__}: {exc})") from None
    state["checkpoint"] = checkpoint.path
    state["manifest"] = checkpoint.manifest()
    return Resumed(population, state, int(state["seed"]), pending)


def _trainer_state(checkpoint: Checkpoint) -> TrainerState:
    """``trainer.pt``, checked to hold what a resumed loop needs."""
    try:
        state = cast(TrainerState, checkpoint.trainer_state())  # what TrainSession wrote
        int(state["seed"])
        LoopState().load_state_dict(state["loop"])
        for key in ("evolution", "rng", "algorithm"):
            state[key]  # noqa: B018 - presence check
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(
            f"checkpoint {checkpoint.path}: trainer.pt is not a training state this agilerl "
            f"can continue ({type(exc).__name__}: {exc})") from None
    return state


#: Settings a run cannot change when it resumes: the members were built for them. The
#: environment's ``sync`` only chooses how sub-envs are stepped, so it may change.
_FIXED_SECTIONS = ("environment", "network")
_FREE_KEYS = frozenset({"environment.sync"})


def _check_fits(trainer: LocalTrainer, checkpoint: Checkpoint, state: TrainerState) -> None:
    """Refuse a checkpoint written for another algorithm, environment, network or
    population size, listing every difference."""
    algo = algo_name(trainer.algorithm_spec)
    differences = []
    if state.get("algorithm") != algo:
        differences.append(f"algorithm: the checkpoint trains {state.get('algorithm')}, "
                           f"this manifest {algo}")
    if checkpoint.pop_size != len(trainer.population):
        differences.append(f"training.pop_size: the checkpoint holds {checkpoint.pop_size} "
                           f"members, this manifest {len(trainer.population)}")
    saved = checkpoint.manifest()
    if saved is not None:
        current = trainer.manifest_dict()
        for section in _FIXED_SECTIONS:
            found = _differences(section, saved.get(section), current.get(section))
            if found and section == "network" and _same_networks(trainer, saved, current):
                found = []  # spelled differently (defaults written out), built the same
            differences += found
    if differences:
        raise ResumeMismatchError(
            f"checkpoint {checkpoint.path} does not fit this manifest: "
            + "; ".join(differences)
            + ". Resume with the manifest the checkpoint was written with (its manifest.json), "
            "or start a new run without --resume-from-checkpoint")


def _same_networks(trainer: LocalTrainer, saved: JsonObject, current: JsonObject) -> bool:
    """Whether both manifests' ``network`` sections build the same networks."""
    from agilerl.training.build import network_architectures
    from agilerl.training.paradigms import paradigm

    if paradigm(trainer.paradigm).make_population is not None or not all(
            isinstance(m.get("network"), dict | None) for m in (saved, current)):
        return False  # members built their own way (LLM): their network is compared as written
    try:
        return bool(network_architectures(trainer, saved.get("network"))
                    == network_architectures(trainer, current.get("network")))
    except Exception:  # noqa: BLE001 - a section this agilerl cannot build differs anyway
        return False


_ABSENT = object()


def _differences(path: str, saved: object, current: object) -> list[str]:
    """Where two manifest values (JSON, or ``_ABSENT``) differ, as dotted paths."""
    if path in _FREE_KEYS:
        return []
    if isinstance(saved, dict) and isinstance(current, dict):
        found = []
        for key in sorted(set(saved) | set(current), key=str):
            found += _differences(f"{path}.{key}", saved.get(key, _ABSENT),
                                  current.get(key, _ABSENT))
        return found
    if saved == current:
        return []
    return [f"{path}: the checkpoint has {_shown(saved)}, this manifest {_shown(current)}"]


def _shown(value: object) -> str:
    return "nothing" if value is _ABSENT or value is None else repr(value)


def _check_selection_state(trainer: LocalTrainer, path: Path,
                           saved: Mapping[str, object] | None) -> None:
    """The checkpoint's selection state must fit this manifest's selection operator
    (tournament vs MF-PBT, number of subpopulations)."""
    import copy

    operator = trainer.selection_strategy
    if operator is None or saved is None:
        return
    from agilerl.hpo.multi_frequency import MultiFrequencySelection

    multi_frequency = isinstance(operator, MultiFrequencySelection)
    problem = None
    if multi_frequency != ("counters" in saved):
        problem = "it was written with a different selection_strategy.strategy"
    else:
        try:
            # the checkpoint's selection state, of the operator's kind (checked above)
            probe = copy.deepcopy(operator)
            if isinstance(probe, MultiFrequencySelection):
                probe.set_state(cast("MFState", saved))
            else:
                probe.set_state(cast("TournamentState", saved))
        except (KeyError, TypeError, ValueError) as exc:
            problem = str(exc)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path} does not fit this manifest's "
                              f"selection_strategy: {problem}")


def _load_agent_file(trainer: LocalTrainer, path: Path) -> list[Agent]:
    from agilerl.checkpoint.folder import load_state_file

    agent_state = load_state_file(path, f"agent file {path}")
    if not isinstance(agent_state, dict) or "algo" not in agent_state:
        raise CheckpointError(f"{path} is not an agilerl agent file or checkpoint folder")
    algo = algo_name(trainer.algorithm_spec)
    if agent_state["algo"] != algo:
        raise ResumeMismatchError(f"agent file {path} holds a {agent_state['algo']} agent; "
                                  f"this manifest trains {algo}")
    template = trainer.population[0]
    population = []
    for slot in range(len(trainer.population)):
        member = dict(agent_state)
        member["index"] = slot
        try:
            population.append(type(template).from_state(member, device=trainer.device))
        except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
            raise CheckpointError(f"agent file {path} cannot be restored into a {algo} agent "
                                  f"({type(exc).__name__}: {exc})") from None
    return population
