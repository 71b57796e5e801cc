"""bench/scaling.py: every worker count of a round runs the same seed (so the runs are the
same run and only their speed differs), and the ratio is against the first count."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _scaling_module():
    """bench/scaling.py, loaded with bench/ first on the path: its ``import peer`` must find
    bench/peer.py, not the tests' ``peer`` package another test may have imported under
    that name (which is put back afterwards)."""
    sys.path.insert(0, str(REPO / "bench"))
    tests_peer = sys.modules.pop("peer", None)
    try:
        spec = importlib.util.spec_from_file_location("bench_scaling", REPO / "bench" /
                                                      "scaling.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "bench"))
        sys.modules.pop("peer", None)
        if tests_peer is not None:
            sys.modules["peer"] = tests_peer
    return module


def _calls(monkeypatch, *argv: str) -> tuple[list[tuple[list[str], int | None]], str]:
    scaling = _scaling_module()
    calls = []

    def measure(python, manifest, max_steps, env, settings=None, seed=None, stop_at=None):
        calls.append((settings, seed))
        rate = 1000.0 * int(settings[0].split("=")[1])
        return {"train_steps_per_second": rate, "peak_rss_mb": 250.0, "wall_seconds": 9.0}

    monkeypatch.setattr(scaling.peer, "_measure", measure)
    return calls, scaling


def test_every_worker_count_of_a_round_runs_one_drawn_seed(monkeypatch, capsys):
    calls, scaling = _calls(monkeypatch)
    assert scaling.main(["--workers", "1", "2", "--repeat", "2"]) == 0
    assert [c[0] for c in calls] == [["training.num_workers=1"], ["training.num_workers=2"]] * 2
    first, second = calls[0][1], calls[2][1]
    assert first is not None and calls[1][1] == first and calls[3][1] == second
    out = capsys.readouterr().out
    assert f"seed {first}" in out and "(2.00x)" in out


def test_a_given_seed_is_used_by_every_run(monkeypatch):
    calls, scaling = _calls(monkeypatch)
    assert scaling.main(["--workers", "1", "2", "--seed", "7", "--repeat", "2"]) == 0
    assert [seed for _, seed in calls] == [7, 7, 7, 7]
