"""``agilerl llm tiny-model DIR``: write a tiny local LLM and toy datasets (no download).

Exit status: 0 when written, 1 when the folder cannot take them (not empty without
``--force``, a file, not writable) or the ``[llm]`` extra is missing, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "llm"
HELP = "LLM fine-tuning tools (tiny-model: a small local model and toy datasets, no download)"
TINY_HELP = ("write a tiny randomly initialised causal LM, its tokenizer and toy GRPO/DPO/SFT "
             "datasets to DIR, for trying the LLM manifests offline")


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="llm_command", metavar="SUBCOMMAND")
    tiny = sub.add_parser("tiny-model", help=TINY_HELP, description=TINY_HELP)
    tiny.add_argument("folder", type=Path, metavar="DIR", help="folder to write (new or empty)")
    tiny.add_argument("--seed", type=_seed, default=0,
                      help="seed of the weights and datasets (default 0; same seed, same files)")
    tiny.add_argument("--force", action="store_true",
                      help="write into DIR even when it is not empty (overwrites the files "
                           "this command writes, keeps the others)")


def _error(message: str) -> int:
    print(f"agilerl llm tiny-model: {message}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    """Dispatch ``agilerl llm SUBCOMMAND``."""
    if getattr(args, "llm_command", None) != "tiny-model":
        print("agilerl llm: choose a subcommand: tiny-model (agilerl llm tiny-model --help)",
              file=sys.stderr)
        return 2
    return _tiny_model(args)


def _tiny_model(args: argparse.Namespace) -> int:
    from agilerl.core.errors import MissingExtraError
    from agilerl.llm import require_llm_extra

    try:
        require_llm_extra("agilerl llm tiny-model")
    except MissingExtraError as exc:
        return _error(str(exc))
    from transformers.utils import logging as hf_logging

    from agilerl.llm.starter import StarterFolderError, walkthrough, write_starter

    hf_logging.disable_progress_bar()  # a bar for one small file is noise
    try:
        kit = write_starter(args.folder, seed=args.seed, force=args.force)
    except StarterFolderError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot write {args.folder}: {exc.strerror or exc}")
    print(f"Wrote a tiny causal LM and its tokenizer to {kit.model}\n"
          f"and toy datasets: {kit.countdown.name} (GRPO and the other RL algorithms), "
          f"{kit.preference.name} (DPO), {kit.sft.name} (SFT).\n"
          "Train a shipped manifest on them for two steps per member (from an agilerl "
          "checkout; see docs/llm.md):")
    for command in walkthrough(args.folder):
        print(f"  {command}")
    return 0
