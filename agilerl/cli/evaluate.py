"""``agilerl evaluate RUN_OR_ELITE [environment.PATH=VALUE ...] [options]``: play greedy
episodes with a trained agent and print their returns.

``RUN_OR_ELITE`` is a run folder (``agilerl train --run-dir``), a checkpoint folder, a
folder of checkpoints, or an agent file (``elite.pt``); see
:mod:`agilerl.evaluation.source` for which agent each gives. The environment is the run's
(its manifest's ``environment`` section), changed by ``environment.*`` overrides written
as for ``agilerl train``; a bare agent file without a run beside it needs
``environment.name=ID`` or ``--manifest``.

Exit status: 0 evaluated; 2 the agent or the environment cannot be used as asked (a
missing path, a folder without a checkpoint, a render mode the environment does not
support, ``--record`` without a video writer, an environment that does not fit the
agent); 3 internal error; 4 the environment failed while playing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject
    from agilerl.evaluation import Episode, Source, Summary
    from agilerl.evaluation.video import VideoWriter

NAME = "evaluate"
HELP = ("play greedy episodes with a trained agent (a run folder, a checkpoint or an "
        "elite.pt) and print their returns")

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ENV_FAILED = 4
RENDER_MODES = ("human", "rgb_array")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from agilerl.cli.train import _count, intermixed

    intermixed(parser)
    parser.add_argument("source", metavar="RUN_OR_ELITE",
                        help="run folder, checkpoint folder, or agent file (elite.pt)")
    parser.add_argument("overrides", nargs="*", metavar="environment.PATH=VALUE",
                        help="change the run's environment, e.g. environment.config.continuous="
                             "true (written as for agilerl train)")
    parser.add_argument("--episodes", type=_count(1), default=10, metavar="N",
                        help="episodes to play (default 10)")
    parser.add_argument("--render", choices=RENDER_MODES, default=None,
                        help="render the episodes: human (a window) or rgb_array (frames, "
                             "for --record)")
    parser.add_argument("--record", type=Path, default=None, metavar="VIDEO.mp4",
                        help="write the episodes to a video (renders rgb_array; needs "
                             "pip install 'agilerl[video]' or OpenCV)")
    parser.add_argument("--member", type=_count(0), default=None, metavar="K",
                        help="a checkpoint's member K instead of its elite")
    parser.add_argument("--seed", type=_count(0), default=0,
                        help="seed of the first episode's reset (default 0)")
    parser.add_argument("--max-steps", type=_count(1), default=None, metavar="N",
                        help="stop an episode after N steps (bandits: pulls per episode, "
                             "default 100)")
    parser.add_argument("--manifest", type=Path, default=None,
                        help="take the environment from this manifest instead of the run's")
    parser.add_argument("-d", "--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (episodes and statistics) instead of text")


def _error(message: str) -> int:
    print(f"agilerl evaluate: {message}", file=sys.stderr)
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    from agilerl.evaluation import SourceError
    from agilerl.evaluation.video import VideoError

    render = _render_mode(args)
    if isinstance(render, int):
        return render
    try:
        from agilerl.training.build import resolve_device

        device = resolve_device(args.device)
    except Exception as exc:  # noqa: BLE001 - a device that is not there, named
        return _error(str(exc))
    try:
        return _evaluate(args, render, device)
    except (SourceError, VideoError) as exc:
        return _error(str(exc))


def _render_mode(args: argparse.Namespace) -> str | None | int:
    """The render mode asked for, or an exit status when the options disagree."""
    if args.record is None:
        return args.render
    if args.render == "human":
        return _error("--record needs frames (render mode rgb_array); drop --render human")
    return "rgb_array"


def _evaluate(args: argparse.Namespace, render: str | None, device: str) -> int:
    from agilerl.evaluation import load_source
    from agilerl.evaluation.environment import check_fits, env_spec, kind_of, make_env
    from agilerl.evaluation.video import open_video

    environment = _environment(args)
    if isinstance(environment, int):
        return environment
    source = load_source(args.source, member=args.member, device=device)
    section, base_dir = environment(source)
    spec = env_spec(source.agent, section, base_dir)
    kind = kind_of(spec)
    video = open_video(args.record, fps=30) if args.record is not None else None
    env = make_env(spec, render_mode=render)
    try:
        check_fits(source.agent, env, kind)
        return _play(args, source, env, kind, spec, video)
    finally:
        env.close()


def _environment(
    args: argparse.Namespace,
) -> Callable[[Source], tuple[Mapping[str, object] | None, Path | None]] | int:
    """``source -> (environment section, base folder)`` with the overrides applied, or an
    exit status for overrides or a manifest that cannot be used."""
    from agilerl.training.overrides import OverrideError, apply_overrides, parse_overrides

    try:
        overrides = parse_overrides(args.overrides)
    except OverrideError as exc:
        return _error(str(exc))
    outside = [o.text for o in overrides if o.path[0] != "environment"]
    if outside:
        return _error(f"override {outside[0]!r}: evaluate uses only the environment section "
                      "(environment.PATH=VALUE)")
    given = _manifest_file(args.manifest) if args.manifest is not None else None
    if isinstance(given, int):
        return given

    def resolve(source: Source) -> tuple[Mapping[str, object] | None, Path | None]:
        data = given if given is not None else (source.manifest or {})
        base = (args.manifest if given is not None else source.manifest_path)
        manifest = apply_overrides({"environment": data.get("environment") or {}}, overrides)
        # the section as the manifest file (and the overrides) give it: env_spec refuses
        # one that is not a mapping
        section = cast("Mapping[str, object] | None", manifest["environment"])
        return section, (base.parent if base is not None else None)

    return resolve


def _manifest_file(path: Path) -> JsonObject | int:
    from agilerl.input_files import file_problem
    from agilerl.models import ManifestError
    from agilerl.models.loading import load_file

    problem = file_problem(path)
    if problem is not None:
        return _error(f"manifest {path} {problem}")
    try:
        data = load_file(path).data
    except ManifestError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(data, dict):
        return _error(f"manifest {path} is not a mapping of sections")
    return data


def _play(args: argparse.Namespace, source: Source, env: object, kind: str, spec: object,
          video: VideoWriter | None) -> int:
    from agilerl.evaluation import play, summarise

    name = getattr(spec, "name", None) or getattr(spec, "entrypoint", None) or "the environment"
    if not args.json:
        print(f"Evaluating the {source.description} on {name}: {args.episodes} greedy "
              f"episode{'s' if args.episodes != 1 else ''}", flush=True)
    if video is not None:
        video.fps = float((getattr(env, "metadata", None) or {}).get("render_fps") or 30)
    counter = iter(range(1, args.episodes + 1))
    try:
        episodes = play(
            source.agent, env, kind, episodes=args.episodes, seed=args.seed,
            max_steps=args.max_steps, pulls=args.max_steps or 100,
            on_frame=(lambda e: video.add(e.render())) if video is not None else None,
            on_episode=None if args.json else (lambda ep: _print_episode(next(counter), ep)),
        )
    except Exception as exc:
        from agilerl.evaluation.video import VideoError

        if isinstance(exc, VideoError):
            raise
        print(f"agilerl evaluate: the environment failed while playing: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ENV_FAILED
    finally:
        if video is not None:
            video.close()
    summary = summarise(episodes)
    if args.json:
        _print_json(source, name, episodes, summary, args.record)
    else:
        count = f"{len(episodes)} episode{'s' if len(episodes) != 1 else ''}"
        print(f"mean return {summary.mean_return:.2f} ± {summary.std_return:.2f} (std over "
              f"{count}), mean length {summary.mean_length:.1f}")
        if video is not None:
            print(f"video ({video.frames} frames) written to {args.record}")
    return EXIT_OK


def _print_episode(number: int, episode: Episode) -> None:
    agents = "".join(f", {a} {r:.2f}" for a, r in episode.agent_returns.items())
    print(f"episode {number}: return {episode.total:.2f}, length {episode.length}{agents}",
          flush=True)


def _print_json(source: Source, env_name: str, episodes: list[Episode], summary: Summary,
                record: Path | None) -> None:
    payload = {
        "source": source.description, "algorithm": source.agent.algo,
        "member": source.member, "environment": env_name,
        "episodes": [{"return": e.total, "length": e.length,
                      **({"agent_returns": e.agent_returns} if e.agent_returns else {})}
                     for e in episodes],
        "mean_return": summary.mean_return, "std_return": summary.std_return,
        "mean_length": summary.mean_length,
        "video": str(record) if record is not None else None,
    }
    json.dump(payload, sys.stdout, indent=2)
    sys.stdout.write("\n")
