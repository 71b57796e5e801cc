"""PNG charts of a run folder, for people without a browser (``agilerl plot``).

* ``learning.png``: the best, the mean and each member's evaluation against the
  population's env steps (``metrics.csv``);
* ``hyperparameters.png``: each numeric hyperparameter of each member over generations
  (``events.jsonl``'s generation events);
* ``lineage.png``: members as nodes per generation (colour: fitness), an edge from the
  member each one was selected from, the mutation it then got as a label, the elite ringed.

The last two need ``events.jsonl`` (runs written before it existed get the first chart
only). matplotlib is the ``plot`` extra; it is imported only here.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from agilerl.logging.run_history import RunHistory, short_mutation

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PLOT_EXTRA", "MissingPlotDependency", "draw_run"]

PLOT_EXTRA = "plot"
#: Above this many members or generations the lineage chart drops its mutation labels.
LABEL_LIMIT = 40


class MissingPlotDependency(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> ModuleType:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingPlotDependency(
            f"agilerl plot draws with matplotlib, which is not installed: "
            f'pip install "agilerl[{PLOT_EXTRA}]"') from exc
    return plt


def draw_run(history: RunHistory, out: Path) -> list[Path]:
    """Write the charts of ``history`` into ``out`` (created); return the files written."""
    plt = _pyplot()
    out.mkdir(parents=True, exist_ok=True)
    written = [_learning(plt, history, out / "learning.png")]
    if history.generations:
        written.append(_hyperparameters(plt, history, out / "hyperparameters.png"))
        written.append(_lineage(plt, history, out / "lineage.png"))
    return written


def _save(plt: ModuleType, fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _learning(plt: ModuleType, history: RunHistory, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for member, values in sorted(history.member_fitness.items()):
        ax.plot(history.steps, values, color="grey", alpha=0.35, linewidth=0.8,
                label="members" if member == min(history.member_fitness) else None)
    ax.plot(history.steps, history.mean, color="tab:orange", linewidth=1.5, label="mean")
    ax.plot(history.steps, history.best, color="tab:blue", linewidth=2.0, label="best")
    ax.set_xlabel("env steps (population)")
    ax.set_ylabel("evaluation fitness")
    ax.set_title(f"{history.folder.name}: learning curves")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    return _save(plt, fig, path)


def _hyperparameters(plt: ModuleType, history: RunHistory, path: Path) -> Path:
    series = history.hyperparameter_series()
    names = sorted(series) or ["(none)"]
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    colours = plt.get_cmap("tab20")
    for i, name in enumerate(names):
        ax = axes[i // cols][i % cols]
        for member, points in sorted(series.get(name, {}).items()):
            ax.step([g for g, _ in points], [v for _, v in points], where="post",
                    color=colours(member % 20), linewidth=1.0, label=f"member {member}")
        values = [v for by_member in series.get(name, {}).values() for _, v in by_member]
        if values and min(values) > 0 and max(values) / min(values) > 20:
            ax.set_yscale("log")  # learning rates span decades
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("generation")
        ax.grid(alpha=0.3)
    for j in range(len(names), rows * cols):
        axes[j // cols][j % cols].axis("off")
    members = len({m for by_member in series.values() for m in by_member})
    if 0 < members <= 12:
        axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle(f"{history.folder.name}: hyperparameters by member")
    return _save(plt, fig, path)


def _lineage(plt: ModuleType, history: RunHistory, path: Path) -> Path:
    generations = sorted(history.generations)
    size = max((len(history.generations[g].get("members", [])) for g in generations),
               default=1)
    fig, ax = plt.subplots(figsize=(min(2 + 1.1 * len(generations), 30),
                                    min(1.5 + 0.55 * size, 30)))
    labels = len(generations) <= LABEL_LIMIT and size <= LABEL_LIMIT
    for generation in generations:
        selection = history.selections.get(generation)
        if selection is None or generation + 1 not in history.generations:
            continue
        for new in selection.get("members", []):
            ax.plot([generation, generation + 1], [new["parent"], new["member"]],
                    color="tab:red" if new.get("elite") else "grey",
                    linewidth=1.6 if new.get("elite") else 0.8, alpha=0.7, zorder=1)
            text = short_mutation(history.mutations.get((generation, new["member"])))
            if labels and text:
                ax.annotate(text, (generation + 1, new["member"]), xytext=(-4, 6),
                            textcoords="offset points", fontsize=6, ha="right", zorder=3)
    for (generation, member), event in history.mutations.items():
        text = short_mutation(event)
        if labels and generation == 0 and text:  # the pre-training mutation
            ax.annotate(text, (1, member), xytext=(-4, 6), textcoords="offset points",
                        fontsize=6, ha="right", zorder=3)
    xs, ys, fitness = _nodes(history, generations)
    finite = [f for f in fitness if math.isfinite(f)]
    points = ax.scatter(xs, ys, c=[f if math.isfinite(f) else math.nan for f in fitness],
                        cmap="viridis", s=60, edgecolors="black", linewidths=0.5, zorder=2,
                        plotnonfinite=True, vmin=min(finite, default=0),
                        vmax=max(finite, default=1))
    fig.colorbar(points, ax=ax, label="fitness")
    ax.set_xlabel("generation (edges: selected from; labels: mutation applied after)")
    ax.set_ylabel("member")
    ax.set_yticks(range(size))
    ax.set_title(f"{history.folder.name}: lineage (red: elite)")
    ax.invert_yaxis()
    return _save(plt, fig, path)


def _nodes(history: RunHistory, generations: list[int]
           ) -> tuple[list[int], list[int], list[float]]:
    xs: list[int] = []
    ys: list[int] = []
    fitness: list[float] = []
    for generation in generations:
        for member in history.generations[generation].get("members", []):
            xs.append(generation)
            ys.append(int(member["member"]))
            value = member.get("fitness")
            fitness.append(float(value) if isinstance(value, int | float) else math.nan)
    return xs, ys, fitness
