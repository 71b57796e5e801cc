"""How fast a manifest could train if its matrix products were all the work left.

    python bench/arithmetic_floor.py [--manifests NAME[:STEPS] ...] [--threads N ...]
                                     [--reference NAME=RATE ...] [--ratio R] [--seed N]

Trains each manifest in one process (members one after another, ``--torch-threads N`` for
each ``--threads``) for STEPS train steps per member, with every member's training call run
under ``torch.profiler``, and adds up, over those calls only (not evaluation, evolution or
start-up), the CPU time spent inside the matrix-product kernels (``mm``, ``addmm``,
``bmm``...) and inside the layer norms, forward and backward. Steps are the run's own unit,
as ``bench/peer.py`` counts them: env steps, bandit pulls, or offline gradient updates.

Per manifest and thread count it prints, per train step: the training calls' time, the
products' and the layer norms'; and the rate a run would reach if nothing but the products
took time (the products' floor). With ``--reference NAME=RATE`` (the reference's train
steps/s from a ``bench/peer.py --repeat`` protocol run on the same machine) it also prints
the ratio that floor would be to the reference, and the time per step ``--ratio`` times the
reference allows (default 5). A floor ratio below ``--ratio`` means the target is out of
reach on this machine whatever else is removed; the profiler adds a little to each kernel
call, so the floor is an upper bound on the products' time, to within that. Members train
one after another here, on one core: where ``bench/peer.py`` trains a population in N
worker processes, its rate can reach N times this one's, and so can the floor's.

Prints the load average with every figure: on a shared machine they are only as good as it
is quiet.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer  # noqa: E402  (bench/peer.py: manifest lookup and loading)

#: Kernels counted as matrix products (their self time, as the profiler names them).
PRODUCTS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmv",
                      "aten::mv", "aten::dot", "aten::addr", "aten::_addmm_activation"})
#: Layer-norm kernels (forward and backward).
LAYER_NORMS = frozenset({"aten::native_layer_norm", "aten::native_layer_norm_backward"})


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _measure(name: str, steps: int, threads: int, seed: int) -> dict[str, float]:
    """One run in this process: the totals over every member's training calls."""
    from torch.profiler import ProfilerActivity, profile

    from agilerl.population.local import LocalPopulation
    from agilerl.training.trainer import LocalTrainer

    totals = {"steps": 0.0, "seconds": 0.0, "products": 0.0, "layer_norms": 0.0}
    original = LocalPopulation.train

    def profiled(self, member, steps, **kwargs):  # type: ignore[no-untyped-def]
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            report = original(self, member, steps, **kwargs)
        totals["steps"] += report.steps
        totals["seconds"] += report.seconds
        for event in prof.key_averages():
            if event.key in PRODUCTS:
                totals["products"] += event.self_cpu_time_total / 1e6
            elif event.key in LAYER_NORMS:
                totals["layer_norms"] += event.self_cpu_time_total / 1e6
        return report

    LocalPopulation.train = profiled  # type: ignore[method-assign]
    data = peer._load_manifest(str(peer._manifest_path(name)), steps, [])
    data["training"]["num_workers"] = 1
    trainer = LocalTrainer.from_manifest(manifest=data, seed=seed)
    trainer.train(verbose=False, torch_threads=threads, run_dir=False)
    return totals


def _child(name: str, steps: int, threads: int, seed: int) -> dict[str, float]:
    """:func:`_measure` in a fresh process (one torch thread count per process)."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, str(steps), str(threads), str(seed)],
        check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parent)
    return dict(zip(("steps", "seconds", "products", "layer_norms"),
                    map(float, out.stdout.split()[-4:]), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifests", nargs="+",
                        default=["cqn_cartpole:2000", "neural_ucb_iris:2000",
                                 "neural_ts_iris:2000"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--reference", nargs="*", default=[], metavar="NAME=RATE")
    parser.add_argument("--ratio", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, steps, threads, seed = args.child
        totals = _measure(name, int(steps), int(threads), int(seed))
        print(*(totals[k] for k in ("steps", "seconds", "products", "layer_norms")))
        return
    reference = {k: float(v) for k, v in (item.split("=", 1) for item in args.reference)}
    print(f"{'manifest':<18} {'threads':>7} {'steps':>7} {'us/step':>8} {'products':>8}"
          f" {'norms':>6} {'floor/s':>8} {'floor x':>7} {'budget':>7}  load")
    for spec in args.manifests:
        name, _, steps = spec.partition(":")
        for threads in args.threads:
            start = time.time()
            t = _child(name, int(steps or 1000), threads, args.seed)
            per_step = {k: 1e6 * t[k] / t["steps"] for k in ("seconds", "products",
                                                            "layer_norms")}
            floor = 1e6 / per_step["products"]
            rate = reference.get(name)
            ratio = f"{floor / rate:7.2f}" if rate else f"{'-':>7}"
            budget = f"{1e6 / (args.ratio * rate):7.0f}" if rate else f"{'-':>7}"
            print(f"{name:<18} {threads:>7} {int(t['steps']):>7} {per_step['seconds']:8.0f}"
                  f" {per_step['products']:8.0f} {per_step['layer_norms']:6.0f}"
                  f" {floor:8.0f} {ratio} {budget}  {_load()} ({time.time() - start:.0f} s)")
    print("us/step: the training calls' time per train step (under the profiler); products,"
          " norms: the time inside those kernels per step; floor/s: the rate with the products"
          " alone; floor x: that rate over the reference's; budget: us per step at"
          f" {args.ratio:g}x the reference")


if __name__ == "__main__":
    main()
