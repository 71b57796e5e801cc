"""The bad-input corpus through the real command line: each input gets its exit status and a
message naming the field (and line), never a traceback or "internal error"."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agilerl.cli.main import main
from agilerl.models import budget
from agilerl.models.loading import MAX_MANIFEST_BYTES
from tests.models.cases import load_cases as load_model_cases

CORPUS = Path(__file__).resolve().parent
REPO_ROOT = CORPUS.parents[1]
CLASSES = ("numbers", "structure", "yaml", "overrides", "environments", "checkpoints")
ONE_GIB = 1 << 30


@dataclass
class Case:
    file: Path
    cls: str
    command: str = "validate"
    overrides: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    """Further ``train`` options; ``{here}`` is the case's folder (a checkpoint beside it)."""
    exit: int = 1
    expect: list[tuple[str, int | None]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.cls}/{self.file.name}"


def _header(file: Path) -> list[str]:
    sidecar = file.with_suffix(".expect")
    text = sidecar.read_text() if sidecar.exists() else file.read_text()
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return lines


def _case(file: Path, cls: str) -> Case:
    case = Case(file, cls)
    for line in _header(file):
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "command":
            case.command = value
        elif key == "override":
            case.overrides.append(value)
        elif key == "arg":
            case.args.append(value.replace("{here}", str(file.parent)))
        elif key == "exit":
            case.exit = int(value)
        elif key == "expect":
            path, _, where = value.rpartition(" @ ") if " @ " in value else (value, "", "any")
            path = "" if path == "<manifest>" else path
            case.expect.append((path, None if where == "any" else int(where)))
        elif key == "message":
            case.messages.append(value)
    assert case.expect or case.messages, f"{file}: no expectations"
    assert case.command in ("validate", "train")
    assert case.command == "train" or not (case.overrides or case.args)
    return case


def load_cases() -> list[Case]:
    cases = []
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir() and p.name in CLASSES):
        for file in sorted(folder.iterdir()):
            if file.suffix in (".yaml", ".yml", ".json"):
                cases.append(_case(file, folder.name))
    return cases


CASES = load_cases()
VALIDATE = [c for c in CASES if c.command == "validate"]
TRAIN = [c for c in CASES if c.command == "train"]
MODEL_CASES = load_model_cases()


def _no_crash(text: str) -> None:
    assert "Traceback" not in text and "internal error" not in text, text


def test_the_corpus_covers_every_class_with_at_least_120_cases() -> None:
    classes = {c.cls for c in CASES}
    assert {"numbers", "structure", "yaml", "overrides", "environments"} <= classes
    assert len(CASES) + len(MODEL_CASES) >= 120
    assert len(CASES) >= 120


@pytest.fixture()
def small_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "machine_memory_bytes", lambda: ONE_GIB)


def _message(error: dict) -> str:
    hint = f" (did you mean '{error['suggestion']}'?)" if error.get("suggestion") else ""
    return f"{error['message']}{hint}"


def _rendered(error: dict) -> str:
    return f"{error['line']}:{error['column']}: {error['path']}: {_message(error)}"


def test_validate_refuses_every_case_in_one_call(small_machine: None, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    huge = tmp_path / "huge.yaml"  # generated: the size limit is checked before parsing
    huge.write_text("algorithm: {name: DQN}\n" + "# padding\n" * (MAX_MANIFEST_BYTES // 10 + 1))
    files = [str(c.file) for c in VALIDATE] + [str(c.file) for c in MODEL_CASES] + [str(huge)]
    status = main(["validate", "--json", *files])
    out, err = capsys.readouterr()
    _no_crash(out + err)
    assert status == 1
    results = {r["file"]: r for r in json.loads(out)["results"]}
    assert len(results) == len(files)
    problems = []
    for case in VALIDATE:
        problems += _check(case, results[str(case.file)])
    for model_case in MODEL_CASES:
        got = {(e["path"], e["line"]) for e in results[str(model_case.file)]["errors"]}
        if got != set(model_case.expected):
            problems.append(f"{model_case.id}: {sorted(got)} != {sorted(model_case.expected)}")
    assert [e["message"] for e in results[str(huge)]["errors"]] == [
        f"the file is {huge.stat().st_size:,} bytes; manifests larger than "
        f"{MAX_MANIFEST_BYTES:,} bytes (1 MiB) are refused unread"]
    assert not problems, "\n".join(problems)


def _check(case: Case, result: dict) -> list[str]:
    errors = result["errors"]
    rendered = [_rendered(e) for e in errors]
    out = []
    if result["valid"] or not errors:
        return [f"{case.id}: accepted"]
    for path, line in case.expect:
        if not any(e["path"] == path and (line is None or e["line"] == line) for e in errors):
            out.append(f"{case.id}: no error at {path or '<manifest>'} @ {line}: {rendered}")
    for fragment in case.messages:
        if not any(fragment in _message(e) for e in errors):
            out.append(f"{case.id}: no message with {fragment!r}: {rendered}")
    pairs = [(e["path"], e["message"]) for e in errors]
    if len(set(pairs)) != len(pairs):
        out.append(f"{case.id}: a problem is reported twice: {rendered}")
    return out


@pytest.mark.parametrize("case", TRAIN, ids=[c.id for c in TRAIN])
def test_train_refuses_with_the_documented_status(case: Case, small_machine: None, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["train", str(case.file), *case.overrides, *case.args, "--no-verbose",
                   "--run-dir", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    _no_crash(out + err)
    assert status == case.exit, err
    for path, line in case.expect:
        assert path in err
        if line is not None:
            assert f"{case.file.name}:{line}:" in err, err
    for fragment in case.messages:
        assert fragment in err, err
    assert not (tmp_path / "run").exists()


def _sample() -> list[Case]:
    """The first case of each class and command (what runs in subprocesses)."""
    seen: dict[tuple[str, str], Case] = {}
    for case in CASES:
        if "larger_than_memory" not in case.file.name:  # the subprocess has its real memory
            seen.setdefault((case.cls, case.command), case)
    return list(seen.values())


def test_a_sample_through_the_installed_command(tmp_path: Path) -> None:
    sample = _sample()
    validate = [c for c in sample if c.command == "validate"]
    run = subprocess.run([sys.executable, "-m", "agilerl.cli", "validate", "--json",
                          *[str(c.file) for c in validate]],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    _no_crash(run.stdout + run.stderr)
    assert run.returncode == 1
    results = {r["file"]: r for r in json.loads(run.stdout)["results"]}
    problems = [p for c in validate for p in _check(c, results[str(c.file)])]
    assert not problems, "\n".join(problems)
    for case in (c for c in sample if c.command == "train"):
        run = subprocess.run([sys.executable, "-m", "agilerl.cli", "train", str(case.file),
                              *case.overrides, *case.args, "--no-verbose",
                              "--run-dir", str(tmp_path / "r")],
                             capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
        _no_crash(run.stdout + run.stderr)
        assert run.returncode == case.exit, (case.id, run.stderr)
        assert all(fragment in run.stderr for fragment in case.messages), run.stderr
