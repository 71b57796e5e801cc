"""The ``agilerl`` command in a subprocess: exit codes, ``--json``, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
INVALID = REPO_ROOT / "tests" / "models" / "invalid"
CONFIGS = REPO_ROOT / "configs" / "training"


def agilerl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "agilerl.cli", *args],
        capture_output=True, text=True, cwd=cwd or REPO_ROOT, env=env, timeout=120,
    )


def assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stdout + result.stderr


def test_validate_valid_config_exits_zero() -> None:
    result = agilerl("validate", str(CONFIGS / "dqn.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok" in result.stdout
    assert_no_traceback(result)


def test_validate_invalid_reports_file_line_and_path() -> None:
    target = INVALID / "negative_lr.yaml"
    result = agilerl("validate", str(target))
    assert result.returncode == 1
    assert f"{target}:4:" in result.stdout
    assert "algorithm.lr" in result.stdout
    assert_no_traceback(result)


def test_validate_mixed_files_exit_one_and_json() -> None:
    good, bad = CONFIGS / "ppo.yaml", INVALID / "several_problems.yaml"
    result = agilerl("validate", "--json", str(good), str(bad))
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert payload["valid"] is False
    by_file = {r["file"]: r for r in payload["results"]}
    assert by_file[str(good)]["valid"] is True
    errors = by_file[str(bad)]["errors"]
    assert {(e["path"], e["line"]) for e in errors} == {
        ("algorithm.lr", 5), ("algorithm.gama", 6), ("training.pop_size", 10),
        ("training.eval_loop", 11),
    }
    gama = next(e for e in errors if e["path"] == "algorithm.gama")
    assert gama["suggestion"] == "gamma"
    assert_no_traceback(result)


def test_validate_missing_file_is_invalid_not_a_crash(tmp_path: Path) -> None:
    result = agilerl("validate", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1
    assert "not found" in result.stdout
    assert_no_traceback(result)


@pytest.mark.parametrize("name", ["syntax_error.yaml", "empty_document.yaml", "list_document.yaml"])
def test_validate_broken_documents(name: str) -> None:
    result = agilerl("validate", str(INVALID / name))
    assert result.returncode == 1
    assert str(INVALID / name) + ":" in result.stdout
    assert_no_traceback(result)


def test_usage_errors_exit_two() -> None:
    assert agilerl().returncode == 2
    result = agilerl("validate")
    assert result.returncode == 2
    assert_no_traceback(result)
    assert agilerl("frobnicate").returncode == 2


def test_show_prints_defaults_as_yaml_and_json() -> None:
    import yaml

    result = agilerl("show", str(CONFIGS / "dqn.yaml"))
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["algorithm"]["name"] == "DQN"
    assert "tau" in shown["algorithm"]  # a default filled in
    assert "hp_config" not in shown["algorithm"]
    result = agilerl("show", "--json", str(CONFIGS / "dqn.yaml"))
    assert result.returncode == 0
    assert json.loads(result.stdout)["training"]["max_steps"] > 0


def test_show_invalid_exits_one() -> None:
    result = agilerl("show", str(INVALID / "negative_lr.yaml"))
    assert result.returncode == 1
    assert "algorithm.lr" in result.stderr
    assert_no_traceback(result)


def test_schema_prints_bundled_schema_and_per_algorithm() -> None:
    result = agilerl("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert "properties" in schema or "$defs" in schema
    result = agilerl("schema", "--algorithm", "DQN")
    assert result.returncode == 0
    assert "tau" in json.dumps(json.loads(result.stdout))
    result = agilerl("schema", "--algorithm", "dqn")
    assert result.returncode == 2
    assert "DQN" in result.stderr
    assert_no_traceback(result)


def test_validate_peer_manifests_in_one_call(peer_manifests_dir: Path) -> None:
    files = sorted(str(p) for p in peer_manifests_dir.rglob("*.yaml"))
    assert len(files) == 51
    # tests/ppo_cnn.yaml names DummyImage-v0, the image probe env this library ships.
    result = agilerl("validate", "-q", *files, cwd=peer_manifests_dir / "data")
    assert result.returncode == 0, result.stdout + result.stderr
