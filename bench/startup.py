"""Start-up, measured over repeated cold starts: how long a fresh process takes to get going.

    python bench/startup.py [--repeat 5] [--manifest dqn_cartpole] [--reference]

Each figure is the median (with its range) of ``--repeat`` fresh Python processes, run one
after another, each after the load left by the one before has settled (as
``bench/peer.py --repeat`` does):

* ``import torch``: the floor every trainer of either library pays before its first step;
* ``from agilerl import LocalTrainer``: the package's public import;
* ``import agilerl.training.trainer``: the trainer's module with everything it imports;
* first training step: process start to the first env step of training (the first
  gradient update for offline runs, the first pull for bandits) of ``--manifest`` through
  ``LocalTrainer``, timed by ``bench/peer.py``'s driver from the moment this script
  launched the process (so the interpreter's own start is included); with
  ``--reference``, the reference library's too.

A "cold start" is a new process; the operating system's file cache stays warm, as it is
for a user starting a second run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import peer  # bench/peer.py
import peer_protocol  # bench/peer_protocol.py

#: Import statements timed, each in a fresh process.
IMPORTS = {
    "import torch": "import torch",
    "from agilerl import LocalTrainer": "from agilerl import LocalTrainer",
    "import agilerl.training.trainer": "import agilerl.training.trainer",
}


def time_import(statement: str, env: dict[str, str]) -> float:
    """Seconds from launching ``python -c statement`` to its exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], env=env, cwd="/", check=True)
    return time.perf_counter() - start


def first_step(python: str, manifest: Path, env: dict[str, str]) -> float | None:
    """Seconds from launch to the first training step of ``manifest`` (a short run)."""
    result = peer._measure(python, manifest, 64, env)  # evo_steps is cut to the budget
    if "error" in result:
        print(f"  run failed: {result['error']}")
        return None
    return result["first_step_seconds"]


def _summary(values: list[float]) -> str:
    if not values:
        return "-"
    return (f"median {statistics.median(values):.2f} s (range {min(values):.2f}-"
            f"{max(values):.2f}; {', '.join(f'{v:.2f}' for v in values)})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--manifest", default="dqn_cartpole",
                        help="a name bench/peer.py finds, or a path (default dqn_cartpole)")
    parser.add_argument("--reference", action="store_true",
                        help="also time the reference library's first training step")
    parser.add_argument("--settle", type=float, default=60.0, metavar="SECONDS",
                        help="wait up to this long before each start for the load to "
                             "fall to 1.5 (default 60)")
    args = parser.parse_args(argv)
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(peer.REPO)}
    manifest = peer._manifest_path(args.manifest)
    pythons = {"agilerl": sys.executable}
    if args.reference:
        reference = peer._ensure_peer_venv()
        if reference is not None:
            pythons["reference"] = reference
    print(f"{args.repeat} cold starts each; load now "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    loads: list[float] = []

    def settle() -> None:
        peer_protocol.wait_for_quiet(peer_protocol.QUIET_LOAD, args.settle)
        loads.append(os.getloadavg()[0])

    for label, statement in IMPORTS.items():
        times = []
        for _ in range(args.repeat):
            settle()
            times.append(time_import(statement, env))
        print(f"  {label:<34} {_summary(times)}")
    peer_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    for library, python in pythons.items():
        times = []
        for _ in range(args.repeat):
            settle()
            value = first_step(python, manifest, env if library == "agilerl" else peer_env)
            if value is not None:
                times.append(value)
        print(f"  {f'first training step, {library}':<34} {_summary(times)}")
    print(f"  (1-minute load at each start: {min(loads):.2f}-{max(loads):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
