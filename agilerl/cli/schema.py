"""``agilerl schema [--algorithm NAME]``: print the bundled JSON Schema of manifests, or the
schema of one algorithm's ``algorithm`` section."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NAME = "schema"
HELP = "print the JSON Schema of training manifests (or of one algorithm's settings)"

BUNDLE = Path(__file__).resolve().parents[1] / "schemas" / "manifest.schema.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algorithm", metavar="NAME",
                        help="print only this algorithm's schema (e.g. DQN, PPO)")


def run(args: argparse.Namespace) -> int:
    try:
        bundle = json.loads(BUNDLE.read_text(encoding="utf-8"))
    except OSError as exc:
        print(f"agilerl schema: cannot read the bundled schema {BUNDLE}: {exc.strerror}",
              file=sys.stderr)
        return 3
    if args.algorithm is None:
        json.dump(bundle, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    defs = bundle.get("$defs", {})
    key = f"{args.algorithm}Spec"
    names = sorted(n.removesuffix("Spec") for n, d in defs.items()
                   if isinstance(d.get("properties", {}).get("name"), dict)
                   and "const" in d["properties"]["name"])
    if key not in defs or args.algorithm not in names:
        from agilerl.models.suggest import closest

        hint = closest(args.algorithm, names, cutoff=0.6)
        extra = f" (did you mean '{hint}'?)" if hint else ""
        print(f"agilerl schema: unknown algorithm {args.algorithm!r}{extra}; registered: "
              f"{', '.join(names)}", file=sys.stderr)
        return 2
    json.dump(_with_refs(defs, key, bundle.get("$schema")), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _with_refs(defs: dict[str, Any], key: str, dialect: str | None) -> dict[str, Any]:
    """The definition ``key`` plus every definition it references (transitively)."""
    needed: dict[str, Any] = {}
    stack = [key]
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed[name] = defs[name]
        stack += [ref.rsplit("/", 1)[-1] for ref in _refs(defs[name])]
    root = dict(needed.pop(key))
    if dialect:
        root = {"$schema": dialect, **root}
    if needed:
        root["$defs"] = needed
    return root


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []
