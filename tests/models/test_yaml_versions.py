"""The shipped manifests (and the README's) read alike under YAML 1.1 (PyYAML, the reference
library) and YAML 1.2 (yaml-language-server, the editors' default): no plain scalar that one
version reads as a number, boolean or null is a string or another value for the other
(``1_000_000`` is a string in YAML 1.2, ``1e-4`` and ``1.0e4`` are strings in YAML 1.1)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
_CORE_12 = [
    ("null", re.compile(r"^(?:null|Null|NULL|~|)$"), lambda s: None),
    ("bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), lambda s: s.lower() == "true"),
    ("int", re.compile(r"^[-+]?[0-9]+$"), int),
    ("int", re.compile(r"^0o[0-7]+$"), lambda s: int(s[2:], 8)),
    ("int", re.compile(r"^0x[0-9a-fA-F]+$"), lambda s: int(s[2:], 16)),
    ("float", re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"), float),
    ("float", re.compile(r"^[-+]?\.(?:inf|Inf|INF)$"), lambda s: float(s.replace(".", ""))),
    ("float", re.compile(r"^\.(?:nan|NaN|NAN)$"), lambda s: float("nan")),
]


def read_12(text: str) -> tuple[str, Any]:
    for kind, pattern, convert in _CORE_12:
        if pattern.match(text):
            return kind, convert(text)
    return "str", text


def read_11(text: str) -> tuple[str, Any]:
    value = yaml.load(f"v: {text}\n", Loader=yaml.SafeLoader)["v"]
    kind = {type(None): "null", bool: "bool", int: "int", float: "float"}.get(type(value), "str")
    return kind, value


def plain_scalars(text: str) -> list[tuple[int, str]]:
    """(line, text) of every plain (unquoted) scalar value of a YAML document."""
    found, key_next = [], False
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, yaml.KeyToken):
            key_next = True
        elif isinstance(token, yaml.ScalarToken):
            if token.plain and not key_next:
                found.append((token.start_mark.line + 1, token.value))
            key_next = False
    return found


def disagreements(text: str) -> list[str]:
    out = []
    for line, scalar in plain_scalars(text):
        (kind_11, value_11), (kind_12, value_12) = read_11(scalar), read_12(scalar)
        same = kind_11 == kind_12 and (value_11 == value_12 or value_11 != value_11)
        if not same:
            out.append(f"line {line}: {scalar!r} is {kind_11} {value_11!r} in YAML 1.1 "
                       f"but {kind_12} {value_12!r} in YAML 1.2")
    return out


def _readme_blocks() -> list[tuple[str, str]]:
    text = (REPO_ROOT / "README.md").read_text()
    return [(f"README.md block {i}", block) for i, block in
            enumerate(re.findall(r"```yaml\n(.*?)```", text, re.S))]


SHIPPED = [(str(p.relative_to(REPO_ROOT)), p.read_text())
           for p in sorted((REPO_ROOT / "configs").rglob("*.y*ml"))] + _readme_blocks()


@pytest.mark.parametrize(("name", "text"), SHIPPED, ids=[n for n, _ in SHIPPED])
def test_shipped_manifests_read_alike_in_yaml_1_1_and_1_2(name: str, text: str) -> None:
    assert disagreements(text) == []


@pytest.mark.parametrize(("scalar", "agree"), [
    ("1000000", True), ("1_000_000", False), ("1e-4", False), ("1.0e-4", True),
    ("1.0e4", False), ("1.0e+4", True), ("yes", False), ("on", False), ("010", False),
    ("true", True), ("null", True), ("0.5", True), ("CartPole-v1", True), ("-3", True),
])
def test_the_check_tells_versions_apart(scalar: str, agree: bool) -> None:
    assert (disagreements(f"k: {scalar}\n") == []) is agree


def test_editor_settings_map_the_configs_to_the_bundled_schema() -> None:
    settings = json.loads((REPO_ROOT / ".vscode" / "settings.json").read_text())
    (schema, globs), = settings["yaml.schemas"].items()
    assert (REPO_ROOT / schema).resolve() == (REPO_ROOT / "agilerl/schemas/manifest.schema.json")
    assert "configs/training/**/*.yaml" in globs
