"""``agilerl schema [--algorithm NAME] [--write PATH]``: print the bundled JSON Schema of
manifests, or the schema of one algorithm's ``algorithm`` section; ``--write`` saves it to a
file and prints the editor modeline that points a manifest outside this repository at it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue

NAME = "schema"
HELP = "print the JSON Schema of training manifests (or of one algorithm's settings)"

BUNDLE = Path(__file__).resolve().parents[1] / "schemas" / "manifest.schema.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algorithm", metavar="NAME",
                        help="print only this algorithm's schema (e.g. DQN, PPO)")
    parser.add_argument("--write", metavar="PATH", type=Path,
                        help="write the schema to PATH (a folder gets manifest.schema.json) "
                        "and print the '# yaml-language-server: $schema=' line to use")


def run(args: argparse.Namespace) -> int:
    try:
        bundle = json.loads(BUNDLE.read_text(encoding="utf-8"))
    except OSError as exc:
        print(f"agilerl schema: cannot read the bundled schema {BUNDLE}: {exc.strerror}",
              file=sys.stderr)
        return 3
    schema = bundle if args.algorithm is None else _algorithm_schema(bundle, args.algorithm)
    if schema is None:
        return 2
    if args.write is not None:
        return _write(schema, args.write)
    json.dump(schema, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _write(schema: JsonObject, path: Path) -> int:
    """Save ``schema`` at ``path`` and print the modeline a manifest uses to refer to it."""
    target = path / BUNDLE.name if path.is_dir() else path
    try:
        target.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"agilerl schema: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    where = target.resolve()
    print(f"Wrote the manifest schema to {where}.", file=sys.stderr)
    print("Make this the first line of a manifest to have editors that use "
          "yaml-language-server check it:", file=sys.stderr)
    print(f"# yaml-language-server: $schema={where}")
    return 0


def _algorithm_schema(bundle: JsonObject, algorithm: str) -> JsonObject | None:
    """One algorithm's schema, or None after saying the name is unknown."""
    defs = bundle.get("$defs", {})
    assert isinstance(defs, dict)  # the bundled schema, generated with its definitions
    key = f"{algorithm}Spec"
    names = sorted(n.removesuffix("Spec") for n, d in defs.items()
                   if isinstance(d, dict) and isinstance(props := d.get("properties", {}), dict)
                   and isinstance(name := props.get("name"), dict) and "const" in name)
    if key not in defs or algorithm not in names:
        from agilerl.models.suggest import closest

        hint = closest(algorithm, names, cutoff=0.6)
        extra = f" (did you mean '{hint}'?)" if hint else ""
        print(f"agilerl schema: unknown algorithm {algorithm!r}{extra}; registered: "
              f"{', '.join(names)}", file=sys.stderr)
        return None
    return _with_refs(defs, key, bundle.get("$schema"))


def _with_refs(defs: JsonObject, key: str, dialect: JsonValue) -> JsonObject:
    """The definition ``key`` plus every definition it references (transitively)."""
    needed: JsonObject = {}
    stack = [key]
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed[name] = defs[name]
        stack += [ref.rsplit("/", 1)[-1] for ref in _refs(defs[name])]
    entry = needed.pop(key)
    assert isinstance(entry, dict)  # a definition of the bundled schema is an object
    root = dict(entry)
    if dialect:
        root = {"$schema": dialect, **root}
    if needed:
        root["$defs"] = needed
    return root


def _refs(node: JsonValue) -> list[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        found = [ref] if isinstance(ref, str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []
