"""``agilerl validate MANIFEST...``: check manifests without building anything.

Exit status: 0 when every manifest is valid, 1 when any is invalid, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agilerl.core.manifest_errors import ManifestReport

NAME = "validate"
HELP = "check training manifests (YAML or JSON) and report every problem with its line"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifests", nargs="+", metavar="MANIFEST",
                        help="manifest file(s), or folders (every .yaml/.yml/.json inside)")
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only problems (no line for valid manifests, no warnings)")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")


def run(args: argparse.Namespace) -> int:
    from agilerl.models.validation import validate_path

    reports = [validate_path(path) for path in _expand(args.manifests)]
    failed = [r for r in reports if r.errors or (args.strict and r.warnings)]
    if args.json:
        payload = {
            "valid": not failed,
            "results": [
                {
                    "file": r.source,
                    "valid": not (r.errors or (args.strict and r.warnings)),
                    "errors": [i.to_dict() for i in r.errors],
                    "warnings": [i.to_dict() for i in r.warnings],
                }
                for r in reports
            ],
        }
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_human(reports, args)
    return 1 if failed else 0


def _expand(paths: list[str]) -> list[str]:
    """Folders stand for the manifests below them (sorted)."""
    out: list[str] = []
    for path in paths:
        folder = Path(path)
        if folder.is_dir():
            found = sorted(str(p) for p in folder.rglob("*")
                           if p.suffix in (".yaml", ".yml", ".json") and p.is_file())
            out += found or [path]
        else:
            out.append(path)
    return out


def _print_human(reports: list[ManifestReport], args: argparse.Namespace) -> None:
    from agilerl.core.manifest_errors import in_file_order

    out = sys.stdout
    for report in reports:
        bad = report.errors or (args.strict and report.warnings)
        if bad:
            count = len(report.errors) + (len(report.warnings) if args.strict else 0)
            noun = "problem" if count == 1 else "problems"
            out.write(f"{report.source}: invalid ({count} {noun})\n")
        elif not args.quiet:
            out.write(f"{report.source}: ok\n")
        for issue in sorted(report.errors, key=in_file_order):
            out.write(f"  error: {issue}\n")
        if args.strict or not args.quiet:
            label = "error" if args.strict else "warning"
            for issue in report.warnings:
                out.write(f"  {label}: {issue}\n")
    if len(reports) > 1 and not args.quiet:
        invalid = sum(1 for r in reports if r.errors or (args.strict and r.warnings))
        out.write(f"{len(reports) - invalid} valid, {invalid} invalid\n")
