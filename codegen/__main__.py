"""``python -m codegen`` writes the generated files; ``--check`` verifies they are current."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from codegen.generate import GENERATED_DIRS, outputs


def _stale(repo: Path, files: dict[str, str]) -> list[str]:
    """Human-readable differences between ``files`` and what is on disk."""
    problems = []
    for rel, text in sorted(files.items()):
        path = repo / rel
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if current is None:
            problems.append(f"missing: {rel}")
            continue
        diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(),
                                         f"committed/{rel}", f"generated/{rel}", lineterm="", n=1))
        shown = "\n".join(diff[:20]) + ("\n..." if len(diff) > 20 else "")
        problems.append(f"stale: {rel} ({len(diff)} diff lines)\n{shown}")
    for package in GENERATED_DIRS:
        for path in sorted((repo / package).glob("*.py")):
            rel = path.relative_to(repo).as_posix()
            if rel not in files:
                problems.append(f"unexpected: {rel} (not produced by codegen)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="regenerate in memory and fail if committed output differs")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root")
    args = parser.parse_args(argv)
    files = outputs(args.repo)
    if args.check:
        problems = _stale(args.repo, files)
        if problems:
            print("generated files are out of date; run `make generate`:", file=sys.stderr)
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1
        print(f"generated files are current ({len(files)} files)")
        return 0
    for rel, text in sorted(files.items()):
        path = args.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    for package in GENERATED_DIRS:
        for path in sorted((args.repo / package).glob("*.py")):
            if path.relative_to(args.repo).as_posix() not in files:
                path.unlink()
                print(f"removed {path.relative_to(args.repo).as_posix()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
