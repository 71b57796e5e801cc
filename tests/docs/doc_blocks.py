"""Reading the user documentation (README.md, docs/**/*.md) for the documentation tests.

A code block is *runnable* when the line just before its opening fence is the HTML comment
``<!-- runnable -->`` (invisible once rendered); ``<!-- runnable slow -->`` marks one that
takes longer than the default suite allows (it then runs with ``-m slow``). Runnable blocks
must be ``bash``/``sh``/``shell`` or ``python``. The tests run a document's runnable blocks in
order, in one scratch folder, as a reader following the page would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The user documentation: the README and every page under docs/ (the generated field
#: reference included, for the path check).
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell"})
RUNNABLE_LANGUAGES = SHELL_LANGUAGES | {"python"}

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*runnable(?P<options>[^>]*?)\s*-->\s*$")
_MARKER_LIKE = re.compile(r"^\s*<!--\s*run", re.IGNORECASE)
MARKER_OPTIONS = frozenset({"slow"})


@dataclass(frozen=True)
class Block:
    """A fenced code block of a document."""

    doc: Path
    line: int
    """1-based line of the opening fence."""
    language: str
    text: str
    runnable: bool
    options: frozenset[str]

    @property
    def where(self) -> str:
        doc = self.doc.relative_to(REPO) if self.doc.is_relative_to(REPO) else self.doc
        return f"{doc}:{self.line}"


@dataclass(frozen=True)
class MarkerProblem:
    """A runnable marker that marks nothing, or names an unknown option."""

    doc: Path
    line: int
    message: str


def read_blocks(doc: Path) -> tuple[list[Block], list[MarkerProblem]]:
    """The fenced blocks of ``doc`` and the problems with its runnable markers."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    problems: list[MarkerProblem] = []
    pending: tuple[int, frozenset[str]] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = _MARKER.match(line)
        opening = _FENCE.match(line)
        if pending is not None and not opening:
            problems.append(MarkerProblem(doc, pending[0], "a runnable marker must be the line "
                                                           "just before a code fence"))
            pending = None
        if marker:
            options = frozenset(marker.group("options").split())
            if options - MARKER_OPTIONS:
                problems.append(MarkerProblem(doc, i + 1, f"unknown runnable option(s) "
                                              f"{sorted(options - MARKER_OPTIONS)}"))
            pending = (i + 1, options)
        elif _MARKER_LIKE.search(line):
            problems.append(MarkerProblem(doc, i + 1, f"malformed runnable marker {line!r}"))
        elif opening:
            end = _closing_fence(lines, i, opening.group("fence"))
            language = (opening.group("info").split() or [""])[0].lower()
            blocks.append(Block(doc, i + 1, language, "\n".join(lines[i + 1:end]) + "\n",
                                pending is not None, pending[1] if pending else frozenset()))
            if pending is not None and language not in RUNNABLE_LANGUAGES:
                problems.append(MarkerProblem(doc, pending[0], f"a runnable block must be one "
                                              f"of {sorted(RUNNABLE_LANGUAGES)}, not "
                                              f"{language or 'unlabelled'!r}"))
            pending = None
            i = end
        i += 1
    if pending is not None:
        problems.append(MarkerProblem(doc, pending[0], "a runnable marker at the end of the file"))
    return blocks, problems


def _closing_fence(lines: list[str], start: int, fence: str) -> int:
    """The index of the line closing the block opened at ``start`` (or the last line)."""
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
            return j
    return len(lines)


def prose(doc: Path) -> str:
    """``doc`` without its fenced blocks (the text where inline code and links live)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    kept: list[str] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening:
            end = _closing_fence(lines, i, opening.group("fence"))
            kept.extend("" for _ in range(i, end + 1))  # keep line numbers
            i = end + 1
            continue
        kept.append(lines[i])
        i += 1
    return "\n".join(kept)
