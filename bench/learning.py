"""Learning benchmark: each task's manifest over several seeds, through the CLI, against a
target return within a budget of env steps per member (issue 21).

    python bench/learning.py [--tasks dqn_cartpole ppo_cartpole] [--seeds 5 | --seed-list 1 2]
                             [--reference] [--full] [--max-steps N] [--jobs N]
                             [--set PATH=VALUE ...] [--out DIR] [--no-plot] [--list]

Our runs are ``python -m agilerl.train MANIFEST --seed S --workers 1`` with the budget as
overrides (``training.max_steps``, ``training.evo_steps`` cut to it as ``bench/peer.py``
cuts it); the curve is read from the run folder's ``metrics.csv`` (per generation: env
steps per member = ``train/global_step`` / members, and ``eval/best_fitness`` and
``eval/mean_fitness``). With ``--reference`` the reference library (its venv as
``bench/peer.py`` makes it) runs the same manifest at the same budget, as many runs as
seeds (it takes no run seed), each measured by ``bench/peer.py``'s driver, which records
every evaluation, on one torch thread as ours (``OMP_NUM_THREADS``, unless set: its default
of a thread per core makes runs side by side wait on each other).

A run stops at its target unless ``--full``: ours by the CLI's ``training.target_score``
rule (the mean of the last 3 generations' best at least the target), the reference at its
first evaluation reaching it. Every column of the table is the same either way except
"final best"; the plot holds a stopped run at its last value. Rows whose target is "at
least the reference's median best" train their whole budget and get their target from the
reference runs (none without ``--reference``).

Each finished run is a JSON file under ``--out`` (default ``bench/results/learning/``)
keyed by task, library, seed, budget, stop mode and a hash of the manifest and settings,
so a killed benchmark resumes where it stopped. Learning results do not depend on load (a
seed gives the same run); wall seconds do, and the load is printed with them. On another
installation or machine a seed need not give the same run (a package version that changes
one bit of one step sends the run elsewhere; the older numpy and gymnasium and the AVX2
kernels tried here did not), so the header prints the installation, each run records it,
and the cache key includes it.
"""

from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import learning_plot  # noqa: E402  (bench/learning_plot.py, beside this script)
import peer  # noqa: E402  (bench/peer.py)

REPO = peer.REPO
BENCH = REPO / "bench" / "manifests"
CONFIGS = REPO / "configs" / "training"
SHARED = peer.SHARED / "bench-manifests"


@dataclass(frozen=True)
class Task:
    """One row of the benchmark: a manifest, its target and budget per member."""

    name: str
    manifest: Path
    target: float | None  # None: at least the reference's median best at the same budget
    budget: int | None  # per member; None: the manifest's own training.max_steps
    note: str = ""
    peer_set: tuple[str, ...] = ()  # workarounds the reference needs to run the manifest


#: The reference's bandit loop trains ``training.episode_steps`` pulls (default 500) between
#: evaluations and ours ``evo_steps``: the manifests' 300, so both evaluate at the same pulls.
BANDIT_PEER_SET = ("training.episode_steps=300",)

#: Issue 21's table. Budgets are RL Zoo's published ones for the task.
TASKS = {t.name: t for t in (
    Task("dqn_cartpole_ref", SHARED / "dqn_cartpole.yaml", 475, 50_000,
         "the reference's own manifest, unchanged"),
    Task("dqn_cartpole", CONFIGS / "dqn.yaml", 475, 50_000),
    Task("ppo_cartpole", CONFIGS / "ppo.yaml", 475, 100_000),
    Task("dqn_lunar", CONFIGS / "dqn_lunar.yaml", 200, 300_000, "needs box2d"),
    Task("ppo_lunar", CONFIGS / "ppo_lunar.yaml", 200, 1_000_000, "needs box2d"),
    Task("td3_pendulum", CONFIGS / "td3_pendulum.yaml", -200, 20_000),
    Task("ddpg_pendulum", CONFIGS / "ddpg.yaml", -200, 20_000),
    Task("td3_lunar_continuous", CONFIGS / "td3.yaml", 200, 300_000, "needs box2d"),
    Task("rainbow_cartpole", CONFIGS / "rainbow_dqn.yaml", 475, 50_000),
    Task("recurrent_ppo", CONFIGS / "ppo_recurrent.yaml", 475, 100_000,
         "LSTM PPO on CartPoleNoVel-v1 (velocities hidden: a memory task)"),
    Task("ppo_novel_control", BENCH / "ppo_cartpole_novel_ff.yaml", 475, 100_000,
         "control: feed-forward PPO on CartPoleNoVel-v1 should NOT reach 475"),
    Task("ippo_spread", BENCH / "ippo_spread.yaml", None, None, "", ("network.arch=mlp",)),
    Task("maddpg_ssl", SHARED / "maddpg_ssl.yaml", None, None, "",
         ("network.arch=mlp",)),
    Task("matd3_ssl", BENCH / "matd3_ssl.yaml", None, None, "", ("network.arch=mlp",)),
    Task("cqn_cartpole", BENCH / "cqn_cartpole.yaml", None, None, "budget in updates"),
    Task("neural_ucb_iris", BENCH / "neural_ucb_iris.yaml", None, None, "budget in pulls",
         BANDIT_PEER_SET),
    Task("neural_ts_iris", BENCH / "neural_ts_iris.yaml", None, None, "budget in pulls",
         BANDIT_PEER_SET),
    # Shipped manifests outside issue 21's table, each measured at its own budget.
    Task("ppo_mfpbt_cartpole", CONFIGS / "ppo_mfpbt.yaml", 475, 100_000,
         "multi-frequency PBT; the reference has no such selection"),
    Task("neural_ucb_blobs", CONFIGS / "neural_ucb.yaml", 99, None,
         "budget in pulls; fitness: the reward of 100 greedy pulls"),
    Task("neural_ts_blobs", CONFIGS / "neural_ts.yaml", 99, None,
         "budget in pulls; fitness: the reward of 100 greedy pulls"),
)}


@functools.cache
def installation() -> dict[str, str]:
    """What a seed's run may depend on beside the code and the manifest: the versions of the
    numeric and environment packages, Python, and the CPU model (read once per process)."""
    from importlib import metadata

    found: dict[str, str] = {}
    for dist in ("torch", "numpy", "gymnasium", "pettingzoo"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "absent"
    found["python"] = platform.python_version()
    found["cpu"] = _cpu_model()
    return found


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _relative(path: Path) -> str:
    try:
        return os.path.relpath(path, REPO)
    except ValueError:
        return str(path)


def read_metrics(path: Path) -> tuple[list[list[float]], dict[str, str]]:
    """The curve of a run folder's ``metrics.csv`` ([steps per member, best, mean] per
    generation) and its last row."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return [], {}
    members = sum(1 for key in rows[0] if key.startswith("eval/agent_")
                  and key.endswith("/fitness")) or 1
    curve = [[float(row["train/global_step"]) / members, float(row["eval/best_fitness"]),
              float(row["eval/mean_fitness"])] for row in rows]
    return curve, rows[-1]


def reference_curve(history: list, members: int) -> list[list[float]]:
    """``bench/peer.py``'s driver history (one entry per member evaluation: train steps of
    all members, seconds, fitness) as a curve: a generation is the evaluations at one
    step count."""
    curve: list[list[float]] = []
    by_steps: dict[int, list[float]] = {}
    for steps, _, fitness in history:
        by_steps.setdefault(int(steps), []).append(float(fitness))
    for steps, fitnesses in sorted(by_steps.items()):
        curve.append([steps / members, max(fitnesses), statistics.fmean(fitnesses)])
    return curve


def _ours(task: Task, seed: int, budget: int, settings: list[str], stop_at: float | None,
          workers: int) -> dict:
    import yaml

    training = yaml.safe_load(task.manifest.read_text())["training"]
    overrides = [f"training.{k}={v}" for k, v in peer.budget_settings(training, budget).items()]
    overrides.append(f"training.target_score={'null' if stop_at is None else stop_at}")
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "agilerl.train", str(task.manifest), "--seed", str(seed),
               "--workers", str(workers), "--no-verbose", "--run-dir", str(run_dir),
               *overrides, *settings]
        start = time.time()
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.time() - start
        metrics = run_dir / "metrics.csv"
        if done.returncode != 0 or not metrics.exists():
            return {"error": f"exit {done.returncode}: {done.stderr.strip()[-600:]}"}
        curve, last = read_metrics(metrics)
    window = float(last.get("eval/target_window_mean") or "nan")
    return {"curve": curve, "wall_seconds": wall, "unit": "env steps",
            "stopped_at_target": stop_at is not None and window >= stop_at}


#: Intra-op threads of the reference's torch unless ``OMP_NUM_THREADS`` is set: one, as ours
#: trains with (``torch_threads``). By default it takes a thread per core, and two runs side
#: by side or beside other work then wait on each other's threads: one of its DQN CartPole
#: runs took 19 minutes at load 4 with two threads (6 December).
REFERENCE_THREADS = "1"


def reference_threads() -> str:
    """The reference's intra-op threads for this invocation (part of its runs' cache key)."""
    return os.environ.get("OMP_NUM_THREADS", REFERENCE_THREADS)


def _reference(python: str, task: Task, budget: int, settings: list[str],
               stop_at: float | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not our agilerl
    env["WANDB_MODE"] = "disabled"
    env["OMP_NUM_THREADS"] = reference_threads()
    every = settings + list(task.peer_set)
    members = int(peer._load_manifest(str(task.manifest), budget, every)["training"]
                  .get("pop_size") or 1)
    result = peer._measure(python, task.manifest, budget, env, every, stop_at=stop_at)
    if "error" in result:
        return result
    return {"curve": reference_curve(result["history"], members),
            "wall_seconds": result["wall_seconds"], "unit": result["unit"],
            "stopped_at_target": bool(result["stopped_at_target"])}


class Cache:
    """Finished runs as JSON files: ``DIR/TASK/LIBRARY-sSEED-bBUDGET-MODE-HASH.json``."""

    def __init__(self, folder: Path, task: Task, budget: int, settings: list[str]):
        digest = hashlib.sha256(task.manifest.read_bytes())
        digest.update("\n".join(settings).encode())
        # another installation or CPU gives a seed another run: re-measure, never reuse
        digest.update(json.dumps(installation(), sort_keys=True).encode())
        self.task, self.folder, self.budget, self.digest = task, folder / task.name, budget, digest

    def path(self, library: str, seed: int, full: bool) -> Path:
        digest = self.digest.copy()
        if library == "reference":  # its workarounds and threads are part of what it ran
            digest.update("\n".join(self.task.peer_set).encode())
            digest.update(f"threads {reference_threads()}".encode())
        mode = "full" if full else "stop"
        return self.folder / f"{library}-s{seed}-b{self.budget}-{mode}-{digest.hexdigest()[:12]}.json"

    def get(self, library: str, seed: int, full: bool) -> dict | None:
        """A finished run; a full run also answers for a run that would stop at the target."""
        for mode in (True,) if full else (True, False):
            path = self.path(library, seed, mode)
            if path.is_file():
                return json.loads(path.read_text())
        return None

    def put(self, library: str, seed: int, full: bool, record: dict) -> None:
        path = self.path(library, seed, full)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(path)  # never a half-written file for a killed benchmark to read


def summary(records: list[dict], target: float | None) -> dict:
    """The table's columns over ``records`` (finished runs; errors left out)."""
    runs = [r for r in records if "error" not in r and r["curve"]]
    firsts = [learning_plot.first_reaching(r["curve"], target) for r in runs]
    reached = [f for f in firsts if f is not None]
    steps = [math.inf if f is None else f for f in firsts]
    return {
        "runs": len(runs), "failed": len(records) - len(runs), "reached": len(reached),
        "steps_to_target": statistics.median(steps) if steps and target is not None else None,
        "final_best": _median([r["curve"][-1][1] for r in runs]),
        "best": _median([max(p[1] for p in r["curve"]) for r in runs]),
        "wall": _median([r["wall_seconds"] for r in runs]),
        "load": (runs[0]["load_before"], runs[-1]["load_after"]) if runs else None,
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


HEADER = (f"  {'library':<10} {'reached':>7} {'steps@tgt':>10} {'final best':>10}"
          f" {'best':>8} {'wall s':>7}  load at start / end of its runs (1, 5, 15 min)")


def row(label: str, s: dict, target: float | None, budget: int) -> str:
    """A table row: seeds reaching ``target``, medians over the runs, the load around them."""
    if not s["runs"]:
        return f"  {label:<10} no finished run ({s['failed']} failed)"
    tgt = s["steps_to_target"]
    steps = "-" if tgt is None else (f">{budget}" if math.isinf(tgt) else f"{tgt:.0f}")
    reached = "-" if target is None else f"{s['reached']}/{s['runs']}"
    load = " / ".join(" ".join(f"{x:.2f}" for x in pair) for pair in s["load"])
    return (f"  {label:<10} {reached:>7} {steps:>10} {s['final_best']:>10.1f}"
            f" {s['best']:>8.1f} {s['wall']:>7.0f}  {load}"
            + (f"  ({s['failed']} failed)" if s["failed"] else ""))


def seed_line(seed: int, record: dict, target: float | None) -> str:
    """One run: where it reached the target, its best and final best, wall time, load."""
    if "error" in record:
        return f"      seed {seed:<4} FAILED: {record['error']}"
    first = learning_plot.first_reaching(record["curve"], target)
    best = max(p[1] for p in record["curve"])
    return (f"      seed {seed:<4} reached {'-' if first is None else f'{first:.0f}':>9}  best {best:8.1f}"
            f"  final {record['curve'][-1][1]:8.1f}  {record['wall_seconds']:6.0f} s"
            f"  load {record['load_before'][0]:.2f} / {record['load_after'][0]:.2f}"
            + ("  (stopped at target)" if record.get("stopped_at_target") else ""))


def _timed(run, *args) -> dict:  # type: ignore[no-untyped-def]
    before = _load()
    record = run(*args)
    record.update(load_before=before, load_after=_load(), installation=installation())
    return record


def run_task(task: Task, args: argparse.Namespace, python: str | None) -> None:
    """Run (or read from the cache) every run of ``task``; print its table and draw it."""
    import yaml

    manifest_budget = int(yaml.safe_load(task.manifest.read_text())["training"]["max_steps"])
    budget = args.max_steps or task.budget or manifest_budget
    full = args.full or task.target is None
    stop_at = None if full else task.target
    cache = Cache(args.out, task, budget, args.set)
    jobs = [("ours", seed) for seed in args.seed_list]
    if python:
        jobs += [("reference", index) for index in range(1, args.reference_runs + 1)]
    records: dict[tuple[str, int], dict] = {}
    pending = []
    for library, seed in jobs:
        cached = cache.get(library, seed, full)
        if cached is not None:
            records[(library, seed)] = cached
        else:
            pending.append((library, seed))

    def one(job: tuple[str, int]) -> None:
        library, seed = job
        if library == "ours":
            record = _timed(_ours, task, seed, budget, args.set, stop_at, args.workers)
        else:
            record = _timed(_reference, python, task, budget, args.set, stop_at)
        if "error" not in record:
            cache.put(library, seed, full, record)
        records[job] = record
        print(f"  done: {library} {'seed' if library == 'ours' else 'run'} {seed}"
              f" ({len(records)}/{len(jobs)})", flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(one, pending))
    _report(task, budget, args, records)


def _report(task: Task, budget: int, args: argparse.Namespace,
            records: dict[tuple[str, int], dict]) -> None:
    by_library = {lib: [(seed, records[(l2, seed)]) for l2, seed in sorted(records) if l2 == lib]
                  for lib in ("ours", "reference")}
    target = task.target
    ref_runs = [r for _, r in by_library["reference"] if "error" not in r and r["curve"]]
    if target is None and ref_runs:
        target = statistics.median(max(p[1] for p in r["curve"]) for r in ref_runs)
    origin = "" if task.target is not None else (
        " (the reference's median best)" if target is not None
        else " (the reference's median best: run with --reference)")
    print(f"\n{task.name} ({_relative(task.manifest)}): target {peer._fmt(target, 'g')}{origin},"
          f" budget {budget} per member, {len(args.seed_list)} seeds"
          + (f", {len(by_library['reference'])} reference runs" if by_library["reference"] else "")
          + ("" if args.full or task.target is None else ", runs stop at the target"))
    print(HEADER)
    series = {}
    for library, label in (("ours", "agilerl"), ("reference", "reference")):
        if not by_library[library]:
            continue
        print(row(label, summary([r for _, r in by_library[library]], target), target, budget))
        for seed, record in by_library[library]:
            print(seed_line(seed, record, target))
        done = [r for _, r in by_library[library] if "error" not in r]
        series[label] = ([r["curve"] for r in done],
                         [bool(r.get("stopped_at_target")) for r in done])
    if not args.no_plot:
        png = args.out / f"{task.name}.png"
        learning_plot.draw(png, f"{task.name}: budget {budget} per member",
                           target, budget, series)
        print(f"  plot: {png}")
    sys.stdout.flush()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS),
                        metavar="TASK", help="tasks to run (default: all; see --list)")
    parser.add_argument("--seeds", type=int, default=5, help="run seeds 1..N (default 5)")
    parser.add_argument("--seed-list", type=int, nargs="+", help="these run seeds instead")
    parser.add_argument("--reference", action="store_true",
                        help="also run the reference library, as many runs as seeds")
    parser.add_argument("--reference-runs", type=int, metavar="N",
                        help="with --reference: its runs (default: as many as our seeds)")
    parser.add_argument("--full", action="store_true",
                        help="train the whole budget even after the target is reached")
    parser.add_argument("--max-steps", type=int, help="budget per member for a quick look")
    parser.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                        help="change a manifest value for every run (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--workers", type=int, default=1,
                        help="ours: --workers of each run (default 1: one process)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "learning")
    parser.add_argument("--no-plot", action="store_true", help="no PNG (no matplotlib needed)")
    parser.add_argument("--list", action="store_true", help="print the task table and exit")
    args = parser.parse_args(argv)
    args.seed_list = args.seed_list or list(range(1, args.seeds + 1))
    args.reference_runs = args.reference_runs or len(args.seed_list)
    return args


def print_tasks() -> None:
    """The task table: name, manifest, target and budget per member."""
    print(f"{'task':<22} {'target':>10} {'budget':>9}  manifest (note)")
    for t in TASKS.values():
        target = "ref median" if t.target is None else f"{t.target:g}"
        budget = "manifest" if t.budget is None else str(t.budget)
        notes = [t.note] if t.note else []
        notes += [f"reference with {', '.join(t.peer_set)}"] if t.peer_set else []
        print(f"{t.name:<22} {target:>10} {budget:>9}  {_relative(t.manifest)}"
              + (f" ({'; '.join(notes)})" if notes else ""))


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.list:
        print_tasks()
        return 0
    python = peer._ensure_peer_venv() if args.reference else None
    if args.reference and python is None:
        print("reference skipped (see the message above)")
    elif args.reference:
        print(f"reference: {reference_threads()} torch intra-op thread(s) (OMP_NUM_THREADS)")
    print(f"load average at start: {' '.join(map(str, _load()))}; {os.cpu_count()} cores")
    print("installation: " + ", ".join(f"{k} {v}" for k, v in installation().items()))
    if args.jobs > 1:
        print(f"{args.jobs} runs at once: wall seconds are load-affected "
              "(learning results are not: a seed gives the same run)")
    for name in args.tasks:
        task = TASKS[name]
        if not task.manifest.is_file():
            print(f"\n{name}: skipped, no manifest at {task.manifest}")
            continue
        run_task(task, args, python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
