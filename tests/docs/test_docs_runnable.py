"""The documentation's runnable code blocks run, as a reader following each page would.

A block is marked runnable by the line ``<!-- runnable -->`` just before its fence
(``<!-- runnable slow -->``: only with ``-m slow``); see ``doc_blocks``. A page's runnable
blocks run in order in one scratch folder holding a copy of ``configs/`` and ``docs/``, with
``HOME`` there too, ``agilerl``, ``arena`` and ``arena-server`` on ``PATH`` (this checkout's
commands, run by this interpreter) and ``python`` this interpreter. Shell blocks run under
``bash -e -o pipefail``; each block must exit 0.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import DOCS, REPO, SHELL_LANGUAGES, Block, read_blocks

#: Seconds one block may take (the default suite's blocks take a few each).
BLOCK_TIMEOUT = 240


def runnable_blocks(doc: Path) -> list[Block]:
    blocks, _ = read_blocks(doc)
    return [block for block in blocks if block.runnable]


def doc_params() -> list[object]:
    """One parameter per page with runnable blocks; ``slow`` when any block is."""
    params = []
    for doc in DOCS:
        blocks = runnable_blocks(doc)
        if blocks:
            slow = any("slow" in block.options for block in blocks)
            params.append(pytest.param(doc, id=str(doc.relative_to(REPO)),
                                       marks=[pytest.mark.slow] if slow else []))
    return params


def command_shims(folder: Path) -> Path:
    """A ``bin`` folder with this checkout's console scripts and ``python``, all run by this
    interpreter (the installed scripts may belong to another checkout)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+, as the development environment
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        code = f"import sys; sys.argv[0] = {name!r}; from {module} import {function}; " \
               f"sys.exit({function}())"
        _write_script(bin_dir / name, f'exec {shlex.quote(sys.executable)} -c '
                                      f'{shlex.quote(code)} "$@"')
    _write_script(bin_dir / "python", f'exec {shlex.quote(sys.executable)} "$@"')
    return bin_dir


def _write_script(path: Path, line: str) -> None:
    path.write_text(f"#!/bin/sh\n{line}\n")
    path.chmod(0o755)


def reader_environment(workspace: Path, bin_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("AGILERL_", "ARENA_", "PYTEST_"))}
    home = workspace / "home"
    home.mkdir()
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HOME=str(home),
               PYTHONPATH=str(REPO), WANDB_MODE="offline", WANDB_SILENT="true",
               OMP_NUM_THREADS="1", TERM="dumb", COLUMNS="100")
    return env


def run_block(block: Block, workspace: Path, env: dict[str, str]) -> None:
    if block.language in SHELL_LANGUAGES:
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    else:
        script = workspace / f"block_{block.line}.py"
        script.write_text(block.text)
        argv = [sys.executable, str(script)]
    try:
        done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.where}: still running after {exc.timeout} s")
    assert done.returncode == 0, (
        f"{block.where}: exit status {done.returncode}\n--- block\n{block.text}"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")
    assert "Traceback (most recent call last)" not in done.stderr, \
        f"{block.where} printed a traceback:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("doc", doc_params())
def test_runnable_blocks_run(doc: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "reader"
    workspace.mkdir()
    for folder in ("configs", "docs"):
        shutil.copytree(REPO / folder, workspace / folder)
    env = reader_environment(workspace, command_shims(tmp_path))
    for block in runnable_blocks(doc):
        run_block(block, workspace, env)


def test_runnable_markers_are_well_formed() -> None:
    """A marker marks the fence right after it, on a shell or Python block; and some are set."""
    problems = [f"{p.doc.relative_to(REPO)}:{p.line}: {p.message}"
                for doc in DOCS for p in read_blocks(doc)[1]]
    assert not problems, "\n".join(problems)
    assert any(runnable_blocks(doc) for doc in DOCS)


def test_the_reader_sees_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Text\n\n<!-- runnable -->\n```bash\necho hi\n```\n\n```python\nx = 1\n```\n"
                    "<!-- runnable slow -->\n````sh\ncat <<'EOF'\n```\nEOF\n````\n"
                    "<!-- runnable -->\n\n```bash\nno\n```\n<!-- runnable fast -->\n"
                    "```yaml\na: 1\n```\n<!-- runable -->\n")
    blocks, problems = read_blocks(page)
    assert [(b.line, b.language, b.runnable, sorted(b.options)) for b in blocks] == [
        (4, "bash", True, []), (8, "python", False, []), (12, "sh", True, ["slow"]),
        (19, "bash", False, []), (23, "yaml", True, ["fast"])]
    assert blocks[2].text == "cat <<'EOF'\n```\nEOF\n"
    assert [(p.line, p.message.split(" ")[0:3]) for p in problems] == [
        (17, ["a", "runnable", "marker"]), (22, ["unknown", "runnable", "option(s)"]),
        (22, ["a", "runnable", "block"]), (26, ["malformed", "runnable", "marker"])]


def test_a_failing_block_fails_and_the_shims_are_this_checkout(tmp_path: Path) -> None:
    workspace = tmp_path / "reader"
    workspace.mkdir()
    env = reader_environment(workspace, command_shims(tmp_path))
    page = tmp_path / "page.md"
    page.write_text("<!-- runnable -->\n```bash\nfalse | cat\necho never\n```\n"
                    "<!-- runnable -->\n```python\nraise SystemExit(3)\n```\n"
                    "<!-- runnable -->\n```bash\nagilerl --version > version.txt\n"
                    "python -c 'import agilerl; print(agilerl.__file__)' > where.txt\n```\n")
    shell, python, shims = read_blocks(page)[0]
    for block in (shell, python):
        with pytest.raises(AssertionError, match="exit status"):
            run_block(block, workspace, env)
    run_block(shims, workspace, env)
    assert (workspace / "version.txt").read_text().strip()
    assert Path((workspace / "where.txt").read_text().strip()).is_relative_to(REPO / "agilerl")
