"""Resuming a LocalTrainer from a checkpoint folder or an agent file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agilerl.checkpoint import CheckpointError, find_checkpoint

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.training.trainer import LocalTrainer


def load_resume(trainer: LocalTrainer, path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Load ``path`` into ``trainer``; return the loop state to continue from, if any.

    * A checkpoint folder (or a folder holding checkpoint folders: the latest complete one)
      restores every member, the replay memory, the run seed and the loop state, so the
      run continues exactly where it stopped.
    * A single agent file (``save_checkpoint`` / an elite) is loaded into every slot
      (slot indices kept), as the reference library does; training starts a new loop.
    """
    target = Path(path)
    if target.is_file():
        _load_agent_file(trainer, target)
        return None
    checkpoint = find_checkpoint(target)
    state = checkpoint.trainer_state()
    from agilerl.training.errors import algo_name

    algo = algo_name(trainer.algorithm_spec)
    if state.get("algorithm") != algo:
        raise CheckpointError(
            f"checkpoint {checkpoint.path} was written by a {state.get('algorithm')} run; "
            f"this manifest trains {algo}"
        )
    _check_selection_state(trainer, checkpoint.path,
                           (state.get("evolution") or {}).get("selection"))
    if checkpoint.pop_size != len(trainer.population):
        raise CheckpointError(
            f"checkpoint {checkpoint.path} holds {checkpoint.pop_size} members; this "
            f"manifest's training.pop_size is {len(trainer.population)}"
        )
    template = trainer.population[0]
    trainer.population = [
        type(template).from_state(checkpoint.member_state(i), device=trainer.device)
        for i in range(checkpoint.pop_size)
    ]
    if trainer.memory is not None:
        buffer = checkpoint.replay_buffer()
        if buffer is not None:
            trainer.memory.load_state_dict(buffer)
    trainer.seed = int(state["seed"])
    state["checkpoint"] = checkpoint.path
    return state


def _check_selection_state(trainer: LocalTrainer, path: Path, saved: Any) -> None:
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
            copy.deepcopy(operator).set_state(saved)
        except (KeyError, TypeError, ValueError) as exc:
            problem = str(exc)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path} does not fit this manifest's "
                              f"selection_strategy: {problem}")


def _load_agent_file(trainer: LocalTrainer, path: Path) -> None:
    import torch

    try:
        agent_state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise CheckpointError(f"cannot read agent file {path}: {exc}") from exc
    if not isinstance(agent_state, dict) or "algo" not in agent_state:
        raise CheckpointError(f"{path} is not an agilerl agent file or checkpoint folder")
    template = trainer.population[0]
    population = []
    for slot in range(len(trainer.population)):
        member = dict(agent_state)
        member["index"] = slot
        population.append(type(template).from_state(member, device=trainer.device))
    trainer.population = population
