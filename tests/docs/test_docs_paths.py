"""Every repository path, link and ``python -m`` module the documentation names exists.

Checked: relative links and images (resolved from the page's folder; ``#anchors`` against the
target page's headings), repository paths in inline code and code blocks (``configs/...``,
``docs/...``, ``bench/...``, ``agilerl/...``, ...: from the repository root; globs must match
something), and the modules of ``python -m agilerl...`` (and ``bench``, ``codegen``, ``tools``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_blocks import DOCS, REPO, prose, read_blocks

#: Top-level folders and files whose paths a page may name from the repository root.
ROOTS = ("agilerl", "bench", "codegen", "configs", "docs", "schemas", "tests", "tools",
         ".vscode")
ROOT_FILES = ("README.md", "Makefile", "pyproject.toml", "constraints.txt")

_PATH = re.compile(
    r"(?<![\w./~$@-])((?:" + "|".join(re.escape(r) for r in ROOTS) + r")/[\w.*?/-]*"
    r"|(?:" + "|".join(re.escape(f) for f in ROOT_FILES) + r")(?![\w.]))")
_INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_MODULE = re.compile(r"python3?\s+-m\s+((?:agilerl|bench|codegen|tools)(?:\.\w+)*)")
_PLACEHOLDER = re.compile(r"[<{]|\.\.\.")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def ignored_outputs() -> tuple[str, ...]:
    """Folders of .gitignore under a named parent (``bench/results/``): tools write them, so a
    page may name them before they exist."""
    lines = (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
    return tuple(line for line in lines if line.endswith("/") and "/" in line[:-1])


def doc_id(doc: Path) -> str:
    return str(doc.relative_to(REPO))


def code_texts(doc: Path) -> list[str]:
    """The page's inline code spans and code blocks."""
    blocks, _ = read_blocks(doc)
    return _INLINE_CODE.findall(prose(doc)) + [block.text for block in blocks]


def named_paths(doc: Path) -> set[str]:
    """Repository paths named in the page's code (placeholders such as ``<name>`` left out)."""
    found: set[str] = set()
    for text in code_texts(doc):
        for match in _PATH.findall(text):
            path = match.rstrip(".")
            if not _PLACEHOLDER.search(path):
                found.add(path)
    return found


def exists(path: str, base: Path) -> bool:
    """``path`` (a glob when it has ``*`` or ``?``) names something under ``base``."""
    if any(c in path for c in "*?"):
        return any(base.glob(path.rstrip("/")))
    target = base / path
    return target.is_dir() if path.endswith("/") else target.exists()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    seen: dict[str, int] = {}
    result: set[str] = set()
    for heading in _HEADING.findall(prose(doc)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def broken_links(doc: Path) -> list[str]:
    problems = []
    for target in _LINK.findall(prose(doc)):
        if re.match(r"^[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / path).resolve() if path else doc
        if not resolved.exists():
            problems.append(f"{target}: {resolved.relative_to(REPO)} does not exist")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: {resolved.name} has no heading #{anchor}")
    return problems


def missing_modules(doc: Path) -> list[str]:
    missing = []
    for text in code_texts(doc):
        for module in _MODULE.findall(text):
            path = REPO / module.replace(".", "/")
            if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()):
                missing.append(module)
    return missing


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_paths_exist(doc: Path) -> None:
    missing = sorted(p for p in named_paths(doc)
                     if not exists(p, REPO) and not p.startswith(ignored_outputs()))
    assert not missing, f"{doc_id(doc)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_links_resolve(doc: Path) -> None:
    problems = broken_links(doc)
    assert not problems, f"{doc_id(doc)}: broken links: {problems}"


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_python_m_modules_exist(doc: Path) -> None:
    missing = missing_modules(doc)
    assert not missing, f"{doc_id(doc)} runs modules that do not exist: {missing}"


def test_the_checks_see_paths_links_and_modules() -> None:
    """The readers find what they look for (else the tests above would pass on nothing)."""
    readme = REPO / "README.md"
    assert {"configs/training/", "docs/training.md", "bench/"} <= named_paths(readme)
    assert "agilerl.train" in {m for t in code_texts(readme) for m in _MODULE.findall(t)}
    assert _LINK.findall("see [the page](docs/x.md#a-b) and ![img](images/p.png)") == \
        ["docs/x.md#a-b", "images/p.png"]
    assert slug("Jobs across nodes (Ray)") == "jobs-across-nodes-ray"
    assert slug("Members in parallel (`training.num_workers`, `--workers N`)") == \
        "members-in-parallel-trainingnum_workers---workers-n"
    assert not _PATH.findall("../../agilerl/schemas/x.json and pip install 'agilerl[ray]'")
    assert not exists("configs/training/no_such.yaml", REPO)
    assert exists("configs/training/*.yaml", REPO)
