"""Train env steps/s of one manifest with 1, 2, ... worker processes (``training.num_workers``).

    python bench/scaling.py [--manifest dqn_cartpole] [--workers 1 2] [--max-steps N]
                            [--repeat K] [--seed N]

Each run is a fresh process measured exactly as ``bench/peer.py`` measures ours (train steps
over training time, evaluation excluded; peak memory as the summed PSS of the process tree).
Every run of a round gets the same run seed (``--seed``, else one drawn per round and
printed): the runs are then bit-identical whatever the worker count, so only the speed may
differ. (Unseeded runs would each draw their own seed, and with it their own mutations,
whose network sizes, batch sizes and learn steps change the cost of a step.) Prints
the load average with every run: on a shared machine the figures are only as good as it is
quiet.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer  # noqa: E402  (bench/peer.py, run as a script beside this one)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default="dqn_cartpole")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=None,
                        help="run seed of every run (default: one drawn per round)")
    args = parser.parse_args(argv)
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": str(peer.REPO)}
    manifest = peer._manifest_path(args.manifest)
    print(f"{args.manifest} ({manifest})"
          + (f", max_steps={args.max_steps}" if args.max_steps else ""))
    print(f"  {'workers':>7} {'steps/s':>10} {'peak MB':>8} {'wall s':>8}  load (1/5/15 min)")
    for attempt in range(args.repeat):
        base = None
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
        print(f"  seed {seed}")
        for workers in args.workers:
            result = peer._measure(sys.executable, manifest, args.max_steps, env,
                                   [f"training.num_workers={workers}"], seed=seed)
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            if "error" in result:
                print(f"  {workers:>7} FAILED: {result['error']}")
                continue
            rate = result["train_steps_per_second"]
            base = base or rate
            print(f"  {workers:>7} {peer._fmt(rate, '10.0f')} "
                  f"{peer._fmt(result['peak_rss_mb'], '8.0f')} "
                  f"{peer._fmt(result['wall_seconds'], '8.1f')}  {load}"
                  + (f"  ({rate / base:.2f}x)" if base and rate else ""))
        if attempt + 1 < args.repeat:
            print("  --")
    return 0


if __name__ == "__main__":
    sys.exit(main())
