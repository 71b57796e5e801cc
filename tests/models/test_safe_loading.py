"""Reading a manifest is bounded: alias bombs, self-references, huge files and non-JSON
numbers get a located error, never a RecursionError, a hang or an exhausted machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from agilerl.models import ManifestError
from agilerl.models.loading import MAX_MANIFEST_BYTES, load_file, parse_text
from agilerl.models.validation import validate_path

LAUGHS = "\n".join(
    [f'l0: &l0 [{", ".join(["lol"] * 9)}]']
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
) + "\nalgorithm: {name: DQN}\nenvironment: {name: CartPole-v1}\n"


def _error(text: str, file: str | None = "m.yaml", **kwargs: object) -> str:
    with pytest.raises(ManifestError) as info:
        parse_text(text, file, **kwargs)  # type: ignore[arg-type]
    (issue,) = info.value.issues
    assert issue.location is not None
    return f"{issue.location.line}:{issue.location.column} {issue.message}"


def test_billion_laughs_is_refused_before_expansion() -> None:
    message = _error(LAUGHS)
    assert "expands to more than 100,000 values" in message
    assert message.startswith("6:")  # l5 is the first anchor past the bound


@pytest.mark.parametrize("text", ["a: &x [*x]\n", "algorithm: &a\n  name: DQN\n  me: *a\n",
                                  "a: &x {b: [1, {c: *x}]}\n"])
def test_an_alias_inside_its_own_anchor_is_refused(text: str) -> None:
    assert "contains the alias itself" in _error(text)


def test_shared_anchors_and_merge_keys_still_work() -> None:
    doc = parse_text("base: &b {lr: 0.1}\nalgorithm:\n  <<: *b\n  name: DQN\nother: [*b, *b]\n")
    assert doc.data["algorithm"] == {"lr": 0.1, "name": "DQN"}


def test_deep_nesting_is_refused() -> None:
    text = "a:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(150)) + " " * 151 + "1\n"
    assert "levels of nesting" in _error(text)


def test_a_file_above_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("algorithm: {name: DQN}\n" + "#" * MAX_MANIFEST_BYTES)
    with pytest.raises(ManifestError, match="refused unread"):
        load_file(big)
    report = validate_path(big)
    assert not report.ok and "1 MiB" in report.errors[0].message


@pytest.mark.parametrize(("text", "where", "fragment"), [
    ('{"algorithm": {"name": "DQN",},\n "environment": {}}', "1:30", "double quotes"),
    ('// comment\n{"algorithm": {}}', "1:1", "Expecting value"),
    ('{"algorithm": {"name": "DQN", "lr": NaN}}', "1:37", "NaN is not a JSON number"),
    ('{"a": 1,\n "b": -Infinity}', "2:7", "-Infinity is not a JSON number"),
    ("algorithm:\n  name: DQN\n", "1:1", "Expecting value"),
])
def test_json_manifests_are_parsed_as_json(text: str, where: str, fragment: str) -> None:
    message = _error(text, "m.json")
    assert message.startswith(where) and fragment in message


def test_json_keeps_key_positions() -> None:
    doc = parse_text('{\n  "algorithm": {\n    "name": "DQN"\n  }\n}\n', "m.json")
    assert doc.locate(("algorithm", "name")).line == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e999", "-1e999"])
def test_non_finite_numbers_are_refused_everywhere(tmp_path: Path, value: str) -> None:
    file = tmp_path / "m.yaml"
    file.write_text(f"algorithm:\n  name: DQN\n  lr: {value}\nenvironment:\n  name: CartPole-v1\n"
                    f"  config:\n    anything: {value}\n")
    report = validate_path(file)
    got = [(i.path, i.location.line if i.location else None) for i in report.errors]
    assert got == [("algorithm.lr", 3), ("environment.config.anything", 7)]
    assert all("finite" in i.message for i in report.errors)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_an_endless_stream_is_refused_after_the_limit() -> None:
    with pytest.raises(ManifestError, match="refused unread"):
        load_file("/dev/zero")


def test_the_arena_models_refuse_non_finite_numbers_once() -> None:
    from agilerl.arena.models import TrainingManifest as ArenaManifest

    data = {"algorithm": {"name": "DQN", "lr": float("nan"), "tau": float("inf")},
            "environment": {"name": "CartPole-v1"}}
    with pytest.raises(ManifestError) as info:
        ArenaManifest.get_validated(data)
    assert sorted(info.value.paths) == ["algorithm.lr", "algorithm.tau"]
    assert all("must be a finite number" in i.message for i in info.value.issues)
