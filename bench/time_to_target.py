"""Time for a manifest's population to reach a target evaluation return, over several seeds.

    python bench/time_to_target.py [--manifest dqn_cartpole] [--target 475]
                                   [--seeds 1 2 3] [--max-steps N] [--reference]
                                   [--workers N] [--set KEY=VALUE ...] [--history] [--full]

Each run is a fresh process measured exactly as ``bench/peer.py`` measures it (train env
steps not counting evaluation; seconds from the launch of the process). A run *reaches* the
target at the first evaluation of any member whose fitness is at least ``--target``; the
row gives the train steps (all members together) and seconds at that evaluation, the best
evaluation of the whole run, the best final fitness ``train()`` returned, the wall seconds
and the load average around the run. ``--max-steps`` overrides the manifest's
``training.max_steps`` (a budget per member, as in the manifest); ``--set`` changes any other
manifest value (``training.pop_size=2``, repeatable) for both libraries, so a suspect can be
measured without writing a manifest copy. With ``--reference`` the
reference library runs the same manifest once at the same budget (its RL trainer takes no
run seed). A run ends at its first evaluation reaching the target (its best evaluation is
then that one, and it has no final fitness), unless ``--full`` asks for the whole budget.
Runs go one after another, never concurrently. The load is printed with every
run: on a shared machine the seconds are only as good as it is quiet.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer  # noqa: E402  (bench/peer.py, run as a script beside this one)

HEADER = (f"  {'run':<14} {'reached':>7} {'steps@tgt':>10} {'s@tgt':>7} {'best eval':>9}"
          f" {'best final':>10} {'steps':>9} {'wall s':>7}  load before / after")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def row(label: str, result: dict, target: float, load_before: str) -> str:
    """One table row of a run's result (``peer._measure`` output)."""
    if "error" in result:
        return f"  {label:<14} FAILED: {result['error']}"
    reached = peer._reached(result, target)
    return (f"  {label:<14} {'yes' if reached else 'no':>7}"
            f" {peer._fmt(reached.get('steps'), '10d')} {peer._fmt(reached.get('seconds'), '7.1f')}"
            f" {peer._fmt(result.get('best_evaluation'), '9.1f')}"
            f" {peer._fmt(result.get('best_fitness'), '10.1f')}"
            f" {result['train_steps']:>9d} {peer._fmt(result['wall_seconds'], '7.1f')}"
            f"  {load_before} / {_load()}")


def history_lines(result: dict, members: int) -> list[str]:
    """The evaluations of a run, one line per generation (``members`` fitnesses each)."""
    history = result.get("history", [])
    lines = []
    for start in range(0, len(history), members):
        chunk = history[start:start + members]
        fitnesses = " ".join(f"{f:6.1f}" for _, _, f in chunk)
        lines.append(f"      steps {chunk[-1][0]:>9d}  {chunk[-1][1]:7.1f} s  {fitnesses}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default="dqn_cartpole")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1],
                        help="run seeds of ours, one run each")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="training.max_steps override (per member; both libraries)")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="ours only: training.num_workers")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="change a manifest value for both libraries (repeatable)")
    parser.add_argument("--reference", action="store_true",
                        help="also run the reference library once at the same budget")
    parser.add_argument("--full", action="store_true",
                        help="train the whole budget even after the target is reached")
    parser.add_argument("--history", action="store_true",
                        help="print every generation's evaluations under each run")
    args = parser.parse_args(argv)
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    ours_env = {**env, "PYTHONPATH": str(peer.REPO)}
    manifest = peer._manifest_path(args.manifest)
    import yaml

    members = int(yaml.safe_load(manifest.read_text())["training"].get("pop_size") or 1)
    for setting in args.set:  # the history groups evaluations by generation
        key, _, value = setting.partition("=")
        if key.strip() == "training.pop_size":
            members = int(value)
    stop_at = None if args.full else args.target
    settings = list(args.set)
    if args.workers is not None:
        settings.append(f"training.num_workers={args.workers}")
    print(f"{args.manifest} ({manifest}), target {args.target:g}"
          + (f", max_steps={args.max_steps} (override)" if args.max_steps else "")
          + "".join(f", {setting}" for setting in settings))
    print(HEADER)
    for seed in args.seeds:
        before = _load()
        result = peer._measure(sys.executable, manifest, args.max_steps, ours_env, settings,
                               seed=seed, stop_at=stop_at)
        print(row(f"ours seed {seed}", result, args.target, before), flush=True)
        if args.history and "error" not in result:
            print("\n".join(history_lines(result, members)), flush=True)
    if args.reference:
        python = peer._ensure_peer_venv()
        if python is None:
            print("  reference     skipped (see the message above)")
            return 0
        before = _load()
        result = peer._measure(python, manifest, args.max_steps, env, list(args.set),
                               stop_at=stop_at)
        print(row("reference", result, args.target, before), flush=True)
        if args.history and "error" not in result:
            print("\n".join(history_lines(result, members)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
