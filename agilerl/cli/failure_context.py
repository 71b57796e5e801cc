"""What a failed training run's message points at: the user's own code that raised, and
the command that resumes the run from its last checkpoint."""

from __future__ import annotations

import argparse
import shlex
import sysconfig
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.training.trainer import LocalTrainer


def user_code_frame(exc: BaseException) -> str | None:
    """``file:line`` where ``exc`` was raised when that is user code (an environment
    entrypoint or wrapper file), not agilerl, the standard library or an installed package;
    else None."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    named = Path(frames[-1].filename)
    if not named.is_absolute() or not named.is_file():
        # Python names a user's file by its absolute path; compiled (Cython) library code
        # names a source file relative to where it was built, e.g. python/ray/...pxi.
        return None
    innermost = named.resolve()
    library = {Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
               if (p := sysconfig.get_paths().get(key))}
    library.add(Path(__file__).resolve().parents[1])  # the agilerl package
    if innermost.name.startswith("<") or any(innermost.is_relative_to(p) for p in library):
        return None
    return f"{innermost}:{frames[-1].lineno}"


#: ``train`` options repeated by a resume hint: (dest, flag); booleans are repeated as flags.
_REPEATED_OPTIONS = (
    ("device", "--device"), ("checkpoint_steps", "--checkpoint-steps"),
    ("checkpoint_path", "--checkpoint-path"), ("overwrite_checkpoints", "--overwrite-checkpoints"),
    ("save_elite", "--save-elite"), ("elite_path", "--elite-path"), ("wb", "--wb"),
    ("tensorboard", "--tensorboard"), ("tensorboard_log_dir", "--tensorboard-log-dir"),
    ("torch_threads", "--torch-threads"), ("use_accelerator", "--use-accelerator"),
    ("workers", "--workers"), ("backend", "--backend"), ("ray_address", "--ray-address"),
)
_OPTION_DEFAULTS = {"device": "auto", "torch_threads": 1}


def resume_command(args: argparse.Namespace, trainer: LocalTrainer | None,
                   checkpoint: object) -> str:
    """The command that continues this run: the same manifest, overrides, seed and options,
    the same run folder, from ``checkpoint``."""
    parts = ["agilerl", "train", str(args.manifest), *args.overrides]
    if args.seed is not None:
        parts += ["--seed", str(args.seed)]
    for dest, flag in _REPEATED_OPTIONS:
        value = getattr(args, dest, None)
        if value is None or value is False or value == _OPTION_DEFAULTS.get(dest):
            continue
        parts += [flag] if value is True else [flag, str(value)]
    if not args.verbose:
        parts.append("--no-verbose")
    run_dir = getattr(trainer, "last_run_dir", None) or args.run_dir
    if run_dir is not None:
        parts += ["--run-dir", str(run_dir)]
    parts += ["--resume-from-checkpoint", str(checkpoint)]
    return shlex.join(parts)
