"""Build the light ``agilerl-arena`` wheel from this tree: ``python tools/arena_wheel/build.py``.

The wheel holds what submitting jobs needs: the Arena client and ``arena`` CLI
(``agilerl.arena`` without ``server/``), the light manifest models (``agilerl.models``) and
the light trainer base (``agilerl.training.trainer`` with its ``arguments``) and the
errors they raise (``agilerl.core.errors``); nothing that imports torch or gymnasium when imported. Its dependencies are those of the main
``pyproject.toml`` that these modules import (:data:`DEPENDENCIES`, versions as pinned
there). The files are copied into ``build/arena-wheel/`` with
``tools/arena_wheel/pyproject.toml.in`` and built with ``pip wheel``; the wheel lands in
``dist/`` (or ``--out``) and its path is printed.

It installs into the same ``agilerl/`` folder as the full package, so install one or the
other (``pip install agilerl[arena]`` already includes everything this wheel has).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib  # Python 3.11+, as in the development environment that builds the wheel

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
#: files and folders (relative to the repository root) that go into the wheel.
INCLUDE = (
    "agilerl/__init__.py",
    "agilerl/py.typed",
    "agilerl/version.py",
    "agilerl/core/__init__.py",
    "agilerl/core/algorithm_spec.py",
    "agilerl/core/environment_facts.py",
    "agilerl/core/errors.py",
    "agilerl/core/value_types.py",
    "agilerl/core/manifest_errors.py",
    "agilerl/arena",
    "agilerl/models",
    "agilerl/training/__init__.py",
    "agilerl/training/arguments.py",
    "agilerl/training/errors.py",
    "agilerl/training/trainer.py",
)
#: left out of the folders above: the self-hosted server needs the ``[server]`` extra.
EXCLUDE = ("agilerl/arena/server",)
#: distribution names (from the main pyproject's dependencies) the included modules import.
DEPENDENCIES = ("httpx", "pydantic", "pyyaml")


def wheel_files() -> list[Path]:
    """The repository files the wheel is built from (relative paths), sorted."""
    found: list[Path] = []
    for entry in INCLUDE:
        path = ROOT / entry
        candidates = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        for file in candidates:
            rel = file.relative_to(ROOT)
            if "__pycache__" in rel.parts or file.suffix in (".pyc", ".pyo"):
                continue
            if any(rel.as_posix().startswith(f"{ex}/") for ex in EXCLUDE):
                continue
            found.append(rel)
    return sorted(found)


def _requirement_name(spec: str) -> str:
    for i, char in enumerate(spec):
        if not (char.isalnum() or char in "-_."):
            return spec[:i].lower()
    return spec.lower()


def _project_config() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {_requirement_name(dep): dep for dep in project["dependencies"]}
    missing = [name for name in DEPENDENCIES if name not in pinned]
    if missing:
        raise SystemExit(f"pyproject.toml no longer lists {', '.join(missing)}")
    deps = ", ".join(f'"{pinned[name]}"' for name in DEPENDENCIES)
    template = (HERE / "pyproject.toml.in").read_text()
    return template.replace("@VERSION@", project["version"]).replace("@DEPENDENCIES@", deps)


def stage(staging: Path) -> Path:
    """Copy the wheel's files and its build configuration into ``staging``."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for rel in wheel_files():
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    (staging / "pyproject.toml").write_text(_project_config())
    return staging


def build(out: Path, staging: Path) -> Path:
    """Stage and build the wheel into ``out``; return its path."""
    stage(staging)
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.glob("agilerl_arena-*.whl"))
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
           str(out), str(staging)]
    if importlib.util.find_spec("setuptools") is not None:
        cmd.insert(5, "--no-build-isolation")  # build with the setuptools already here
    subprocess.run(cmd, check=True)
    made = set(out.glob("agilerl_arena-*.whl")) - before
    return max(made or out.glob("agilerl_arena-*.whl"), key=lambda p: p.stat().st_mtime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument("--staging", type=Path, default=ROOT / "build" / "arena-wheel")
    args = parser.parse_args(argv)
    print(build(args.out, args.staging))
    return 0


if __name__ == "__main__":
    sys.exit(main())
