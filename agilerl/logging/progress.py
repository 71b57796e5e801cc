"""Live training progress: a rich status line on a terminal, periodic plain lines otherwise.

The runtime updates a :class:`ProgressDisplay` once per generation (or more often). On a
terminal it shows a live bar with steps done / total, steps per second, generation, best and
mean fitness and the time left; when output is not a terminal (CI logs, a file) it prints
one plain line at most every ``plain_interval_s`` seconds and always the last one. The
budget is shown as the manifest writes it: ``max_steps`` per agent times the agents
(``steps 1,000/800,000 (200,000 x 4 agents, 0%)``).

Verbosity: ``0``/False prints nothing; ``1``/True (the default) also prints one line per
generation; ``2`` prints each generation's per-agent table (:func:`generation_table`)
instead of that line.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import TracebackType

from rich.console import Console, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from agilerl.logging.base import GLOBAL_STEP_KEY, as_scalar

__all__ = ["ProgressDisplay", "ProgressState", "format_duration", "generation_table"]

_RATE_WINDOW_S = 30.0


def format_duration(seconds: float | None) -> str:
    """``H:MM:SS`` (or ``-`` when unknown)."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def _fitness(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@dataclass
class ProgressState:
    """What the display shows; updated by :meth:`ProgressDisplay.update`."""

    total_steps: int
    agents: int = 1
    """Population size: ``total_steps`` is ``max_steps`` per agent times this."""
    steps: int = 0
    generation: int | None = None
    best_fitness: float | None = None
    mean_fitness: float | None = None
    steps_per_second: float | None = None
    elapsed_s: float = 0.0
    unit: str = "steps"
    """What a step is: ``steps`` (env steps) or ``updates`` (offline gradient updates)."""

    @property
    def eta_s(self) -> float | None:
        if not self.steps_per_second or self.steps_per_second <= 0:
            return None
        return max(self.total_steps - self.steps, 0) / self.steps_per_second

    @property
    def budget(self) -> str:
        """The step budget as the manifest writes it: ``200,000 steps x 4 agents``."""
        if self.agents > 1:
            return f"{self.total_steps // self.agents:,} {self.unit} x {self.agents} agents"
        return f"{self.total_steps:,} {self.unit}"

    def line(self) -> str:
        """The plain one-line form (also the text part of the live view)."""
        total = max(self.total_steps, 1)
        percent = min(100.0 * self.steps / total, 100.0)
        rate = "-" if self.steps_per_second is None else f"{self.steps_per_second:,.0f}"
        generation = "-" if self.generation is None else str(self.generation)
        per_agent = (f"{self.total_steps // self.agents:,} x {self.agents} agents, "
                     if self.agents > 1 else "")
        if self.steps <= self.total_steps:
            done = f"{self.unit} {self.steps:,}/{self.total_steps:,} ({per_agent}{percent:.0f}%)"
        else:  # members end on a whole rollout (on-policy), so the total may pass the budget
            done = f"{self.unit} {self.steps:,} (budget {self.total_steps:,} = {per_agent}done)"
        return (
            f"{done} | "
            f"{rate} {self.unit}/s | "
            f"gen {generation} | best {_fitness(self.best_fitness)} | "
            f"mean {_fitness(self.mean_fitness)} | elapsed {format_duration(self.elapsed_s)} | "
            f"ETA {format_duration(self.eta_s)}"
        )


class ProgressDisplay:
    """Progress of one training run; use as a context manager or call ``close()``.

    Args:
        total_steps: the whole step budget (``max_steps`` x ``agents``).
        agents: the population size, to show the budget per agent.
        verbose: 0 (or False) prints nothing at all; 1 (or True) one line per generation;
            2 the per-agent table per generation.
        console: where to draw (default: a console on stdout). Whether it is a terminal
            decides between the live view and plain lines.
        plain_interval_s: smallest gap between two plain lines.
        title: label in front of the live bar.
        clock: time source (seconds), replaceable in tests.
        unit: what a step is: ``steps`` (env steps) or ``updates`` (offline training).
    """

    def __init__(
        self,
        total_steps: int,
        *,
        agents: int = 1,
        verbose: bool | int = True,
        console: Console | None = None,
        plain_interval_s: float = 10.0,
        title: str = "Training",
        clock: Callable[[], float] = time.monotonic,
        unit: str = "steps",
    ):
        self.state = ProgressState(total_steps=int(total_steps), agents=max(int(agents), 1),
                                   unit=unit)
        self.verbose = int(verbose)
        self.console = console or Console()
        self.plain_interval_s = plain_interval_s
        self.title = title
        self._clock = clock
        self._start = clock()
        # (time, steps) of recent updates; the rate is measured from the first update on,
        # so a resumed run's earlier steps do not count as done in no time.
        self._samples: deque[tuple[float, int]] = deque()
        self._last_plain: float | None = None
        self._last_printed: ProgressState | None = None
        self._live: Live | None = None
        self._closed = False

    @property
    def live(self) -> bool:
        """True when drawing a live view (verbose, on a terminal)."""
        return bool(self.verbose) and self.console.is_terminal

    def start(self) -> ProgressDisplay:
        if self.live and self._live is None and not self._closed:
            self._live = Live(
                get_renderable=self._render,
                console=self.console,
                refresh_per_second=2,
                transient=False,
            )
            self._live.start()
        return self

    def update(
        self,
        steps: int,
        *,
        generation: int | None = None,
        best_fitness: float | None = None,
        mean_fitness: float | None = None,
        steps_per_second: float | None = None,
    ) -> None:
        """Record progress; ``steps_per_second`` defaults to the rate over the last ~30 s."""
        now = self._clock()
        state = self.state
        state.steps = int(steps)
        state.elapsed_s = now - self._start
        if generation is not None:
            state.generation = generation
        if best_fitness is not None:
            state.best_fitness = float(best_fitness)
        if mean_fitness is not None:
            state.mean_fitness = float(mean_fitness)
        self._samples.append((now, state.steps))
        while len(self._samples) > 2 and now - self._samples[1][0] >= _RATE_WINDOW_S:
            self._samples.popleft()
        state.steps_per_second = (
            float(steps_per_second) if steps_per_second is not None else self._window_rate()
        )
        if not self.verbose:
            return
        if self.live:
            self.start()  # the live view redraws itself twice a second; updates stay cheap
        elif self._plain_due(now):
            self._print_plain(now)

    def _window_rate(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, s0), (t1, s1) = self._samples[0], self._samples[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None

    def _plain_due(self, now: float) -> bool:
        if self._last_plain is None or self.state.steps >= self.state.total_steps:
            return True
        return now - self._last_plain >= self.plain_interval_s

    def _print_plain(self, now: float) -> None:
        self.console.print(self.state.line(), markup=False, highlight=False, soft_wrap=True)
        self._last_plain = now
        self._last_printed = replace(self.state)

    def _render(self) -> RenderableType:
        # Elapsed time keeps moving between updates (generations can take minutes).
        state = replace(self.state, elapsed_s=self._clock() - self._start)
        grid = Table.grid(padding=(0, 1))
        grid.add_row(
            Text(self.title, style="bold"),
            ProgressBar(total=max(state.total_steps, 1), completed=state.steps, width=30),
            Text(state.line()),
        )
        return grid

    def print(self, renderable: RenderableType) -> None:
        """Print above the live view (or plainly); nothing when not verbose."""
        if self.verbose:
            self.console.print(renderable)

    def show_generation(self, metrics: Mapping[str, object]) -> None:
        """A generation ended: at verbosity 1 print its progress line (unless that very line
        was just printed), at 2 the per-agent table of :func:`generation_table`."""
        if self.verbose >= 2:
            self.console.print(generation_table(metrics))
        elif self.verbose and (self.live or self._last_printed != self.state):
            self._print_plain(self._clock())

    def close(self) -> None:
        """Stop the live view, leaving its last frame; prints the final plain line if due."""
        if self._closed:
            return
        self._closed = True
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None
        elif self.verbose and not self.console.is_terminal and self._last_plain is not None:
            last = self._samples[-1][0] if self._samples else self._start
            if self._last_plain < last:  # the latest update has not been printed yet
                self._print_plain(last)

    def __enter__(self) -> ProgressDisplay:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_AGENT_KEY = re.compile(r"^(train|eval)/agent_(\d+)/(.+)$")
_FIRST_ROWS = ("eval/fitness", "train/score")


def generation_table(metrics: Mapping[str, object]) -> Table:
    """Per-agent table of one generation's metrics (``{train,eval}/agent_{i}/{name}``).

    Title: the global steps. Columns: one per agent, plus a mean column when there is more
    than one. Rows: ``eval/fitness``, ``train/score``, then the other per-agent metrics in
    the order they first appear. Non-numeric values are shown as text.
    """
    rows: dict[str, dict[int, object]] = {name: {} for name in _FIRST_ROWS}
    agents: set[int] = set()
    for key, value in metrics.items():
        match = _AGENT_KEY.match(key)
        if match is None:
            continue
        section, agent, name = match.group(1), int(match.group(2)), match.group(3)
        rows.setdefault(f"{section}/{name}", {})[agent] = value
        agents.add(agent)
    step = as_scalar(metrics.get(GLOBAL_STEP_KEY))
    title = f"Global steps {int(step):,}" if step is not None else "Generation"
    table = Table(title=title, title_justify="left")
    table.add_column("metric", style="bold")
    order = sorted(agents)
    for agent in order:
        table.add_column(f"agent {agent}", justify="right")
    with_mean = len(order) > 1
    if with_mean:
        table.add_column("mean", justify="right", style="bold")
    for name, values in rows.items():
        if not values:
            continue
        cells = [_cell(values.get(agent)) for agent in order]
        if with_mean:
            cells.append(_mean_cell(list(values.values())))
        table.add_row(name, *cells)
    return table


def _cell(value: object) -> str:
    if value is None:
        return ""
    scalar = as_scalar(value)
    if scalar is None:
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if scalar != 0 and (abs(scalar) < 1e-3 or abs(scalar) >= 1e6):
        return f"{scalar:.3e}"
    return f"{scalar:.4g}" if abs(scalar) < 1 else f"{scalar:.2f}"


def _mean_cell(values: list[object]) -> str:
    numbers = [as_scalar(v) for v in values]
    finite = [n for n in numbers if n is not None]
    if not finite:
        return ""
    mean = sum(finite) / len(finite)
    all_ints = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    return f"{mean:,.0f}" if all_ints and mean.is_integer() else _cell(mean)
