"""Progress display and summary render without a terminal; silent when not verbose."""

from __future__ import annotations

import io

from rich.console import Console

from agilerl.logging import ProgressDisplay, format_duration, generation_table, render_summary


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _plain_console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200), buffer


def test_plain_lines_are_periodic_and_final_line_printed() -> None:
    console, buffer = _plain_console()
    clock = Clock()
    with ProgressDisplay(1000, console=console, plain_interval_s=5.0, clock=clock) as display:
        assert not display.live
        for generation in range(1, 10):
            clock.now += 2.0
            display.update(
                generation * 100, generation=generation, best_fitness=generation, mean_fitness=0.5
            )
    lines = buffer.getvalue().splitlines()
    # first update, then at most one line per 5 s (every third 2 s update), then the last one
    assert [line.split(" |")[0] for line in lines] == [
        "steps 100/1,000 (10%)",
        "steps 400/1,000 (40%)",
        "steps 700/1,000 (70%)",
        "steps 900/1,000 (90%)",
    ]
    assert "50 steps/s" in lines[-1]
    assert "gen 9 | best 9.00 | mean 0.50" in lines[-1]
    assert "ETA 0:00:02" in lines[-1]


def test_explicit_rate_and_completion_line() -> None:
    console, buffer = _plain_console()
    clock = Clock()
    display = ProgressDisplay(500, console=console, plain_interval_s=60.0, clock=clock)
    clock.now = 1.0
    display.update(100, steps_per_second=1234.0)
    clock.now = 2.0
    display.update(500, generation=3)  # completion is always printed
    display.close()
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 2
    assert "1,234 steps/s" in lines[0]
    assert lines[1].startswith("steps 500/500 (100%)") and "ETA 0:00:00" in lines[1]


def test_silent_when_not_verbose() -> None:
    console, buffer = _plain_console()
    with ProgressDisplay(10, verbose=False, console=console) as display:
        display.update(5, generation=1, best_fitness=1.0)
        display.show_generation({"eval/agent_0/fitness": 1.0})
    render_summary(console, verbose=False, best_fitness=1.0)
    assert buffer.getvalue() == ""


def test_live_view_on_terminal() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, force_terminal=True)
    with ProgressDisplay(1000, console=console) as display:
        assert display.live
        display.update(250, generation=2, best_fitness=10.0, mean_fitness=5.0)
    assert "steps 250/1,000 (25%)" in buffer.getvalue()
    assert "gen 2 | best 10.00 | mean 5.00" in buffer.getvalue()


def test_generation_table() -> None:
    table = generation_table(
        {
            "train/global_step": 2048,
            "train/agent_1/score": 3.0,
            "eval/agent_0/fitness": 10.0,
            "eval/agent_1/fitness": 20.0,
            "train/agent_0/score": 1.0,
            "train/agent_0/lr": 0.001,
            "train/agent_1/lr": 0.003,
            "train/agent_0/batch_size": 64,
            "train/agent_1/batch_size": 64,
            "eval/mean_fitness": 15.0,
        }
    )
    console, buffer = _plain_console()
    console.print(table)
    text = buffer.getvalue()
    assert "Global steps 2,048" in text
    assert [c.header for c in table.columns] == ["metric", "agent 0", "agent 1", "mean"]
    rows = [line for line in text.splitlines() if "│" in line]
    cells = [[c.strip() for c in r.split("│")[1:-1]] for r in rows]
    assert [c[0] for c in cells] == ["eval/fitness", "train/score", "train/lr", "train/batch_size"]
    assert cells[0][1:] == ["10.00", "20.00", "15.00"]
    assert cells[1][3] == "2.00"
    assert cells[3][1:] == ["64", "64", "64"]


def test_summary_plain() -> None:
    console, buffer = _plain_console()
    render_summary(
        console,
        best_fitness=480.5,
        fitnesses=[480.5, 300.0],
        elite_path="/runs/elite.pt",
        checkpoint_path="/runs/ckpt",
        total_steps=20000,
        wall_time_s=10.0,
        stopped_early=True,
    )
    text = buffer.getvalue()
    assert "status: target score reached" in text
    assert "best fitness: 480.50" in text
    assert "elite saved to: /runs/elite.pt" in text
    assert "checkpoints in: /runs/ckpt" in text
    assert "wall time: 0:00:10 (2,000 steps/s)" in text


def test_format_duration() -> None:
    assert format_duration(3725.4) == "1:02:05"
    assert format_duration(None) == "-"
    assert format_duration(float("inf")) == "-"


def test_rate_counts_from_the_first_update_so_resumed_steps_do_not_inflate_it() -> None:
    console, buffer = _plain_console()
    clock = Clock()
    display = ProgressDisplay(100_000, console=console, plain_interval_s=0.0, clock=clock)
    clock.now = 0.5
    display.update(50_000, generation=10)  # resumed from a checkpoint
    assert display.state.steps_per_second is None
    clock.now = 10.5
    display.update(51_000)
    display.close()
    assert display.state.steps_per_second == 100.0
    assert "ETA 0:08:10" in buffer.getvalue().splitlines()[-1]


def test_budget_is_shown_per_agent_times_agents() -> None:
    console, buffer = _plain_console()
    with ProgressDisplay(800_000, agents=4, console=console) as display:
        display.update(12_000, generation=1)
        assert display.state.budget == "200,000 steps x 4 agents"
    assert buffer.getvalue().startswith("steps 12,000/800,000 (200,000 x 4 agents, 2%)")
    single = ProgressDisplay(1_000, console=console)
    assert single.state.budget == "1,000 steps"


def _one_generation(verbose: int) -> str:
    console, buffer = _plain_console()
    clock = Clock()
    metrics = {"train/global_step": 200, "eval/agent_0/fitness": 3.0, "eval/agent_1/fitness": 5.0}
    with ProgressDisplay(1000, agents=2, verbose=verbose, console=console, clock=clock,
                         plain_interval_s=60.0) as display:
        display.update(100, generation=1)  # first line, within the generation
        clock.now = 1.0
        display.update(200, generation=1, best_fitness=5.0, mean_fitness=4.0)  # not due yet
        display.show_generation(metrics)
    return buffer.getvalue()


def test_default_verbosity_prints_one_line_per_generation_no_table() -> None:
    out = _one_generation(1)
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert lines[1].startswith("steps 200/1,000 (500 x 2 agents, 20%)")
    assert "best 5.00 | mean 4.00" in lines[1]
    assert "agent 0" not in out and "Global steps" not in out


def test_generation_line_is_not_repeated_when_just_printed() -> None:
    console, buffer = _plain_console()
    with ProgressDisplay(100, console=console) as display:
        display.update(100, generation=1, best_fitness=1.0)  # completion: printed at once
        display.show_generation({})
    assert len(buffer.getvalue().splitlines()) == 1


def test_verbosity_two_prints_the_per_agent_table() -> None:
    out = _one_generation(2)
    assert "Global steps 200" in out and "agent 1" in out
    assert _one_generation(0) == ""
