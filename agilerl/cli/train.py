"""``agilerl train MANIFEST [PATH=VALUE ...] [options]`` (also ``python -m agilerl.train``).

Trains the population a manifest describes, on this machine, with a live progress display
and a summary at the end. Options follow the reference library's ``python -m agilerl.train``;
``--seed`` and dotted overrides (``training.pop_size=8 algorithm.lr=3e-4``, values parsed as
YAML) are additions. Overrides are applied to the file's contents before validation, so an
override is checked exactly like the file and problems with it are reported naming it.

Every run writes a run folder (``--run-dir``, default ``runs/{env}-{algo}-{timestamp}``)
holding ``manifest.yaml`` (the resolved manifest), ``metrics.csv`` (one row per generation),
``checkpoints/`` (unless ``--checkpoint-path`` puts them elsewhere) and ``elite.pt`` (with
``--save-elite``, unless ``--elite-path``).

Ctrl-C (SIGINT) or SIGTERM (how job schedulers such as the Arena server stop a run) finishes
the member being trained, writes a checkpoint, prints where and how to resume, and exits
with status 130 (SIGINT) or 143 (SIGTERM); a second signal aborts at once (the last
checkpoint stays valid). Before training starts, either signal stops the command at once
with the same status.

Exit status: 0 trained; 1 the manifest (or an override) is invalid, or asks for something
this version cannot train (an algorithm, an encoder); 2 the run cannot start as asked: usage
error (bad option, missing file, malformed override), unusable checkpoint (missing, damaged,
or written for another environment, algorithm or network), device not available, an
environment (id, entrypoint, wrapper) that cannot be built, missing optional dependency,
W&B without an API key, a path that cannot be written; 3 internal error (a bug in agilerl:
please report it); 4 the environment failed while training: a worker process died, or the
environment's own code (an entrypoint or wrapper file) raised (the last checkpoint stays
valid), or a process training members (``--workers``) died or raised, or a Ray node holding
members was lost and nothing could take them over (the message names the member and
generation, and the node); 5 out of disk space (the file being written is named) or out of
memory (a network too large for this machine: the field is named), nothing already saved is
lost; 130 interrupted by SIGINT; 143 stopped by SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar, overload

from agilerl.cli.failure_context import resume_command, user_code_frame
from agilerl.cli.train_exit import (
    EXIT_ENV_FAILED,
    EXIT_INTERNAL,
    EXIT_INVALID,
    EXIT_NO_RESOURCES,
    EXIT_OK,
    EXIT_USAGE,
    report_error,
)

if TYPE_CHECKING:  # pragma: no cover
    from types import FrameType

    from accelerate import Accelerator

    from agilerl.models import TrainingManifest
    from agilerl.training.overrides import Override
    from agilerl.training.trainer import LocalTrainer

_Namespace = TypeVar("_Namespace")

NAME = "train"
HELP = "train a population locally from a training manifest"

def _exit_status(signum: int) -> int:
    """The shell convention for "stopped by signal N": 128 + N (130 SIGINT, 143 SIGTERM)."""
    return 128 + int(signum)


class _Stopped(KeyboardInterrupt):
    """SIGTERM before training started: stop like Ctrl-C does (nothing to save yet)."""

    signum = signal.SIGTERM


def _default_device() -> str:
    # Only consult torch when it is already imported (parsing --help must stay instant);
    # the trainer resolves "auto" otherwise.
    return "auto"


class _IntermixedParser(argparse.ArgumentParser):
    """Lets ``PATH=VALUE`` overrides appear before or after options.

    Plain argparse assigns every positional at the first run of positionals, so
    ``MANIFEST --seed 1 training.pop_size=8`` would reject the override; intermixed parsing
    collects positionals from anywhere. The guard keeps the intermixed parser's own inner
    calls to ``parse_known_args`` on the plain path.
    """

    _intermixing = False

    @overload
    def parse_known_args(self, args: Iterable[str] | None = None, namespace: None = None
                         ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _Namespace
                         ) -> tuple[_Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _Namespace) -> tuple[_Namespace, list[str]]: ...

    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: _Namespace | None = None
                         ) -> tuple[argparse.Namespace | _Namespace, list[str]]:
        if self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


class _DefaultLogDir(str):
    """The value ``--tensorboard-log-dir`` has when not given: the reference's default name
    (so ``parse_args`` answers as the reference's does), but the logs go to the run folder."""


TENSORBOARD_IN_RUN_FOLDER = _DefaultLogDir("tensorboard_logs")


def intermixed(parser: argparse.ArgumentParser) -> None:
    """Let ``PATH=VALUE`` overrides come before or after options on ``parser`` (a
    subparser built by main.py; see :class:`_IntermixedParser`)."""
    if type(parser) is argparse.ArgumentParser:
        parser.__class__ = _IntermixedParser


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum`` (else a usage error)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The reference's options, plus ``--seed``, ``--run-dir`` and dotted overrides."""
    intermixed(parser)
    parser.add_argument("manifest", type=Path, help="training manifest (YAML or JSON)")
    parser.add_argument(
        "overrides", nargs="*", metavar="PATH=VALUE",
        help="override manifest values, e.g. training.pop_size=8 algorithm.lr=3e-4",
    )
    parser.add_argument("-d", "--device", default=_default_device(),
                        help="torch device (default: cuda when available, else cpu)")
    parser.add_argument("--use-accelerator", action="store_true",
                        help="create a HuggingFace Accelerator (needs the 'accelerate' package)")
    parser.add_argument("--wb", action="store_true", help="log to Weights & Biases")
    parser.add_argument("--wandb-api-key", default=None, help="W&B API key")
    parser.add_argument("--checkpoint-steps", type=_count(0), default=None,
                        help="checkpoint every N env steps (default: training.checkpoint_steps)")
    parser.add_argument("--checkpoint-path", default=None,
                        help="folder for checkpoints (default: training.checkpoint_path, "
                             "else RUN_DIR/checkpoints)")
    parser.add_argument("--overwrite-checkpoints", action="store_true", default=False,
                        help="keep only the latest checkpoint (default: "
                             "training.overwrite_checkpoints, else false)")
    parser.add_argument("--resume-from-checkpoint", default=None,
                        help="checkpoint folder (or a folder of checkpoints: the latest is used) "
                             "to continue exactly from")
    parser.add_argument("--save-elite", action="store_true", help="save the best agent")
    parser.add_argument("--elite-path", default=None,
                        help="where to save the elite (default RUN_DIR/elite.pt); an "
                             "existing folder holds it as FOLDER/elite.pt")
    parser.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=False,
                        help="log to TensorBoard")
    parser.add_argument("--tensorboard-log-dir", default=TENSORBOARD_IN_RUN_FOLDER,
                        help="TensorBoard log folder (default RUN_DIR/tensorboard; view the "
                             "logs with 'tensorboard --logdir', from 'pip install tensorboard')")
    parser.add_argument("--verbose", action=_VerboseAction, default=True,
                        help="progress, one line per generation and a summary (the default); "
                             "written out, also each generation's per-agent table; "
                             "--no-verbose prints only problems")
    parser.set_defaults(generation_tables=False)
    parser.add_argument("--seed", type=_count(0), default=None,
                        help="seed everything: the same seed gives the same run on CPU")
    parser.add_argument("--torch-threads", type=_count(1), default=1,
                        help="torch threads on CPU (default 1: fastest for small networks)")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="run folder (default runs/{env}-{algo}-{timestamp})")
    parser.add_argument("--workers", type=_count(0), default=None, metavar="N",
                        help="train and evaluate members in N workers (this process and N-1 "
                             "worker processes); 0: one per "
                             "usable core, or this process where workers cannot help (the "
                             "default of training.num_workers); 1: this process; results do "
                             "not change")
    parser.add_argument("--backend", choices=("local", "ray"), default=None,
                        help="where members live (default training.backend): this machine, "
                             "or a Ray cluster (pip install 'agilerl[ray]')")
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help="Ray cluster for --backend ray: ray://HOST:PORT, HOST:PORT or "
                             "auto (default training.ray_address; none starts a local Ray)")


class _VerboseAction(argparse.BooleanOptionalAction):
    """``--verbose``/``--no-verbose``; ``args.verbose`` stays a bool (True by default, as in
    the reference), and ``args.generation_tables`` records that ``--verbose`` was written."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[object] | None, option_string: str | None = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        namespace.generation_tables = bool(namespace.verbose)


def verbosity(args: argparse.Namespace) -> int:
    """``train(verbose=...)`` for the parsed flags: 0 silent, 1 one line per generation
    (the default), 2 also the per-agent table (``--verbose`` written out)."""
    if not args.verbose:
        return 0
    return 2 if getattr(args, "generation_tables", False) else 1


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM raises :class:`_Stopped` (in this process only: env worker processes ignore
    it, and any other forked child gets the default action). The trainer installs its own
    clean-stop handler while it trains."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pid = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != pid:  # a forked worker: behave as if no handler were installed
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise _Stopped()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Warnings print as ``agilerl train: warning: ...``: one line each, with no source
    line of agilerl's own code beneath (which would read like part of a traceback), and
    once: the trainer re-validates its specs, which repeats a manifest note without its
    file position."""
    import warnings

    from agilerl.models import ManifestWarning

    shown: list[str] = []

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        text = str(message)
        if any(seen == text or seen.endswith(f": {text}") for seen in shown):
            return
        shown.append(text)
        report_error(f"warning: {text}")

    with warnings.catch_warnings():
        warnings.showwarning = show
        warnings.simplefilter("always", ManifestWarning)
        yield


def run(args: argparse.Namespace) -> int:
    """Validate, build, train; report errors as messages with an exit status."""
    from agilerl.cli import ray_guard

    if ray_guard.wanted(args):  # Ray may end its driver without a word: watch from outside
        return ray_guard.run_guarded(args)
    try:
        with _sigterm_stops(), _warnings_as_lines():
            return _run(args)
    except KeyboardInterrupt as exc:
        # Ctrl-C or SIGTERM outside the trainer's clean stop, or a second one during it
        # (TrainingAborted, whose message says the last checkpoint stays valid).
        signum = int(getattr(exc, "signum", signal.SIGINT))
        detail = f": {exc}" if str(exc) else ""
        report_error(f"stopped by {signal.Signals(signum).name}{detail}")
        return _exit_status(signum)


def _run(args: argparse.Namespace) -> int:
    from agilerl.training.overrides import OverrideError, parse_overrides

    try:
        overrides = parse_overrides(args.overrides)
    except OverrideError as exc:
        report_error(str(exc))
        return EXIT_USAGE
    from agilerl.input_files import file_problem

    problem = file_problem(args.manifest)
    if problem is not None:
        report_error(f"manifest {args.manifest} {problem}")
        return EXIT_USAGE
    return _run_checked(args, overrides)


def _say(args: argparse.Namespace, message: str) -> None:
    """A progress line on stdout, flushed at once: a job's log shows it while the heavy
    libraries (torch, the environments) are still loading."""
    if args.verbose:
        print(message, flush=True)


def _run_checked(args: argparse.Namespace, overrides: Sequence[Override]) -> int:
    # The first line comes before any heavy import, so a job's log starts within a fraction
    # of a second of the process (validation itself imports neither torch nor gymnasium).
    _say(args, f"Validating {args.manifest} ...")
    from agilerl.models import ManifestError
    from agilerl.training.manifest_input import load_manifest
    from agilerl.training.overrides import OverrideError

    try:
        manifest = load_manifest(args.manifest, overrides)
    except ManifestError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    except OverrideError as exc:  # a path through a scalar: the command line is wrong
        report_error(str(exc))
        return EXIT_USAGE
    try:  # a device that is not there is named before anything is announced or built
        from agilerl.training.build import resolve_device

        args.device = resolve_device(args.device)
    except Exception as exc:
        return _report(exc)
    env = manifest.environment
    env_name = env.get("name") if isinstance(env, dict) else getattr(env, "name", None)
    assert manifest.training is not None  # a loaded manifest's section (defaults: {})
    _say(args, f"Building a population of {manifest.training.pop_size} "
               f"{type(manifest.algorithm).algo_name} agents on {env_name or 'a custom env'} ...")
    built = _build(args, manifest)
    return built if isinstance(built, int) else _train(args, built)


def _build(args: argparse.Namespace, manifest: TrainingManifest) -> LocalTrainer | int:
    """The trainer for a validated manifest, or an exit status after reporting why not."""
    from agilerl.training.trainer import LocalTrainer

    try:
        accelerator = _accelerator() if args.use_accelerator else None
        return LocalTrainer.from_manifest(
            manifest=manifest,
            resume_from_checkpoint=args.resume_from_checkpoint,
            device=args.device,
            accelerator=accelerator,
            seed=args.seed,
        )
    except Exception as exc:
        return _report(exc)


def _train(args: argparse.Namespace, trainer: LocalTrainer) -> int:
    from agilerl.envs import EnvWorkerError
    from agilerl.population.backend import MemberFailure
    from agilerl.training.trainer import TrainingInterrupted

    try:
        trainer.train(
            wb=args.wb,
            wandb_api_key=args.wandb_api_key,
            tensorboard=args.tensorboard,
            tensorboard_log_dir=(None if args.tensorboard_log_dir is TENSORBOARD_IN_RUN_FOLDER
                                 else args.tensorboard_log_dir),
            checkpoint_steps=args.checkpoint_steps,
            checkpoint_path=args.checkpoint_path,
            # Flag absent: the manifest's training.overwrite_checkpoints decides.
            overwrite_checkpoints=True if args.overwrite_checkpoints else None,
            save_elite=args.save_elite,
            elite_path=args.elite_path,
            verbose=verbosity(args),
            run_dir=args.run_dir if args.run_dir is not None else "auto",
            torch_threads=args.torch_threads,
            source=str(args.manifest),
            num_workers=args.workers,
            backend=args.backend,
            ray_address=args.ray_address,
        )
    except TrainingInterrupted as exc:
        report_error(f"stopped by {signal.Signals(exc.signum).name}; checkpoint written to "
               f"{exc.checkpoint}\n"
               f"  resume with: {resume_command(args, trainer, exc.checkpoint)}")
        return _exit_status(exc.signum)
    except EnvWorkerError as exc:
        return _env_failed(args, trainer, str(exc))
    except MemberFailure as exc:
        return _env_failed(args, trainer, f"{exc}{_last_lines(exc.worker_traceback)}")
    except Exception as exc:
        from agilerl.core.errors import resource_shortage

        shortage = resource_shortage(exc)
        if shortage is not None:
            report_error(f"training stopped: {shortage}\n  {_last_checkpoint_note(args, trainer)}")
            return EXIT_NO_RESOURCES
        where = user_code_frame(exc)
        if where is not None and _failure_status(exc) is None:
            return _env_failed(args, trainer, f"the environment's code raised "
                               f"{type(exc).__name__}: {exc} ({where})")
        return _report(exc)
    finally:
        trainer.close()  # env workers stop only now, after any checkpoint was written
    return EXIT_OK


def _env_failed(args: argparse.Namespace, trainer: LocalTrainer, what: str) -> int:
    """Report an environment that failed while training, and the checkpoint to go back to."""
    report_error(f"training stopped: {what}\n  {_last_checkpoint_note(args, trainer)}")
    return EXIT_ENV_FAILED


def _last_checkpoint_note(args: argparse.Namespace, trainer: LocalTrainer) -> str:
    last = trainer.last_checkpoint
    return (f"the last checkpoint, {last}, is intact; resume with: "
            f"{resume_command(args, trainer, last)}" if last is not None else
            "no checkpoint had been written in this run")


def _last_lines(trace: str | None, count: int = 3) -> str:
    """The innermost frame and error line of a worker's traceback, indented."""
    if not trace:
        return ""
    lines = [line for line in trace.strip().splitlines() if line.strip()]
    return "".join(f"\n    {line.strip()}" for line in lines[-count:])


def _report(exc: Exception) -> int:
    """Report a failure the user can act on and return its exit status; re-raise a bug
    (``main`` then reports it as an internal error)."""
    status = _failure_status(exc)
    if status is None:
        raise exc
    from agilerl.core.errors import missing_extra, resource_shortage
    from agilerl.models import ManifestError

    shortage = resource_shortage(exc)
    if isinstance(exc, ManifestError):
        print(str(exc), file=sys.stderr)  # its own header names the file
    elif shortage is not None:
        report_error(shortage)
    elif isinstance(exc, OSError) and exc.filename is not None:
        report_error(f"cannot use {exc.filename}: {exc.strerror or exc} (check the paths given to "
               "--run-dir, --checkpoint-path, --elite-path, --tensorboard-log-dir)")
    else:
        report_error(str(missing_extra(exc, "this run") or exc))
    return status


def _failure_status(exc: BaseException) -> int | None:
    """The documented exit status of a failure that is not a bug in agilerl, else None.

    One table for everything ``train`` can meet: invalid or untrainable manifests (1);
    what the user can fix outside the manifest (2): checkpoints, devices, environments that
    cannot be built, missing optional packages, W&B without a key, paths that cannot be
    written; env workers that die while training (4, handled in :func:`_train`); the disk
    or the memory running out (5).
    """
    from agilerl.checkpoint import CheckpointError
    from agilerl.core.errors import (
        TrainingSetupError,
        UnsupportedAlgorithmError,
        missing_extra,
        resource_shortage,
    )
    from agilerl.logging import WandbSetupError
    from agilerl.models import ManifestError

    if isinstance(exc, ManifestError | UnsupportedAlgorithmError):
        return EXIT_INVALID
    if resource_shortage(exc) is not None:
        return EXIT_NO_RESOURCES
    if isinstance(exc, TrainingSetupError):
        return int(exc.exit_code)
    if isinstance(exc, CheckpointError | WandbSetupError | _UsageError):
        return EXIT_USAGE
    if missing_extra(exc, "this run") is not None:
        return EXIT_USAGE
    if isinstance(exc, OSError) and exc.filename is not None:
        return EXIT_USAGE  # a path the user chose: a file where a folder goes, no permission
    return None


class _UsageError(Exception):
    pass


def _accelerator() -> Accelerator:
    try:
        from accelerate import Accelerator
    except ImportError:
        raise _UsageError(
            "--use-accelerator needs the 'accelerate' package: pip install 'agilerl[llm]' "
            "(or pip install accelerate)"
        ) from None
    return Accelerator()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse ``python -m agilerl.train`` arguments (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = _IntermixedParser(prog="python -m agilerl.train", description=HELP)
    add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``python -m agilerl.train``: the same command without the ``agilerl`` prefix."""
    return run_reported(parse_args(argv))


def run_reported(args: argparse.Namespace) -> int:
    """:func:`run`, with a bug reported as an internal error (never a traceback)."""
    try:
        return run(args)
    except Exception as exc:  # last line of defence: a message, never a traceback
        report_error(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_INTERNAL
