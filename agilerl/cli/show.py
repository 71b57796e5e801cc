"""``agilerl show MANIFEST``: print the manifest as it will be used, defaults filled in."""

from __future__ import annotations

import argparse
import json
import sys

NAME = "show"
HELP = "print a manifest resolved with every default filled in (YAML, or JSON with --json)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", metavar="MANIFEST", help="manifest file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of YAML")


def run(args: argparse.Namespace) -> int:
    from agilerl.models.validation import validate_path

    report = validate_path(args.manifest, keep_manifest=True)
    for issue in report.warnings:
        print(f"warning: {issue}", file=sys.stderr)
    if report.errors:
        print(f"{report.source}: invalid", file=sys.stderr)
        for issue in report.errors:
            print(f"  error: {issue}", file=sys.stderr)
        return 1
    resolved = report.resolved
    if args.json:
        json.dump(resolved, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        import yaml

        yaml.safe_dump(resolved, sys.stdout, sort_keys=False, default_flow_style=False)
    return 0
