"""The summary printed when a training run ends."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from agilerl.logging.progress import format_duration

if TYPE_CHECKING:
    from typing import NotRequired, Unpack

__all__ = ["render_summary", "summary_rows"]


class SummaryFields(TypedDict):
    """The keyword arguments of :func:`summary_rows`, as :func:`render_summary` takes them."""

    best_fitness: float | None
    fitnesses: NotRequired[Sequence[float] | None]
    elite_path: NotRequired[str | os.PathLike[str] | None]
    checkpoint_path: NotRequired[str | os.PathLike[str] | None]
    total_steps: NotRequired[int | None]
    wall_time_s: NotRequired[float | None]
    stopped_early: NotRequired[bool]
    interrupted: NotRequired[bool]
    extra: NotRequired[Sequence[tuple[str, str]]]
    steps_this_run: NotRequired[int | None]
    unit: NotRequired[str]


def summary_rows(
    *,
    best_fitness: float | None,
    fitnesses: Sequence[float] | None = None,
    elite_path: str | os.PathLike[str] | None = None,
    checkpoint_path: str | os.PathLike[str] | None = None,
    total_steps: int | None = None,
    wall_time_s: float | None = None,
    stopped_early: bool = False,
    interrupted: bool = False,
    extra: Sequence[tuple[str, str]] = (),
    steps_this_run: int | None = None,
    unit: str = "steps",
) -> list[tuple[str, str]]:
    """The summary as ``(label, value)`` pairs, in display order.

    ``total_steps`` is the population's total so far; the rate is over ``steps_this_run``
    (default: all of them), so a resumed run's earlier steps do not count as done in no
    time. ``unit``: what a step is, ``steps`` (env steps) or ``updates`` (offline training,
    one gradient update each).
    """
    rows: list[tuple[str, str]] = []
    if interrupted:
        rows.append(
            ("status", "interrupted (checkpoint written)" if checkpoint_path else "interrupted")
        )
    elif stopped_early:
        rows.append(("status", "target score reached"))
    else:
        rows.append(("status", "finished"))
    best = "-" if best_fitness is None or not math.isfinite(best_fitness) else f"{best_fitness:.2f}"
    rows.append(("best fitness", best))
    if fitnesses:
        rows.append(("final fitnesses", ", ".join(f"{f:.2f}" for f in fitnesses)))
    if total_steps is not None:
        label = "env steps" if unit == "steps" else unit
        rows.append((label, f"{int(total_steps):,}"))
    done = total_steps if steps_this_run is None else steps_this_run
    if wall_time_s is not None:
        rate = ""
        if done and wall_time_s > 0:
            rate = f" ({done / wall_time_s:,.0f} {unit}/s)"
        rows.append(("wall time", f"{format_duration(wall_time_s)}{rate}"))
    rows.append(("elite saved to", str(Path(elite_path).resolve()) if elite_path else "not saved"))
    rows.append(
        ("checkpoints in", str(Path(checkpoint_path).resolve()) if checkpoint_path else "none")
    )
    rows.extend(extra)
    return rows


def render_summary(
    console: Console | None = None,
    *,
    verbose: bool | int = True,
    title: str = "Training summary",
    **fields: Unpack[SummaryFields],
) -> None:
    """Print the end-of-run summary: a panel on a terminal, ``label: value`` lines otherwise.

    ``fields`` are :func:`summary_rows`' arguments.
    """
    if not verbose:
        return
    console = console or Console()
    rows = summary_rows(**fields)
    if console.is_terminal:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for label, value in rows:
            grid.add_row(label, value)
        console.print(Panel(grid, title=title, expand=False))
        return
    console.print(f"{title}:", markup=False, highlight=False)
    for label, value in rows:
        console.print(f"  {label}: {value}", markup=False, highlight=False, soft_wrap=True)
