"""bench/peer.py --repeat: runs interleaved ours / the other side, each with the load it
started and ended at and the CPU the rest of the machine took meanwhile; the median ratio
with its range over all pairs and over those started quiet; every run's step count checked
against the run's own record."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _bench_module(name: str) -> ModuleType:
    """``bench/NAME.py`` under a name of its own (``peer`` is also a test package here);
    bench/ is on the path for the module it imports, ``peer_protocol``."""
    if str(REPO / "bench") not in sys.path:
        sys.path.append(str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


peer = _bench_module("peer")
peer_protocol = _bench_module("peer_protocol")


def test_runs_alternate_ours_and_the_reference() -> None:
    assert peer_protocol.schedule(3, ["agilerl", "reference"]) == [
        (0, "agilerl"), (0, "reference"), (1, "agilerl"), (1, "reference"),
        (2, "agilerl"), (2, "reference")]
    assert peer_protocol.schedule(2, ["agilerl"]) == [(0, "agilerl"), (1, "agilerl")]


def test_busy_time_counts_every_non_idle_state_including_steal() -> None:
    clk = peer_protocol.os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat = f"cpu  {clk} {clk} {clk} {50 * clk} {7 * clk} {clk} {clk} {clk} 0 0\ncpu0 1 2 3\n"
    assert peer_protocol._busy_seconds(stat) == pytest.approx(6.0)


def test_the_rest_of_the_machine_is_the_busy_time_less_the_run_and_the_sampler() -> None:
    before = peer_protocol.HostSnapshot(load=0.4, busy_seconds=100.0, self_seconds=1.0,
                                        children_seconds=10.0)
    after = peer_protocol.HostSnapshot(load=1.7, busy_seconds=130.0, self_seconds=1.5,
                                       children_seconds=35.0)
    accounting = peer_protocol.run_accounting(before, after)
    assert accounting == {"load_start": 0.4, "load_end": 1.7, "run_cpu_seconds": 25.0,
                          "other_cpu_seconds": 4.5}
    # tick rounding can make the difference slightly negative: never reported below 0
    quiet = peer_protocol.HostSnapshot(load=0.1, busy_seconds=124.0, self_seconds=1.5,
                                       children_seconds=35.0)
    assert peer_protocol.run_accounting(before, quiet)["other_cpu_seconds"] == 0.0


def test_waiting_for_the_load_to_settle_stops_at_the_threshold_or_the_limit() -> None:
    loads = iter([3.0, 2.2, 1.6, 1.4, 1.0])
    slept: list[float] = []
    waited = peer_protocol.wait_for_quiet(1.5, 60.0, poll=5.0, load=lambda: next(loads),
                                          sleep=slept.append)
    assert waited == 15.0 and slept == [5.0, 5.0, 5.0]
    assert peer_protocol.wait_for_quiet(1.5, 10.0, poll=5.0, load=lambda: 9.0,
                                        sleep=lambda _: None) == 10.0


def _run(rate: float, memory: float, load: float) -> dict:
    return {"train_steps_per_second": rate, "peak_rss_mb": memory, "load_start": load}


def test_the_summary_gives_the_median_ratio_and_range_and_leaves_loaded_pairs_out_of_the_clean_one(
        ) -> None:
    pairs = [(_run(600, 30, 0.2), _run(100, 100, 0.3)),   # 6x, 0.3x
             (_run(800, 40, 0.5), _run(100, 100, 1.0)),   # 8x, 0.4x
             (_run(2000, 50, 3.0), _run(100, 100, 0.4)),  # 20x, 0.5x: ours started loaded
             (_run(500, 50, 0.1), {"error": "exit 1"})]   # failed: in no ratio
    all_pairs, clean = peer_protocol.summary_lines(pairs, threshold=1.5)
    assert "all pairs (3): steps/s ratio median 8.00x (range 6.00-20.00)" in all_pairs
    assert "memory ratio median 0.40x (range 0.30-0.50)" in all_pairs
    assert "(2): steps/s ratio median 7.00x (range 6.00-8.00)" in clean
    assert "memory ratio median 0.35x (range 0.30-0.40)" in clean


def test_a_budget_after_a_colon_is_that_manifests_own() -> None:
    assert peer.split_budget("dqn_cartpole:20000", None) == ("dqn_cartpole", 20000)
    assert peer.split_budget("ppo_cartpole", 5000) == ("ppo_cartpole", 5000)
    assert peer.split_budget("/tmp/a:b.yaml", 7) == ("/tmp/a:b.yaml", 7)


def _result(counted: int, kept: int, history: list, own_history: list | None) -> dict:
    own = {"source": "metrics.csv", "train_steps": kept}
    if own_history is not None:
        own["history"] = own_history
    return {"train_steps": counted, "history": history, "own_record": own}


def test_the_drivers_counts_are_checked_against_the_runs_own_record() -> None:
    history = [(800, 1.0, 20.0), (1600, 2.0, 180.0)]
    own = [(800, 20.0), (1600, 180.0)]
    assert peer.own_record_check(_result(1600, 1600, history, own), 100.0) == "ok (metrics.csv)"
    assert peer.own_record_check(_result(1700, 1600, history, own), 100.0) == \
        "steps 1700 counted, 1600 in metrics.csv"
    late = [(800, 20.0), (1600, 20.0)]  # the file says the target was never reached
    assert peer.own_record_check(_result(1600, 1600, history, late), 100.0) == \
        "target at 1600 counted, None in metrics.csv"
    assert peer.own_record_check({"train_steps": 5, "own_record": {"source": None}},
                                 None) == "none kept"


def test_repeat_interleaves_two_installations_and_prints_each_run_and_the_median(
        tmp_path: Path) -> None:
    # the other side is this same installation (--peer-python), so no reference is needed
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "peer.py"), "--repeat", "2", "--settle", "0",
         "--peer-python", sys.executable,
         "--manifests", f"{REPO / 'configs' / 'training' / 'dqn.yaml'}:400",
         "--set", "training.pop_size=2", "--set", "training.evo_steps=200",
         "--set", "environment.num_envs=4", "--workers", "1"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()
            if re.match(r"\s+(agilerl|reference) #\d", line)]
    assert [(r[0], r[1]) for r in rows] == [("agilerl", "#1"), ("reference", "#1"),
                                           ("agilerl", "#2"), ("reference", "#2")]
    for row in rows:
        assert float(row[2]) > 0 and float(row[3]) > 0  # wall seconds, steps/s
        assert re.fullmatch(r"\d+\.\d\d\*?/\d+\.\d\d", row[9])  # load at start / end
        assert float(row[10]) >= 0  # the rest of the machine's CPU seconds
        # 2 members x 400 steps, as counted and as the run's own record says
        assert row[11] == "ok", row
    assert done.stdout.count("    ratio: ") == 2
    assert "all pairs (2): steps/s ratio median" in done.stdout


def test_startup_times_each_import_and_the_first_training_step_over_cold_starts() -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "startup.py"), "--repeat", "2",
                           "--settle", "0", "--manifest",
                           str(REPO / "configs" / "training" / "dqn.yaml")],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = {line.split("median")[0].strip(): line for line in done.stdout.splitlines()
             if "median" in line}
    assert set(lines) == {"import torch", "from agilerl import LocalTrainer",
                          "import agilerl.training.trainer", "first training step, agilerl"}
    for line in lines.values():  # two cold starts each, every one timed
        times = re.search(r"; ([\d.]+), ([\d.]+)\)$", line)
        assert times is not None and all(float(t) > 0 for t in times.groups()), line


def test_a_missing_figure_keeps_its_column() -> None:
    assert peer._fmt(None, "9d") == "        -" and peer._fmt(12, "9d") == "       12"
    assert peer._fmt(None, ".1f") == "-"


def test_a_manifest_that_is_not_there_is_refused_before_any_run() -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "peer.py"), "--ours-only",
                           "--manifests", "dqn_cartpole:100", "no_such_manifest:100"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no manifest no_such_manifest:100" in done.stderr
    assert "Traceback" not in done.stderr and "dqn_cartpole" not in done.stdout
