"""Mutation probabilities that do not sum to 1 are normalised, and a one-line note says so
when the manifest is read (``validate`` and ``train`` alike)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

import agilerl.train as train_mod
from agilerl.hpo.mutation import Mutations
from agilerl.models import ManifestWarning, MutationSpec, TrainingManifest
from agilerl.models.validation import validate_path

from .conftest import tiny

UNNORMALISED = {"no_mut": 0.4, "arch_mut": 0.2, "new_layer": 0.9, "params_mut": 0.2,
                "act_mut": 0.2, "rl_hp_mut": 0.2}


def _with_probabilities(probabilities: dict[str, float]) -> dict:
    return tiny(mutation={"probabilities": probabilities})


def test_reading_warns_naming_the_field_and_the_sum() -> None:
    with pytest.warns(ManifestWarning) as caught:
        TrainingManifest.get_validated(_with_probabilities(UNNORMALISED))
    notes = [str(w.message) for w in caught if "mutation.probabilities" in str(w.message)]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert "sum to 1.2, not 1" in notes[0] and "normalised" in notes[0]


def test_new_layer_is_not_part_of_the_sum() -> None:
    exact = {**UNNORMALISED, "no_mut": 0.2}  # 0.2 * 5 = 1; new_layer 0.9 does not count
    with warnings.catch_warnings():
        warnings.simplefilter("error", ManifestWarning)
        TrainingManifest.get_validated(_with_probabilities(exact))


def test_validate_reports_it_as_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(_with_probabilities(UNNORMALISED), sort_keys=False))
    report = validate_path(path)
    assert not report.errors
    assert [w.path for w in report.warnings] == ["mutation.probabilities"]


def test_train_prints_the_note_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(_with_probabilities(UNNORMALISED), sort_keys=False))
    assert train_mod.main([str(path), "--seed", "1", "--run-dir", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "mutation.probabilities" in line]
    assert len(notes) == 1 and notes[0].startswith("agilerl train: warning: ") and "m.yaml:" in notes[0]
    assert "ManifestWarning" not in err


def test_the_operator_draws_with_the_normalised_probabilities() -> None:
    spec = MutationSpec.model_validate({"probabilities": UNNORMALISED})
    probabilities = Mutations.from_spec(spec).probabilities
    assert probabilities.sum() == pytest.approx(1.0)
    assert probabilities[0] == pytest.approx(0.4 / 1.2)
