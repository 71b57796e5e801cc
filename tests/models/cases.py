"""The invalid-manifest cases under ``tests/models/invalid/`` and what each must report.

A case states its expected errors either as ``# <- dotted.path`` at the end of the offending
line, or as ``# expect: dotted.path @ LINE`` header lines (a ``.expect`` file beside a JSON
case). ``# schema: reject|rule|env|skip`` says whether the bundled JSON Schema alone must
reject it (``reject``), must accept it because the rule is one a schema cannot express
(``rule``: spec §3.8; ``env``: a local environment check), or is not a document at all
(``skip``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

INVALID_DIR = Path(__file__).resolve().parent / "invalid"

_MARK = re.compile(r"#\s*<-\s*(?P<path>\S+)\s*$")
_EXPECT = re.compile(r"^#?\s*(?:expect:)?\s*(?P<path>\S*)\s*@\s*(?P<line>\d+)\s*$")
_SCHEMA = re.compile(r"^#\s*schema:\s*(?P<kind>\w+)")


@dataclass(frozen=True)
class Case:
    file: Path
    expected: frozenset[tuple[str, int]]
    schema: str

    @property
    def id(self) -> str:
        return self.file.name


def _parse(text: str, lines_have_marks: bool) -> tuple[set[tuple[str, int]], str]:
    expected: set[tuple[str, int]] = set()
    schema = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if match := _SCHEMA.match(line):
            schema = match.group("kind")
        elif line.lstrip().startswith("# expect:") or (not lines_have_marks and "@" in line):
            match = _EXPECT.match(line.strip())
            assert match, f"bad expectation line: {line!r}"
            expected.add((match.group("path"), int(match.group("line"))))
        elif lines_have_marks and (match := _MARK.search(line)):
            expected.add((match.group("path"), number))
    return expected, schema


def load_cases() -> list[Case]:
    cases = []
    for file in sorted(INVALID_DIR.iterdir()):
        if file.suffix == ".expect":
            continue
        if file.suffix == ".json":
            expected, schema = _parse(file.with_suffix(".expect").read_text(), False)
        else:
            expected, schema = _parse(file.read_text(), True)
        assert expected, f"{file.name}: no expectations"
        assert schema in ("reject", "rule", "env", "skip"), f"{file.name}: schema kind"
        cases.append(Case(file, frozenset(expected), schema))
    return cases
