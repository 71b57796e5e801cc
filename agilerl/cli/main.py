"""Entry point of the ``agilerl`` console script.

Each subcommand lives in its own module listed in :data:`SUBCOMMANDS`; a module provides
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported
only to build the parser, so they must keep their own heavy imports inside ``run``.
Adding a subcommand is one line here.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from agilerl.version import version_line

SUBCOMMANDS: list[str] = [
    "agilerl.cli.validate",
    "agilerl.cli.show",
    "agilerl.cli.schema",
    "agilerl.cli.train",
    "agilerl.cli.evaluate",
    "agilerl.cli.plot",
    "agilerl.cli.llm",
    "agilerl.cli.completion",
    "agilerl.cli.dashboard",
]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    """The top-level parser and the command modules by name."""
    parser = argparse.ArgumentParser(
        prog="agilerl",
        description="Validate, inspect and run agilerl training manifests.",
    )
    parser.add_argument("--version", action="version", version=version_line("agilerl"))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, ModuleType] = {}
    for module_name in SUBCOMMANDS:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # one broken command must not take the others down
            module = _unavailable(module_name, exc)
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        commands[module.NAME] = module
    return parser, commands


def _unavailable(module_name: str, exc: Exception) -> ModuleType:
    """A command whose module failed to import: it reports why when invoked."""
    name = module_name.rsplit(".", 1)[-1]
    module = ModuleType(module_name)
    module.NAME = name  # type: ignore[attr-defined]
    module.HELP = f"(unavailable: {type(exc).__name__})"  # type: ignore[attr-defined]

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER)

    def run(args: argparse.Namespace) -> int:
        print(f"agilerl {name}: this command cannot be loaded: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return EXIT_INTERNAL

    module.add_arguments = add_arguments  # type: ignore[attr-defined]
    module.run = run  # type: ignore[attr-defined]
    return module


def command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each command's parser, by name (the subparsers of :func:`build_parser`'s parser)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status (never raises to the user)."""
    parser, commands = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # a bad option after a command: that command's usage, not the top level's
        command_parser = command_parsers(parser).get(args.command, parser)
        command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(commands[args.command].run(args))
    except KeyboardInterrupt:
        print("agilerl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # the last line of defence: a message, never a traceback
        print(f"agilerl {args.command}: internal error: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
