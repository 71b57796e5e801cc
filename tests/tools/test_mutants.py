"""tools/mutants.py: its entries still apply to the tree, and it tells a kill from a survivor."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def load_tool():
    spec = importlib.util.spec_from_file_location("mutants_tool", REPO_ROOT / "tools" / "mutants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants_tool"] = module
    spec.loader.exec_module(module)
    return module


tool = load_tool()


def test_every_entry_applies_exactly_once() -> None:
    mutants = tool.load_mutants()
    assert mutants, "tools/mutants/ holds no entries"
    assert [m.problem(REPO_ROOT) for m in mutants] == [None] * len(mutants)


def test_an_entry_whose_line_moved_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "- {name: gone, file: agilerl/algorithms/td3.py, find: 'no such line', "
        "replace: x, tests: [tests]}\n")
    [mutant] = tool.load_mutants(tmp_path)
    assert "occurs 0 times" in mutant.problem(REPO_ROOT)


def test_a_missing_field_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("- {name: x, file: y, find: z}\n")
    with pytest.raises(SystemExit, match="missing replace, tests"):
        tool.load_mutants(tmp_path)


def test_kill_and_survival_are_told_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run the harness on a two-file tree: a mutant its test sees, one it does not."""
    (tmp_path / "lib.py").write_text("def double(x):\n    return 2 * x\n\n"
                                     "def unused():\n    return 1\n")
    (tmp_path / "test_lib.py").write_text("from lib import double\n\n"
                                          "def test_double():\n    assert double(3) == 6\n")
    mutants = [
        tool.Mutant("seen", "lib.py", "return 2 * x", "return x", ("test_lib.py",), tmp_path),
        tool.Mutant("unseen", "lib.py", "return 1", "return 0", ("test_lib.py",), tmp_path),
    ]
    assert tool.run_all(mutants, tmp_path, timeout=120) == 1
    out = capsys.readouterr().out
    assert "killed    seen" in out and "SURVIVED  unseen" in out
    assert "1 of 2 mutants killed; not killed: unseen" in out
    assert (tmp_path / "lib.py").read_text().count("return 2 * x") == 1  # restored
