"""Curves of ``bench/learning.py``: per-seed evaluation curves, their median and spread
across seeds, and the PNG that draws them.

A *curve* is one run's list of ``[steps, best, mean]`` per generation: the env steps per
member at that generation's evaluation, and the best and mean evaluation fitness of its
members. Across seeds the curves are read as step functions (a run's value at ``s`` is its
last evaluation at or before ``s``) on the union of their evaluation points, so runs whose
generations end at different step counts still line up. A run that stopped at the target
keeps its last value to the end of the axis (it is done, not missing); any other run has
no value past its last evaluation, and a step where no run has a value is left out.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import NamedTuple

Curve = list[list[float]]  # [[steps per member, best, mean], ...] in order of steps


class Spread(NamedTuple):
    """Median, min and max of the runs' best evaluation at each step of ``steps``."""

    steps: list[float]
    median: list[float]
    low: list[float]
    high: list[float]


def value_at(curve: Curve, steps: float, held: bool) -> float | None:
    """The best evaluation of ``curve`` at ``steps`` (its last evaluation at or before it);
    None before its first evaluation, and after its last unless ``held``."""
    value = None
    for point in curve:
        if point[0] > steps:
            return value
        value = point[1]
    if curve and steps > curve[-1][0] and not held:
        return None
    return value


def spread(curves: list[Curve], held: list[bool]) -> Spread:
    """The median and min-max of ``curves`` (best evaluation) at every evaluation point of
    any of them; ``held[i]``: curve ``i`` stopped at the target and keeps its last value."""
    grid = sorted({point[0] for curve in curves for point in curve})
    out = Spread([], [], [], [])
    for steps in grid:
        values = [v for curve, hold in zip(curves, held, strict=True)
                  if (v := value_at(curve, steps, hold)) is not None and math.isfinite(v)]
        if not values:
            continue
        out.steps.append(steps)
        out.median.append(statistics.median(values))
        out.low.append(min(values))
        out.high.append(max(values))
    return out


def first_reaching(curve: Curve, target: float | None) -> float | None:
    """Steps per member at the first generation whose best evaluation reaches ``target``."""
    if target is None:
        return None
    return next((point[0] for point in curve if point[1] >= target), None)


def draw(path: Path, title: str, target: float | None, budget: int,
         series: dict[str, tuple[list[Curve], list[bool]]]) -> None:
    """Write a PNG of each series' median best evaluation against env steps per member,
    with its min-max across runs shaded; ``series`` maps a label to (curves, held)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SystemExit("bench/learning.py draws its plots with matplotlib, which is not "
                         "installed: pip install matplotlib (or run with --no-plot)") from exc
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    last = max((point[0] for curves, _ in series.values() for curve in curves
                for point in curve), default=budget)
    for (label, (curves, held)), colour in zip(series.items(), ("tab:blue", "tab:orange"),
                                               strict=False):
        band = spread(curves, held)
        if not band.steps:
            continue
        # the last values hold to the end of the axis (the budget, or a stopped run's end)
        steps = [*band.steps, max(budget, last)]
        ax.step(steps, [*band.median, band.median[-1]], where="post", color=colour,
                label=f"{label}: median of {len(curves)}")
        ax.fill_between(steps, [*band.low, band.low[-1]], [*band.high, band.high[-1]],
                        step="post", color=colour, alpha=0.2, label=f"{label}: min-max")
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.1f}")
    ax.set_xlim(0, max(budget, last) * 1.02)  # a last generation may end past the budget
    ax.set_xlabel("env steps per member")
    ax.set_ylabel("best evaluation of the generation")
    if any(h for _, held in series.values() for h in held):
        title += "\n(a run that stopped at the target is held at its last evaluation)"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
