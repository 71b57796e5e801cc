"""Issue 22 item 4: ``agilerl plot RUN_DIR [-o OUT]`` writes PNG charts of a run folder."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import agilerl, assert_no_traceback
from tests.training.conftest import TINY_DQN

pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"
CHARTS = ("learning.png", "hyperparameters.png", "lineage.png")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from agilerl import LocalTrainer

    manifest = copy.deepcopy(TINY_DQN)
    manifest["training"].update(max_steps=400, pop_size=2)
    folder = tmp_path_factory.mktemp("plot") / "run"
    LocalTrainer.from_manifest(manifest=manifest, seed=2).train(verbose=False, run_dir=folder)
    return folder


def test_plot_writes_three_non_empty_pngs(run_dir, tmp_path):
    out = tmp_path / "charts"
    result = agilerl("plot", str(run_dir), "-o", str(out))
    assert result.returncode == 0, result.stderr
    for name in CHARTS:
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, name
        assert str(out / name) in result.stdout
    assert_no_traceback(result)


def test_plot_of_a_run_without_events_draws_the_learning_curves(run_dir, tmp_path):
    old = tmp_path / "old-run"
    old.mkdir()
    (old / "metrics.csv").write_bytes((run_dir / "metrics.csv").read_bytes())
    result = agilerl("plot", str(old))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (old / "plots").iterdir()) == ["learning.png"]
    assert "events.jsonl not found" in result.stderr


@pytest.mark.parametrize("case", ["missing", "no metrics", "not a metrics file"])
def test_plot_errors_exit_non_zero_without_traceback(tmp_path, case):
    folder = tmp_path / "run"
    if case != "missing":
        folder.mkdir()
    if case == "not a metrics file":
        (folder / "metrics.csv").write_text("a,b\n1,2\n")
    result = agilerl("plot", str(folder))
    assert result.returncode == 1
    expected = {"missing": "not found", "no metrics": "has no metrics.csv",
                "not a metrics file": "no train/global_step column"}[case]
    assert expected in result.stderr and str(folder) in result.stderr
    assert_no_traceback(result)


def test_missing_matplotlib_names_the_extra(run_dir, tmp_path, monkeypatch, capsys):
    from agilerl.cli.main import main

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    assert main(["plot", str(run_dir), "-o", str(tmp_path / "out")]) == 1
    assert 'pip install "agilerl[plot]"' in capsys.readouterr().err
