"""``agilerl show MANIFEST [PATH=VALUE ...]``: print the manifest as it will be used, defaults
filled in and overrides applied (the same overrides ``agilerl train`` takes)."""

from __future__ import annotations

import argparse
import json
import sys

NAME = "show"
HELP = ("print a manifest resolved with every default filled in and overrides applied "
        "(YAML, or JSON with --json)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from agilerl.cli.train import intermixed

    intermixed(parser)
    parser.add_argument("manifest", metavar="MANIFEST", help="manifest file")
    parser.add_argument(
        "overrides", nargs="*", metavar="PATH=VALUE",
        help="override manifest values as agilerl train does, e.g. training.pop_size=8")
    parser.add_argument("--json", action="store_true", help="print JSON instead of YAML")


def run(args: argparse.Namespace) -> int:
    resolved = _resolved(args) if args.overrides else _resolved_file(args.manifest)
    if isinstance(resolved, int):
        return resolved
    if args.json:
        json.dump(resolved, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        import yaml

        yaml.safe_dump(resolved, sys.stdout, sort_keys=False, default_flow_style=False)
    return 0


def _resolved_file(path: str) -> dict[str, object] | int:
    from agilerl.models.manifest import validate_path_keeping_manifest

    report = validate_path_keeping_manifest(path)
    for issue in report.warnings:
        print(f"warning: {issue}", file=sys.stderr)
    if report.errors:
        print(f"{report.source}: invalid", file=sys.stderr)
        for issue in report.errors:
            print(f"  error: {issue}", file=sys.stderr)
        return 1
    return dict(report.resolved or {})


def _resolved(args: argparse.Namespace) -> dict[str, object] | int:
    """The manifest with overrides applied, validated as ``agilerl train`` does; an
    exit status (1 invalid, 2 usage) when it cannot be."""
    import warnings

    from agilerl.models import ManifestError
    from agilerl.training.manifest_input import load_manifest
    from agilerl.training.overrides import OverrideError, parse_overrides

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            manifest = load_manifest(args.manifest, parse_overrides(args.overrides))
    except OverrideError as exc:
        print(f"agilerl show: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print(f"agilerl show: manifest {args.manifest} not found", file=sys.stderr)
        return 2
    except ManifestError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    return dict(manifest.to_json_dict())
