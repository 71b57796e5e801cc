"""A run folder read back: learning curves from ``metrics.csv``, the population's history
from ``events.jsonl`` (see ``docs/run-events.md``). Plain data, no plotting library: what
``agilerl plot`` draws, and what anything else that shows a run may read."""

from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from agilerl.core.value_types import JsonValue
from agilerl.logging.csv_logger import METRICS_CSV_NAME
from agilerl.logging.events import EVENTS_FILE, read_events

__all__ = [
    "GenerationEvent",
    "MutationEvent",
    "RunFolderError",
    "RunHistory",
    "SelectionEvent",
    "load_run",
    "short_mutation",
]

_MEMBER_FITNESS = re.compile(r"^eval/agent_(\d+)/fitness$")


class GenerationMember(TypedDict):
    """A member in a ``generation`` event."""

    member: int
    fitness: float | None
    steps: int
    hyperparameters: dict[str, JsonValue]


class GenerationEvent(TypedDict):
    """A ``generation`` line of ``events.jsonl`` (``schemas/run_events.schema.json``)."""

    v: int
    event: str
    time: str
    generation: int
    env_steps: int
    members: list[GenerationMember]


class SelectionMember(TypedDict):
    """A slot of the new population in a ``selection`` event."""

    member: int
    parent: int
    elite: bool


class SelectionEvent(TypedDict):
    """A ``selection`` line of ``events.jsonl``."""

    v: int
    event: str
    time: str
    generation: int
    members: list[SelectionMember]


class MutationChange(TypedDict):
    """One value a mutation changed."""

    name: str
    old: JsonValue
    new: JsonValue


class MutationEvent(TypedDict, total=False):
    """A ``mutation`` line of ``events.jsonl`` (``description`` is optional)."""

    v: int
    event: str
    time: str
    generation: int
    member: int
    kind: str
    changes: list[MutationChange]
    description: str


class RunFolderError(ValueError):
    """A folder that is not a readable run folder (the message names the file)."""


@dataclass
class RunHistory:
    """What a run folder says about its run."""

    folder: Path
    steps: list[float] = field(default_factory=list)
    """Population env steps of each generation in ``metrics.csv`` (its x-axis)."""
    best: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    member_fitness: dict[int, list[float]] = field(default_factory=dict)
    """Member -> its evaluation at each of ``steps`` (NaN where the file has none)."""
    generations: dict[int, GenerationEvent] = field(default_factory=dict)
    """Generation -> its ``generation`` event (events.jsonl; empty without one)."""
    selections: dict[int, SelectionEvent] = field(default_factory=dict)
    """Generation -> the ``selection`` event after its evaluation."""
    mutations: dict[tuple[int, int], MutationEvent] = field(default_factory=dict)
    """(generation, member) -> its ``mutation`` event (generation 0: before training)."""
    has_events: bool = False

    def hyperparameter_series(self) -> dict[str, dict[int, list[tuple[int, float]]]]:
        """Numeric hyperparameter -> member -> (generation, value) from the generation
        events (booleans left out: they do not evolve as numbers)."""
        series: dict[str, dict[int, list[tuple[int, float]]]] = {}
        for generation, event in sorted(self.generations.items()):
            for member in event.get("members", []):
                for name, value in (member.get("hyperparameters") or {}).items():
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        series.setdefault(name, {}).setdefault(int(member["member"]), []) \
                            .append((generation, float(value)))
        return series


def load_run(folder: str | os.PathLike[str]) -> RunHistory:
    """Read the run folder ``folder``; :class:`RunFolderError` when it is missing or has no
    readable ``metrics.csv``."""
    path = Path(folder)
    if not path.is_dir():
        raise RunFolderError(f"run folder {path} not found")
    metrics = path / METRICS_CSV_NAME
    if not metrics.is_file():
        raise RunFolderError(f"{path} is not a run folder: it has no {METRICS_CSV_NAME} "
                             "(a run writes it after its first generation)")
    history = RunHistory(folder=path)
    _read_metrics(metrics, history)
    _read_events(path, history)
    return history


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def _read_metrics(path: Path, history: RunHistory) -> None:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            fields = list(reader.fieldnames or [])
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RunFolderError(f"{path} cannot be read: {exc}") from None
    if "train/global_step" not in fields:
        raise RunFolderError(f"{path} has no train/global_step column: not a metrics.csv "
                             "written by agilerl")
    members = {int(m.group(1)): name for name in fields if (m := _MEMBER_FITNESS.match(name))}
    for row in rows:
        history.steps.append(_number(row.get("train/global_step")))
        history.best.append(_number(row.get("eval/best_fitness")))
        history.mean.append(_number(row.get("eval/mean_fitness")))
        for member, name in sorted(members.items()):
            history.member_fitness.setdefault(member, []).append(_number(row.get(name)))


def _read_events(folder: Path, history: RunHistory) -> None:
    events = read_events(folder / EVENTS_FILE)
    history.has_events = bool(events)
    for event in events:
        kind, generation = event.get("event"), event.get("generation")
        if not isinstance(generation, int):
            continue
        # A later line for the same generation wins (the log of a run resumed elsewhere).
        # The lines are the run's own, written to schemas/run_events.schema.json.
        if kind == "generation":
            history.generations[generation] = cast(GenerationEvent, event)
        elif kind == "selection":
            history.selections[generation] = cast(SelectionEvent, event)
        elif kind == "mutation" and isinstance(event.get("member"), int):
            mutation = cast(MutationEvent, event)
            history.mutations[(generation, mutation["member"])] = mutation


def short_mutation(event: MutationEvent | None) -> str:
    """A few characters naming a mutation, for a chart label ("" for none)."""
    if not event:
        return ""
    kind = event.get("kind")
    changes = event.get("changes") or []
    if kind == "rl_hp" and changes:
        change = changes[0]
        old, new = change.get("old"), change.get("new")
        arrow = "+" if isinstance(old, int | float) and isinstance(new, int | float) \
            and new > old else "-"
        return f"{change.get('name')}{arrow}"
    if kind == "activation" and changes:
        return f"act {changes[0].get('new')}"
    sign = "-" if str(event.get("description", "")).startswith("remove") else "+"
    if kind in ("architecture", "new_layer"):
        return sign + ("units" if kind == "architecture" else "layer")
    return "weights" if kind == "parameters" else ""
