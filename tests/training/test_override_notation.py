"""Dotted overrides take the notation the manifest file takes, and a path through a scalar
is a usage error (exit 2), not an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from agilerl.cli.main import main
from agilerl.training.manifest_input import load_manifest
from agilerl.training.overrides import OverrideError, parse_override, parse_overrides

MANIFEST = "algorithm:\n  name: DQN\nenvironment:\n  name: CartPole-v1\ntraining:\n  max_steps: 1000\n"


@pytest.mark.parametrize(("text", "value"), [
    ("algorithm.lr=3e-4", 3e-4), ("algorithm.lr=1E-5", 1e-5), ("training.max_steps=2e3", 2000.0),
    ("training.max_steps=1_000_000", 1_000_000), ("algorithm.lr=.5", 0.5),
])
def test_values_read_like_the_file(text: str, value: object) -> None:
    parsed = parse_override(text).value
    assert parsed == value and type(parsed) is type(value)


def test_readme_overrides_validate(tmp_path: Path) -> None:
    file = tmp_path / "m.yaml"
    file.write_text(MANIFEST)
    manifest = load_manifest(file, parse_overrides(
        ["algorithm.lr=3e-4", "training.max_steps=2e3", "training.pop_size=8"]))
    assert manifest.algorithm.lr == 3e-4
    assert manifest.training.max_steps == 2000 and isinstance(manifest.training.max_steps, int)


@pytest.mark.parametrize("override", ["training.max_steps.foo=1",
                                      "environment.name.x.y=2",
                                      "training.max_steps.0=3"])
def test_an_override_into_a_scalar_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str) -> None:
    file = tmp_path / "m.yaml"
    file.write_text(MANIFEST)
    assert main(["train", str(file), override, "--no-verbose"]) == 2
    err = capsys.readouterr().err
    assert f"override '{override}'" in err and "not a mapping" in err
    assert "internal error" not in err


def test_an_alias_bomb_in_an_override_is_refused() -> None:
    laughs = "[" + ", ".join(["&a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"] + ["*a"] * 9) + "]"
    nested = "{x: &b " + laughs + ", y: [" + ", ".join(["*b"] * 10) + "]}"
    bomb = "{p: &c " + nested + ", q: [" + ", ".join(["*c"] * 1000) + "]}"
    with pytest.raises(OverrideError, match="expands to more than"):
        parse_override(f"environment.config={bomb}")
