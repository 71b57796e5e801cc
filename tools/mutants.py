"""Remove each algorithm's defining line and check that a test fails.

An algorithm's distinguishing feature (TD3's target policy smoothing, Rainbow's C51
projection, CQN's conservative term, ...) can be lost in a refactor while every test still
passes: the code still runs and still learns something. Each entry of
``tools/mutants/*.yaml`` names one such line and a minimal change that removes the feature::

    - name: td3-target-policy-smoothing
      file: agilerl/algorithms/td3.py
      find: "return (action + noise).clamp(-1.0, 1.0)"
      replace: "return action.clamp(-1.0, 1.0)"
      tests: [tests/algorithms/test_ddpg_td3.py]

For every entry this script copies the working tree to a scratch folder beside the checkout
(so ``../shared`` resolves as in the checkout), applies the change there, runs the entry's
tests with that copy first on the import path, and reports the mutant **killed** (a test
failed) or **survived** (every test passed: the feature is unguarded). Each distinct test
selection is first run without any change, so that a selection already failing does not
count as a kill. Exits 1 when a mutant survives, 2 when an entry or a baseline is broken.

    python tools/mutants.py                 # every entry
    python tools/mutants.py --only td3-     # entries whose name starts with td3-
    python tools/mutants.py --check         # only that every ``find`` occurs exactly once
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
MUTANTS_DIR = REPO_ROOT / "tools" / "mutants"
#: What every run of pytest gets: stop at the first failure, quiet, no cache in the copy.
PYTEST_FLAGS = ("-x", "-q", "-p", "no:cacheprovider", "-p", "no:warnings", "-n", "0")
FIELDS = ("name", "file", "find", "replace", "tests")


@dataclass(frozen=True)
class Mutant:
    """One defining line of an algorithm and the change that removes it."""

    name: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    source: Path

    def problem(self, root: Path) -> str | None:
        """Why this entry cannot be applied to the tree at ``root``, or None."""
        path = root / self.file
        if not path.is_file():
            return f"{self.source.name}: {self.name}: no file {self.file}"
        count = path.read_text().count(self.find)
        if count != 1:
            return (f"{self.source.name}: {self.name}: `find` occurs {count} times in "
                    f"{self.file} (must be exactly once)")
        if self.find == self.replace:
            return f"{self.source.name}: {self.name}: `replace` equals `find`"
        return None


def load_mutants(directory: Path = MUTANTS_DIR) -> list[Mutant]:
    """Every entry of every ``*.yaml`` file in ``directory``, in file then entry order."""
    mutants: list[Mutant] = []
    for source in sorted(directory.glob("*.yaml")):
        entries = yaml.safe_load(source.read_text()) or []
        if not isinstance(entries, list):
            raise SystemExit(f"{source}: expected a list of mutants")
        for index, entry in enumerate(entries):
            missing = [f for f in FIELDS if not isinstance(entry, dict) or f not in entry]
            if missing:
                raise SystemExit(f"{source}: entry {index}: missing {', '.join(missing)}")
            tests = entry["tests"]
            mutants.append(Mutant(
                name=str(entry["name"]), file=str(entry["file"]), find=str(entry["find"]),
                replace=str(entry["replace"]),
                tests=tuple(tests) if isinstance(tests, list) else (str(tests),),
                source=source))
    names = [m.name for m in mutants]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise SystemExit(f"{directory}: mutant names used twice: {', '.join(duplicated)}")
    return mutants


def working_tree_files(root: Path) -> list[str]:
    """Tracked and untracked-but-not-ignored files: what a run of the suite here reads."""
    listing = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
        capture_output=True).stdout.decode()
    return [f for f in listing.split("\0") if f and (root / f).is_file()]


def copy_tree(root: Path, destination: Path) -> None:
    for name in working_tree_files(root):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def run_tests(copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[int, float, str]:
    """pytest's exit status, the seconds it took and its last lines, run in ``copy``."""
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", *PYTEST_FLAGS, *tests],
                              cwd=copy, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, time.perf_counter() - start, "timed out"
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])
    return done.returncode, time.perf_counter() - start, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[],
                        help="run the entries whose name starts with one of these")
    parser.add_argument("--check", action="store_true",
                        help="only check that every entry applies to this tree")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one run of an entry's tests may take (default 900)")
    args = parser.parse_args(argv)

    mutants = [m for m in load_mutants()
               if not args.only or any(m.name.startswith(p) for p in args.only)]
    problems = [p for m in mutants if (p := m.problem(REPO_ROOT))]
    if problems:
        print("\n".join(problems))
        return 2
    if args.check:
        print(f"{len(mutants)} mutants apply to this tree")
        return 0

    scratch = Path(tempfile.mkdtemp(prefix=".mutants-", dir=REPO_ROOT.parent))
    try:
        copy = scratch / REPO_ROOT.name
        copy_tree(REPO_ROOT, copy)
        return run_all(mutants, copy, args.timeout)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_all(mutants: list[Mutant], copy: Path, timeout: float) -> int:
    for tests in dict.fromkeys(m.tests for m in mutants):
        status, seconds, tail = run_tests(copy, tests, timeout)
        print(f"baseline  {' '.join(tests)}: exit {status} in {seconds:.0f} s", flush=True)
        if status != 0:
            print(tail)
            return 2
    survived = []
    for mutant in mutants:
        path = copy / mutant.file
        original = path.read_text()
        path.write_text(original.replace(mutant.find, mutant.replace))
        try:
            status, seconds, tail = run_tests(copy, mutant.tests, timeout)
        finally:
            path.write_text(original)
        verdict = "killed" if status not in (0, -1) else (
            "SURVIVED" if status == 0 else "timed out")
        print(f"{verdict:9} {mutant.name} ({seconds:.0f} s)", flush=True)
        if status != 0 and status != 1:
            print(f"          pytest exit {status}: {tail.splitlines()[-1] if tail else ''}")
        if status in (0, -1):
            survived.append(mutant.name)
    print(f"{len(mutants) - len(survived)} of {len(mutants)} mutants killed"
          + (f"; not killed: {', '.join(survived)}" if survived else ""))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
