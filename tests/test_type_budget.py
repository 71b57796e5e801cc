"""The library says what its values are: ``Any`` only where a value really is arbitrary
(a user's environment object, a database row), and few ``type: ignore``. These budgets
only go down; a change that needs more says why in review and raises them here."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agilerl"

#: Lines that mention ``Any`` (imports included), outside generated code.
ANY_LINES = 97
#: ``# type: ignore`` comments, outside generated code.
TYPE_IGNORES = 58


def _sources() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "_generated" not in p.parts]


def test_any_stays_within_its_budget() -> None:
    lines = [f"{path.relative_to(PACKAGE)}:{n}" for path in _sources()
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"\bAny\b", line)]
    assert len(lines) <= ANY_LINES, (len(lines), lines)


def test_type_ignores_stay_within_their_budget() -> None:
    count = sum(path.read_text().count("type: ignore") for path in _sources())
    assert count <= TYPE_IGNORES, count
