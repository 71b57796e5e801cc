"""Side by side with the reference library: the same manifests through both trainers.

    python bench/peer.py [--manifests NAME[:STEPS] ...] [--max-steps N] [--ours-only]
                         [--repeat N] [--quiet-load LOAD] [--settle SECONDS]
                         [--peer-python PATH] [--target RETURN] [--workers N] [--seed N]

``--repeat N`` is the protocol every speed figure comes from (``bench/peer_protocol.py``):
N runs of each library per manifest, interleaved (ours, the reference, ours, ...), each
after the load left by the one before has settled (``--settle``, up to 120 s), each with
the 1-minute load when it started and ended (``*``: started above ``--quiet-load``, 1.5)
and the CPU seconds the rest of the machine took while it ran; then the median ratio of
the pairs with its range, over all pairs and over those started quiet. Every run's train
steps, and the step at which it reached the target, are checked against the run's own
record: our run folder's ``metrics.csv``, the reference's members' step counters.

A manifest is a name in ``shared/bench-manifests`` (the reference's own benchmark set), a
name in ``bench/manifests`` (ours, for algorithms that set has no manifest for), or a path.

The reference (``agilerl==2.58.0`` with ``torch==2.13.0``) is installed into its own virtual
environment (``$AGILERL_PEER_VENV`` or ``/tmp/agilerl-peer-venv``) on first use. Each run is a
fresh process started by this script, executing this same file in ``--driver`` mode, which:

* counts train env steps by wrapping the ``step`` of every concrete Gymnasium vector env class,
  and of the trainer's own env class when it is not one (the PettingZoo vector envs of both
  libraries); steps taken while a member is being evaluated are not counted as training; a
  run that steps no vector env counts its members' ``get_action`` calls instead (bandit
  pulls) or, without those, their ``learn`` calls (offline gradient updates), and says which
  unit;
* times the first training step from the moment this script launched the process;
* records, at every evaluation, the train steps, seconds elapsed and fitness, to report
  when a member first reached the target return: ``--target``, else the reference's best
  return in the same run (so "time to the reference's best" compares like with like);
* reports the best final fitness returned by ``trainer.train()``.

Peak memory is sampled here from ``/proc`` for the driver and all its descendants (async
vector envs run in subprocesses), every 0.2 s, as the sum of their PSS (shared pages split
between the processes sharing them, so forked workers are not counted several times). Both libraries get identical manifests (with
``--max-steps`` applied to both) and ``verbose=False``, except for ``--peer-set`` changes:
workarounds the reference needs to run a manifest at all (e.g. ``network.arch=mlp`` for the
reference's own ``maddpg.yaml``, which it refuses with validation errors when the network
section names no ``arch``), applied to the reference run only and printed with its figures.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import peer_protocol  # bench/peer_protocol.py (this script's folder is on sys.path)

REPO = Path(__file__).resolve().parents[1]
# The shared folder beside the checkout (``$AGILERL_SHARED`` where a worktree lives elsewhere).
SHARED = Path(os.environ.get("AGILERL_SHARED") or REPO.parent / "shared")
MANIFEST_DIRS = (SHARED / "bench-manifests", REPO / "bench" / "manifests")
PEER_VENV = Path(os.environ.get("AGILERL_PEER_VENV", "/tmp/agilerl-peer-venv"))
# agilerl 2.58.0 imports peft unconditionally (agilerl.distributed) without declaring it.
PEER_REQUIREMENTS = ["agilerl==2.58.0", "torch==2.13.0", "peft"]


# --------------------------------------------------------------------------- driver side
def _load_manifest(manifest_path: str, max_steps: int | None, settings: list[str]) -> dict:
    """The manifest with ``--set`` changes, ``--max-steps`` and absolute data file paths."""
    import yaml

    data = yaml.safe_load(Path(manifest_path).read_text())
    _resolve_data_files(data, Path(manifest_path).parent)
    for setting in settings:  # PATH=VALUE, e.g. mutation.probabilities.no_mut=1.0
        key, _, raw = setting.partition("=")
        *parents, field = key.split(".")
        node = data
        for name in parents:
            node = node.setdefault(name, {})
        node[field] = yaml.safe_load(raw)
    data["training"].update(budget_settings(data["training"], max_steps))
    return data


def budget_settings(training: dict, max_steps: int | None) -> dict:
    """The ``training`` values that set a budget of ``max_steps`` per member: ``max_steps``,
    and ``evo_steps`` cut to it (a generation cannot be longer than the run). Both libraries
    get the same values, so a budget means the same work in each."""
    if not max_steps:
        return {}
    return {"max_steps": max_steps,
            "evo_steps": min(training.get("evo_steps") or max_steps, max_steps)}


class _TargetReached(Exception):
    """Raised by an evaluation reaching ``--stop-at`` to end the run there."""


def _driver(manifest_path: str, launched: float, out: str, max_steps: int | None,
            settings: list[str], seed: int | None = None,
            stop_at: float | None = None) -> None:
    data = _load_manifest(manifest_path, max_steps, settings)
    record: dict = {"train_steps": 0, "first_step": None, "eval_seconds": 0.0,
                    "history": [], "evaluating": False, "updates": 0, "actions": 0,
                    "stop_at": stop_at, "stopped": False, "pid": os.getpid()}

    from agilerl.training.trainer import LocalTrainer

    # The run seed is ours only: the reference's RL trainer takes none (its runs differ).
    trainer = LocalTrainer.from_manifest(manifest=data, **({} if seed is None else {"seed": seed}))
    built = time.time()
    _count_train_steps(trainer, record)

    def wrap_test(cls: type) -> None:
        original = cls.test  # type: ignore[attr-defined]  # an agent class

        def test(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if not _main_thread():  # the pool's worker thread: counted by the pool's wrappers
                return original(self, *args, **kwargs)
            record["evaluating"] = True
            start = time.time()
            try:
                fitness = original(self, *args, **kwargs)
            finally:
                record["evaluating"] = False
                record["eval_seconds"] += time.time() - start
            done = record["train_steps"] or record["actions"] or record["updates"]
            _record_evaluation(record, done, time.time() - launched, float(fitness))
            return fitness

        cls.test = test  # type: ignore[attr-defined]

    for cls in {type(agent) for agent in trainer.population}:
        wrap_test(cls)
        _wrap_count(cls, "learn", "updates", record)
        _wrap_count(cls, "get_action", "actions", record)
    _count_in_workers(record, launched)  # counts only if members train in worker processes
    start = time.time()
    try:
        _, fitnesses = trainer.train(verbose=False)
    except BaseException:
        if not record["stopped"]:  # the trainer may wrap our exception: check the record
            raise
        fitnesses = []  # stopped at the target: no final fitnesses
    end = time.time()
    flat = [float(f) for f in fitnesses]
    first = record["first_step"]
    train_seconds = (end - (first or start)) - record["eval_seconds"]
    unit = _count_unit(record)
    result = {
        "unit": unit,
        "wall_seconds": end - launched,
        "build_seconds": built - launched,
        "first_step_seconds": (first - launched) if first else None,
        "train_steps": record["train_steps"],
        "train_steps_per_second": record["train_steps"] / train_seconds if train_seconds else None,
        "best_fitness": max(flat) if flat else None,
        "best_evaluation": max((f for _, _, f in record["history"]), default=None),
        "seed": getattr(trainer, "seed", None),
        "stopped_at_target": record["stopped"],
        "history": record["history"],
        "own_record": _own_record(trainer, unit),
    }
    Path(out).write_text(json.dumps(result))


def _own_record(trainer: object, unit: str) -> dict:
    """The run's own account of its train steps (and, where it keeps one, of its
    evaluations), to check the driver's counts against: ours from the run folder's
    ``metrics.csv`` (``train/global_step``, ``eval/best_fitness`` per generation); the
    reference, whose trainer writes no such file, from its members' step counters (a clone
    inherits its parent's, so their sum is the run's env steps when every member trained
    the same)."""
    run_dir = getattr(trainer, "last_run_dir", None)
    metrics = Path(run_dir) / "metrics.csv" if run_dir else None
    if metrics is not None and metrics.is_file():
        with metrics.open(newline="") as fh:
            rows = [(int(float(row["train/global_step"])), float(row["eval/best_fitness"]))
                    for row in csv.DictReader(fh) if row.get("train/global_step")]
        return {"source": "metrics.csv", "train_steps": rows[-1][0] if rows else 0,
                "history": rows}
    population = getattr(trainer, "population", None) or []
    if unit != "env steps" or not population:
        return {"source": None}
    def steps(agent: object) -> int:  # ours keep a list per generation, the reference an int
        counter = getattr(agent, "steps", 0)
        return int(counter[-1] if isinstance(counter, list) else counter)

    return {"source": "members' step counters", "train_steps": sum(map(steps, population))}


def _record_evaluation(record: dict, steps: int, seconds: float, fitness: float) -> None:
    """Add one evaluation to the history (and end the run if it reaches ``stop_at``)."""
    record["history"].append((steps, seconds, fitness))
    _stop_if_reached(record, [fitness])


def _stop_if_reached(record: dict, fitnesses: list[float]) -> None:
    """With ``--stop-at``: end the run (raise :class:`_TargetReached`) once an evaluation
    reaches it. A run that does not stop is unchanged."""
    target = record["stop_at"]
    if os.getpid() != record["pid"]:  # a worker forked from the driver: only it stops
        return
    if target is not None and any(float(f) >= target for f in fitnesses):
        record["stopped"] = True
        raise _TargetReached(f"an evaluation reached {target}")


def _count_in_workers(record: dict, launched: float) -> None:
    """Ours with members in workers (``training.num_workers`` 0, the default, or > 1):
    envs step there (worker processes, or the driver's worker thread), where the wrappers
    above do not count, so count
    train steps from the members' reports and time the evaluation phases (every member
    evaluated concurrently) in this process instead."""
    try:
        from agilerl.population.pool import ProcessPopulation
    except ImportError:  # the reference library: members never leave its process
        return

    train_members, evaluate_members = ProcessPopulation.train_members, \
        ProcessPopulation.evaluate_members

    def counted_train(self, jobs, **kwargs):  # type: ignore[no-untyped-def]
        if record["first_step"] is None:
            record["first_step"] = time.time()
        for member, report in train_members(self, jobs, **kwargs):
            record["train_steps"] += int(report.steps)
            yield member, report

    def timed_evaluate(self, jobs):  # type: ignore[no-untyped-def]
        start = time.time()
        fitnesses = evaluate_members(self, jobs)
        record["eval_seconds"] += time.time() - start
        now = time.time() - launched
        record["history"].extend((record["train_steps"], now, float(f)) for f in fitnesses)
        _stop_if_reached(record, fitnesses)
        return fitnesses

    ProcessPopulation.train_members = counted_train  # type: ignore[method-assign]
    ProcessPopulation.evaluate_members = timed_evaluate  # type: ignore[method-assign]


def _wrap_count(cls: type, method: str, counter: str, record: dict) -> None:
    """Count ``cls.method`` calls made outside evaluation in ``record[counter]``."""
    original = getattr(cls, method)

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not record["evaluating"] and _main_thread():
            if record["first_step"] is None:
                record["first_step"] = time.time()
            record[counter] += 1
        return original(self, *args, **kwargs)

    setattr(cls, method, counted)


def _main_thread() -> bool:
    """Counting happens on the driver's main thread only: members that the process pool
    trains on the driver's worker thread are counted, like those in worker processes, from
    the pool's reports and evaluation phases (:func:`_count_in_workers`)."""
    return threading.current_thread() is threading.main_thread()


def _count_unit(record: dict) -> str:
    """What ``record["train_steps"]`` counts: env steps, else bandit pulls (``get_action``
    calls) or offline gradient updates (``learn`` calls), which it then holds."""
    if record["train_steps"]:
        return "env steps"
    record["train_steps"] = record["actions"] or record["updates"]
    return "pulls" if record["actions"] else "updates"


def _resolve_data_files(data: dict, folder: Path) -> None:
    """Data files named relative to the manifest (offline datasets, bandit tables) become
    absolute, so both libraries find them whatever their working directory."""
    environment = data.get("environment") or {}
    for key in ("dataset_path", "features", "targets"):
        value = environment.get(key)
        if isinstance(value, str) and not Path(value).is_absolute() \
                and (folder / value).exists():
            environment[key] = str((folder / value).resolve())


def _count_train_steps(trainer: object, record: dict) -> None:
    """Count env steps (not taken while evaluating) in ``record`` by wrapping the ``step`` of
    every concrete Gymnasium vector env class, and of the trainer's env class when it is not
    one (a multi-agent vector env)."""
    from gymnasium.vector import VectorEnv, VectorWrapper

    def all_subclasses(cls: type) -> set[type]:
        out: set[type] = set()
        subclasses: list[type] = cls.__subclasses__()
        for sub in subclasses:
            out.add(sub)
            out |= all_subclasses(sub)
        return out

    def wrap_step(cls: type) -> None:
        original = cls.__dict__["step"]

        def step(self, actions):  # type: ignore[no-untyped-def]
            if not record["evaluating"] and _main_thread():
                if record["first_step"] is None:
                    record["first_step"] = time.time()
                record["train_steps"] += int(self.num_envs)
            return original(self, actions)

        cls.step = step  # type: ignore[attr-defined]

    for cls in all_subclasses(VectorEnv):
        if not issubclass(cls, VectorWrapper) and "step" in cls.__dict__:
            wrap_step(cls)
    env_cls = type(getattr(trainer, "env", None))
    if not issubclass(env_cls, VectorEnv):
        owner = next((c for c in env_cls.__mro__ if "step" in c.__dict__), None)
        if owner is not None:
            wrap_step(owner)


# --------------------------------------------------------------------------- parent side
def _tree_rss_bytes(root: int) -> int:
    """Memory of ``root`` and all its descendants, from /proc: the sum of their PSS
    (proportional set size: pages shared between processes, e.g. forked env workers, are
    split between them rather than counted once per process), RSS where PSS is unavailable."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += _process_memory(pid)
        stack.extend(children.get(pid, []))
    return total


def _sample_interval(elapsed: float) -> float:
    """Seconds between two memory samples of a run ``elapsed`` seconds old. Each sample
    walks /proc and every process of the run's tree (about 25 ms of CPU on a run with 8 env
    processes): 5 a second while start-up allocates, then one a second, so that the sampler
    does not take a tenth of a core from the runs it measures."""
    return 0.2 if elapsed < 10.0 else 1.0


def _process_memory(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _measure(python: str, manifest: Path, max_steps: int | None, env: dict[str, str],
             settings: list[str] | None = None, seed: int | None = None,
             stop_at: float | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        launched = time.time()
        cmd = [python, str(Path(__file__).resolve()), "--driver", str(manifest),
               "--launched", repr(launched), "--out", str(out)]
        if max_steps:
            cmd += ["--max-steps", str(max_steps)]
        for setting in settings or []:
            cmd += ["--set", setting]
        if seed is not None:
            cmd += ["--seed", str(seed)]
        if stop_at is not None:  # end the run at the first evaluation reaching it
            cmd += ["--stop-at", repr(stop_at)]
        err_path = Path(tmp) / "stderr.txt"
        with err_path.open("w") as err:
            proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.DEVNULL,
                                    stderr=err, text=True)
            peak = 0
            while proc.poll() is None:
                peak = max(peak, _tree_rss_bytes(proc.pid))
                time.sleep(_sample_interval(time.time() - launched))
        stderr = err_path.read_text(errors="replace")
        if proc.returncode != 0 or not out.exists():
            return {"error": f"exit {proc.returncode}: {stderr.strip()[-800:]}"}
        result = json.loads(out.read_text())
        result["peak_rss_mb"] = peak / 2**20
        return result


def _ensure_peer_venv() -> str | None:
    """Path to the reference's python, installing it on first use; None when impossible."""
    python = PEER_VENV / "bin" / "python"
    check = [str(python), "-c", "import importlib.metadata as m, agilerl.training.trainer; "
             "assert m.version('agilerl') == '2.58.0'"]

    def installed() -> bool:  # run outside this checkout, or `agilerl` would be ours
        return subprocess.run(check, capture_output=True, cwd="/").returncode == 0

    if python.exists() and installed():
        return str(python)
    print(f"installing the reference ({' '.join(PEER_REQUIREMENTS)}) into {PEER_VENV} ...",
          flush=True)
    steps = [[sys.executable, "-m", "venv", str(PEER_VENV)],
             [str(python), "-m", "pip", "install", "-q", *PEER_REQUIREMENTS]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            print("could not install the reference library:\n  " + "\n  ".join(tail))
            return None
    return str(python) if installed() else None


def _fmt(value: object, spec: str) -> str:
    """``value`` formatted by ``spec``; a missing one as ``-`` in the same width."""
    if value is not None:
        return format(value, spec)
    width = "".join(itertools.takewhile(str.isdigit, spec))
    return format("-", f">{width}") if width else "-"


def _reached(result: dict, target: float | None) -> dict:
    """The train steps and seconds at the first evaluation reaching ``target`` ({} if none)."""
    if target is None:
        return {}
    for steps, seconds, fitness in result.get("history", []):
        if fitness >= target:
            return {"steps": steps, "seconds": seconds}
    return {}


def _manifest_path(name: str) -> Path:
    for folder in MANIFEST_DIRS:
        candidate = folder / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    return Path(name).resolve()  # the driver runs in another folder


HEADER = (f"  {'run':<12} {'wall s':>7} {'steps/s':>9} {'1st step':>8} {'peak MB':>7}"
          f" {'best':>7} {'steps@tgt':>9} {'s@tgt':>6} {'load start/end':>14}"
          f" {'other CPU s':>11}  own record")


def _row(name: str, r: dict, target: float | None,
         quiet_load: float = peer_protocol.QUIET_LOAD) -> str:
    """One run: its figures, the load when it started and ended (``*`` marks a start above
    ``quiet_load``), the CPU seconds the rest of the machine took meanwhile, and whether
    the run's own record agrees with the driver's counts."""
    if "error" in r:
        return f"  {name:<12} FAILED: {r['error']}"
    solved = _reached(r, target)
    mark = "*" if r.get("load_start", 0.0) > quiet_load else ""
    load = f"{_fmt(r.get('load_start'), '.2f')}{mark}/{_fmt(r.get('load_end'), '.2f')}"
    return (f"  {name:<12} {_fmt(r['wall_seconds'], '7.1f')}"
            f" {_fmt(r['train_steps_per_second'], '9.0f')}"
            f" {_fmt(r['first_step_seconds'], '8.2f')} {_fmt(r['peak_rss_mb'], '7.0f')}"
            f" {_fmt(r['best_fitness'], '7.1f')} {_fmt(solved.get('steps'), '9d')}"
            f" {_fmt(solved.get('seconds'), '6.1f')} {load:>14}"
            f" {_fmt(r.get('other_cpu_seconds'), '11.1f')}  {own_record_check(r, target)}")


def own_record_check(result: dict, target: float | None, tolerance: float = 0.01) -> str:
    """``ok`` when the run's own record (``metrics.csv`` for ours, the members' step
    counters for the reference) gives the same train steps as the driver counted, within
    ``tolerance``, and, where it records evaluations, reaches ``target`` at the same step;
    else what differs."""
    own = result.get("own_record") or {}
    if own.get("source") is None:
        return "none kept"
    counted, kept = result["train_steps"], own["train_steps"]
    problems = []
    if kept <= 0 or abs(counted - kept) > tolerance * kept:
        problems.append(f"steps {counted} counted, {kept} in {own['source']}")
    if target is not None and "history" in own:
        own_at = next((steps for steps, best in own["history"] if best >= target), None)
        counted_at = _reached(result, target).get("steps")
        if (own_at is None) != (counted_at is None) or (
                own_at is not None and abs(counted_at - own_at) > tolerance * own_at):
            problems.append(f"target at {counted_at} counted, {own_at} in {own['source']}")
    return "; ".join(problems) if problems else f"ok ({own['source']})"


def _raw_env_rate(python: str, env: dict[str, str]) -> str:
    script = REPO / "bench" / "env_step_rate.py"
    if not script.exists():
        return "bench/env_step_rate.py not found"
    done = subprocess.run([python, str(script), "--seconds", "2", "--num-envs", "8",
                           "--modes", "native"], capture_output=True, text=True, env=env,
                          cwd=REPO)
    return (done.stdout or done.stderr).strip()


def _timed_run(python: str, manifest: Path, max_steps: int | None, args: argparse.Namespace,
               env: dict[str, str], settings: list[str], seed: int | None) -> dict:
    """One run of the protocol: wait for the load to settle, then measure the run and what
    the rest of the machine did meanwhile."""
    waited = peer_protocol.wait_for_quiet(args.quiet_load, args.settle) if args.settle else 0.0
    before = peer_protocol.host_snapshot()
    result = _measure(python, manifest, max_steps, env, settings, seed)
    result.update(peer_protocol.run_accounting(before, peer_protocol.host_snapshot()),
                  settle_seconds=waited)
    return result


def _compare(name: str, args: argparse.Namespace, pythons: dict[str, str],
             envs: dict[str, dict[str, str]]) -> list[tuple[dict, dict]]:
    """Every run of one manifest in protocol order, printed as it ends; the pairs."""
    name, max_steps = split_budget(name, args.max_steps)
    manifest = _manifest_path(name)
    changes = ([f"max_steps={max_steps}"] if max_steps else []) + args.set
    print(f"\n{name} ({manifest})" + (f", {', '.join(changes)}" if changes else ""))
    settings = {"agilerl": args.set + ([f"training.num_workers={args.workers}"]
                                       if args.workers is not None else []),
                "reference": args.set + args.peer_set}
    if args.workers is not None:
        print(f"  ours with training.num_workers={args.workers}")
    if args.peer_set and "reference" in pythons:
        print(f"  reference run only (workaround): {', '.join(args.peer_set)}")
    print(HEADER)
    runs: dict[tuple[int, str], dict] = {}
    libraries = list(pythons)
    for pair, library in peer_protocol.schedule(args.repeat, libraries):
        seed = args.seed if library == "agilerl" else None
        runs[pair, library] = _timed_run(pythons[library], manifest, max_steps, args,
                                         envs[library], settings[library], seed)
        if library != libraries[-1]:
            continue  # a pair is printed when its last run ends
        peer = runs.get((pair, "reference"))
        target = args.target if args.target is not None else (
            peer.get("best_fitness") if peer and "error" not in peer else None)
        for lib in libraries:
            tag = lib if args.repeat == 1 else f"{lib} #{pair + 1}"
            print(_row(tag, runs[pair, lib], target, args.quiet_load))
        if peer is not None:
            print(_pair_line(runs[pair, "agilerl"], peer, target))
        sys.stdout.flush()
    pairs = [(runs[i, "agilerl"], runs[i, "reference"]) for i in range(args.repeat)
             if (i, "reference") in runs]
    if pairs:
        print(f"  target return: {_fmt(args.target, '.1f')}" if args.target is not None
              else "  target return: each pair's reference best")
        print("\n".join(peer_protocol.summary_lines(pairs, args.quiet_load)))
    return pairs


def split_budget(spec: str, default: int | None) -> tuple[str, int | None]:
    """``NAME:STEPS`` (a manifest with its own budget) or ``NAME`` (``--max-steps``)."""
    name, sep, steps = spec.rpartition(":")
    if sep and steps.isdigit() and name:
        return name, int(steps)
    return spec, default


def _pair_line(ours: dict, peer: dict, target: float | None) -> str:
    if "error" in ours or "error" in peer or not peer["train_steps_per_second"]:
        return "    ratio: -"
    ratio = ours["train_steps_per_second"] / peer["train_steps_per_second"]
    line = f"    ratio: {ratio:.2f}x steps/s, " \
           f"{ours['peak_rss_mb'] / peer['peak_rss_mb']:.2f}x memory"
    ours_t, peer_t = _reached(ours, target), _reached(peer, target)
    if ours_t and peer_t:
        line += f", {ours_t['seconds'] / peer_t['seconds']:.2f}x time to target"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", nargs="+", default=["dqn_cartpole", "ppo_cartpole"],
                        metavar="NAME[:STEPS]", help="manifest names or paths, each with "
                        "its own budget per member after a colon if given")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="shrink training.max_steps (same for both libraries) of the "
                             "manifests given without a budget")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="N runs of each library per manifest, interleaved (ours, the "
                             "reference, ours, ...): the median ratio and its range")
    parser.add_argument("--quiet-load", type=float, default=peer_protocol.QUIET_LOAD,
                        metavar="LOAD", help="runs starting above this 1-minute load are "
                                             "marked * and left out of the clean median")
    parser.add_argument("--settle", type=float, default=None, metavar="SECONDS",
                        help="before each run, wait up to this long for the load to fall to "
                             "--quiet-load (default 120 with --repeat above 1, else 0)")
    parser.add_argument("--peer-python", default=None, metavar="PATH",
                        help="the python that runs the other side (default: the reference's "
                             "virtual environment, installed on first use)")
    parser.add_argument("--target", type=float, default=None,
                        help="return to time (default: the reference's best in this run)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="change a manifest value for both libraries (repeatable)")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="ours only: training.num_workers (members in N processes)")
    parser.add_argument("--peer-set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="change a manifest value for the reference only: a workaround "
                             "it needs to run the manifest (repeatable; printed)")
    parser.add_argument("--seed", type=int, default=None,
                        help="ours only: the run seed (default: a fresh random one per run)")
    parser.add_argument("--stop-at", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    parser.add_argument("--launched", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.driver:
        _driver(args.driver, args.launched, args.out, args.max_steps, args.set, args.seed,
                args.stop_at)
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.settle is None:
        args.settle = 120.0 if args.repeat > 1 else 0.0
    missing = [spec for spec in args.manifests
               if not _manifest_path(split_budget(spec, None)[0]).is_file()]
    if missing:
        parser.error(f"no manifest {', '.join(missing)}: give a path, or a name in "
                     f"{' or '.join(str(d) for d in MANIFEST_DIRS)}")

    # Without the caller's PYTHONPATH: one pointing at a checkout of ours would make the
    # reference's interpreter import our package instead of its own.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
           "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    ours_env = {**env, "PYTHONPATH": str(REPO)}
    pythons = {"agilerl": sys.executable}
    if not args.ours_only:
        peer_python = args.peer_python or _ensure_peer_venv()
        if peer_python is None:
            print("reference half skipped (see the message above); measuring ours only")
        else:
            pythons["reference"] = peer_python
    print(f"protocol: {args.repeat} run(s) per library per manifest, interleaved; runs "
          f"starting above load {args.quiet_load} are marked *; up to {args.settle:.0f} s "
          f"waited before each run for the load to settle; load now "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    for name in args.manifests:
        _compare(name, args, pythons, {"agilerl": ours_env, "reference": env})
    print("\nraw env + policy step rate (ceiling for the loop):")
    print(_raw_env_rate(sys.executable, ours_env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
