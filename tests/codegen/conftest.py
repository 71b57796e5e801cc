"""Fixtures of the codegen tests (the repository root must be importable for ``codegen``)."""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from schema_agreement import bundle_validator  # noqa: E402


@pytest.fixture(scope="session")
def validator() -> jsonschema.Draft202012Validator:
    return bundle_validator()
