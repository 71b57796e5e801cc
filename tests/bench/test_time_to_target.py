"""bench/time_to_target.py: a run ends at its first evaluation reaching the target, and the
table says whether, when and at how many train steps each seeded run reached it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "time_to_target.py"
MANIFEST = REPO.parent / "shared" / "bench-manifests" / "dqn_cartpole.yaml"

pytestmark = pytest.mark.skipif(not MANIFEST.is_file(), reason="shared bench manifests absent")


def _run(*args: str, workers: int = 1) -> list[list[str]]:
    done = subprocess.run([sys.executable, str(SCRIPT), "--manifest", str(MANIFEST),
                           "--workers", str(workers), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines() if line.startswith("  ours")]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_stops_at_its_first_evaluation_reaching_the_target(workers: int) -> None:
    # every member of CartPole scores at least 8 (one episode per sub-env): reached at once;
    # with 2 workers the members are evaluated in processes forked from the driver
    rows = _run("--target", "1", "--seeds", "3", "--max-steps", "800", workers=workers)
    (row,) = rows
    assert row[:4] == ["ours", "seed", "3", "yes"]
    steps_at_target, total_steps = int(row[4]), int(row[8])
    # evo_steps = max_steps: one generation of 4 members of 800 steps, then it stopped
    assert steps_at_target == total_steps == 4 * 800
    assert row[7] == "-"  # no final fitness: the run ended at the target


def test_a_run_that_never_reaches_the_target_trains_its_whole_budget() -> None:
    rows = _run("--target", "1e9", "--seeds", "3", "--max-steps", "1000", "--history")
    (row,) = rows
    assert row[:4] == ["ours", "seed", "3", "no"]
    assert row[4] == row[5] == "-"
    assert int(row[8]) == 4 * 1000 and float(row[7]) > 0


def test_set_changes_the_manifest_for_the_run() -> None:
    # two members instead of the manifest's four: the history has two evaluations per line
    done = subprocess.run([sys.executable, str(SCRIPT), "--manifest", str(MANIFEST),
                           "--workers", "1", "--set", "training.pop_size=2", "--target", "1e9",
                           "--seeds", "3", "--max-steps", "800", "--history"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "training.pop_size=2" in done.stdout.splitlines()[0]
    (row,) = [line.split() for line in done.stdout.splitlines() if line.startswith("  ours")]
    assert int(row[8]) == 2 * 800
    (generation,) = [line.split() for line in done.stdout.splitlines()
                     if line.strip().startswith("steps")]
    assert len(generation) == 4 + 2  # "steps", steps, seconds, "s", then 2 fitnesses
