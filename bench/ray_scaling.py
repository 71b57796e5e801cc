"""Steps/s of a population on a local Ray cluster of 1 and 2 nodes, against this process.

    python bench/ray_scaling.py [--manifest dqn_cartpole] [--max-steps 10000] [--nodes 1 2]

Each row trains the same manifest (``../shared/bench-manifests``, reduced budget: two
generations of ``max-steps / 2`` per member) with the same seed: first sequentially in this
process (``--backend local``), then with ``--backend ray`` on a fresh local cluster of N
nodes of one CPU each (``ray start`` on 127.0.0.1; one actor per node). Steps/s is the
population's env steps over the wall time of ``train()`` (training, evaluation, evolution;
not the cluster's start). The final fitnesses are printed so the runs can be seen to agree.
Note the machine's load (printed) with every figure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = REPO.parent / "shared" / "bench-manifests"


def _manifest(name: str, max_steps: int) -> dict[str, Any]:
    manifest = yaml.safe_load((SHARED / f"{name}.yaml").read_text())
    manifest["training"]["max_steps"] = max_steps
    manifest["training"]["evo_steps"] = max_steps // 2
    manifest["training"]["target_score"] = None
    return manifest


def _run(manifest: dict[str, Any], **kwargs: Any) -> tuple[float, int, list[float]]:
    from agilerl.training.trainer import LocalTrainer

    trainer = LocalTrainer.from_manifest(manifest, seed=7)
    start = time.perf_counter()
    population, fitnesses = trainer.train(verbose=False, **kwargs)
    wall = time.perf_counter() - start
    steps = sum(int(agent.steps[-1]) for agent in population)
    return wall, steps, fitnesses


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default="dqn_cartpole")
    parser.add_argument("--max-steps", type=int, default=10_000, help="per member")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from agilerl.population.ray_cluster import local_ray_cluster

    manifest = _manifest(args.manifest, args.max_steps)
    print(f"{args.manifest}: pop_size {manifest['training']['pop_size']}, "
          f"{args.max_steps} steps per member, {os.cpu_count()} cores")
    print(f"  {'backend':<16} {'wall s':>8} {'steps/s':>9} {'x local':>8} {'load 1/5m':>10}"
          "  fitnesses")
    wall, steps, fit = _run(manifest, backend="local", num_workers=1)
    base = steps / wall
    print(f"  {'local (1 proc)':<16} {wall:8.1f} {base:9.0f} {1.0:8.2f} {_load():>10}  {fit}",
          flush=True)
    for nodes in args.nodes:
        with local_ray_cluster(nodes=nodes, cpus_per_node=1) as cluster:
            wall, steps, fit = _run(manifest, backend="ray", ray_address=cluster.address)
        rate = steps / wall
        label = f"ray {nodes} node{'s' if nodes != 1 else ''}"
        print(f"  {label:<16} {wall:8.1f} {rate:9.0f} {rate / base:8.2f} {_load():>10}  {fit}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
