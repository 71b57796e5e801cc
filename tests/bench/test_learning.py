"""bench/learning.py: runs through the real CLI, a table per task, a cached JSON per run (a
second invocation reads them instead of training again), a PNG per task; and the median
and spread of curves across seeds as step functions."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "learning.py"


def _plot_module():
    spec = importlib.util.spec_from_file_location("bench_learning_plot",
                                                  REPO / "bench" / "learning_plot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench(out: Path) -> subprocess.CompletedProcess:
    # our DQN CartPole, 2 members of 800 env steps each (8 envs: 100 vector steps), 2 seeds;
    # two generations each: too few for the CLI's stop rule (3), so each trains its budget
    return subprocess.run([sys.executable, str(SCRIPT), "--tasks", "dqn_cartpole",
                           "--seed-list", "3", "4", "--max-steps", "800",
                           "--set", "training.pop_size=2", "--set", "training.evo_steps=400",
                           "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_tiny_task_through_the_cli_prints_its_table_caches_its_runs_and_draws(
        tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    done = _bench(tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (title,) = [line for line in lines if line.startswith("dqn_cartpole ")]
    assert "target 475" in title and "budget 800 per member" in title and "2 seeds" in title
    (row,) = [line.split() for line in lines if line.startswith("  agilerl")]
    runs = sorted((tmp_path / "dqn_cartpole").glob("ours-*.json"))
    assert [p.name.split("-")[1] for p in runs] == ["s3", "s4"]
    records = [json.loads(p.read_text()) for p in runs]
    # each run records what its result depends on beside the code, as the header prints it
    (header,) = [line for line in lines if line.startswith("installation: ")]
    for record in records:
        assert set(record["installation"]) == {"torch", "numpy", "gymnasium", "pettingzoo",
                                               "python", "cpu"}
        assert f"numpy {record['installation']['numpy']}" in header
    for record in records:
        # generations of 400 steps per member: evaluations at 400 and 800
        assert [point[0] for point in record["curve"]] == [400, 800]
        for _, best, mean in record["curve"]:
            assert 8 <= mean <= best <= 500  # CartPole returns; best of 2 >= their mean
    bests = sorted(max(p[1] for p in r["curve"]) for r in records)
    finals = sorted(r["curve"][-1][1] for r in records)
    reached = sum(b >= 475 for b in bests)
    assert row[1] == f"{reached}/2"
    assert float(row[4]) == pytest.approx(sum(bests) / 2, abs=0.05)  # median of two
    assert float(row[3]) == pytest.approx(sum(finals) / 2, abs=0.05)
    png = tmp_path / "dqn_cartpole.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # a second run reads the cached runs: no "done" line, the same table row
    again = _bench(tmp_path)
    assert again.returncode == 0, again.stderr
    assert "done:" not in again.stdout
    assert [line.split() for line in again.stdout.splitlines()
            if line.startswith("  agilerl")] == [row]


def test_median_and_spread_of_step_curves() -> None:
    plot = _plot_module()
    a = [[100, 10, 5], [200, 30, 20], [300, 20, 10]]
    b = [[150, 50, 40], [300, 60, 50]]
    c = [[100, 475, 300]]  # stopped at the target after its first generation
    band = plot.spread([a, b, c], held=[False, False, True])
    assert band.steps == [100, 150, 200, 300]
    # at 100: a=10, c=475 (b has not evaluated yet); 150: a=10, b=50, c=475; 200: a=30, ...
    assert band.median == [242.5, 50, 50, 60]
    assert band.low == [10, 10, 30, 20]
    assert band.high == [475, 475, 475, 475]
    # without holding, c has no value after its last evaluation
    assert plot.spread([a, c], held=[False, False]).median == [242.5, 30, 20]
    assert plot.first_reaching(a, 25) == 200
    assert plot.first_reaching(a, 31) is None
    assert plot.first_reaching(a, None) is None


def test_value_at_is_the_last_evaluation_at_or_before() -> None:
    plot = _plot_module()
    curve = [[100, 1, 0], [200, 2, 0]]
    assert plot.value_at(curve, 99, held=False) is None
    assert plot.value_at(curve, 100, held=False) == 1
    assert plot.value_at(curve, 199, held=False) == 1
    assert plot.value_at(curve, 200, held=False) == 2
    assert plot.value_at(curve, 201, held=False) is None
    assert plot.value_at(curve, 201, held=True) == 2


def _learning_module():
    """bench/learning.py with bench/ first on the path (its ``import peer`` must find
    bench/peer.py, not the tests' ``peer`` package, which is put back afterwards)."""
    sys.path.insert(0, str(REPO / "bench"))
    saved = {name: sys.modules.pop(name, None) for name in ("peer", "learning_plot")}
    try:
        spec = importlib.util.spec_from_file_location("bench_learning", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_learning"] = module  # its dataclass looks its module up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "bench"))
        for name, previous in saved.items():
            sys.modules.pop(name, None)
            if previous is not None:
                sys.modules[name] = previous
    return module


def test_summary_counts_a_run_that_never_reached_the_target_as_infinitely_slow() -> None:
    learning = _learning_module()

    def run(*bests: float) -> dict:
        return {"curve": [[100 * (i + 1), b, b - 1] for i, b in enumerate(bests)],
                "wall_seconds": 10.0, "load_before": [1.0, 1.0, 1.0],
                "load_after": [2.0, 2.0, 2.0]}

    runs = [run(50, 480), run(490), run(10, 20, 30), {"error": "exit 1"}]
    s = learning.summary(runs, target=475)
    assert (s["runs"], s["failed"], s["reached"]) == (3, 1, 2)
    assert s["steps_to_target"] == 200  # 100, 200 and never: the median is 200
    assert (s["final_best"], s["best"]) == (480, 480)
    line = learning.row("agilerl", s, 475, 1000).split()
    assert line[:5] == ["agilerl", "2/3", "200", "480.0", "480.0"]
    assert line[-2:] == ["(1", "failed)"]
    slow = learning.summary([run(10), run(20), run(480)], target=475)
    assert learning.row("agilerl", slow, 475, 1000).split()[1:3] == ["1/3", ">1000"]
    no_target = learning.summary([run(10)], target=None)
    assert learning.row("agilerl", no_target, None, 1000).split()[1:3] == ["-", "-"]


def test_a_run_cached_on_another_installation_is_not_reused(monkeypatch, tmp_path) -> None:
    learning = _learning_module()
    task = learning.TASKS["dqn_cartpole"]
    here = learning.Cache(tmp_path, task, 800, []).path("agilerl", 3, full=False)
    assert learning.Cache(tmp_path, task, 800, []).path("agilerl", 3, full=False) == here
    for key, value in (("numpy", "0.0.1"), ("cpu", "another CPU")):
        other = dict(learning.installation(), **{key: value})
        monkeypatch.setattr(learning, "installation", lambda other=other: other)
        assert learning.Cache(tmp_path, task, 800, []).path("agilerl", 3, full=False) != here


def test_the_reference_trains_on_one_thread_unless_told_otherwise(monkeypatch, tmp_path) -> None:
    learning = _learning_module()
    task = learning.TASKS["dqn_cartpole"]
    seen: list[dict] = []

    def measure(python, manifest, budget, env, settings, stop_at=None):
        seen.append(dict(env))
        return {"history": [[800, 1.0, 20.0]], "wall_seconds": 1.0, "unit": "env steps",
                "stopped_at_target": False}

    monkeypatch.setattr(learning.peer, "_measure", measure)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    one = learning.Cache(tmp_path, task, 800, []).path("reference", 1, full=False)
    learning._reference("python", task, 800, [], None)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    learning._reference("python", task, 800, [], None)
    assert [env["OMP_NUM_THREADS"] for env in seen] == ["1", "2"]
    assert all("PYTHONPATH" not in env for env in seen)  # never our agilerl
    # a run on other threads is another run: cached apart
    assert learning.Cache(tmp_path, task, 800, []).path("reference", 1, full=False) != one
