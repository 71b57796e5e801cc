"""Batched population updates (``training.batched_updates``): update rate and train speed.

    python bench/batched_updates.py [--pop 4] [--updates N] [--manifest dqn_cartpole]
                                    [--hidden H] [--batch-size B] [--max-steps 20000]
                                    [--repeat 1] [--seed 1] [--same-arch] [--train-pop N]
                                    [--skip-train] [--skip-updates]

1. Time per update of ``--pop`` same-architecture members (the algorithm, network and
   batch size of the manifest): one member's ``agent.learn``, one ``agent.learn`` per
   member, and one stacked update of them all (:mod:`agilerl.algorithms.stacked_groups`)
   on the same batches; one torch thread, as a member trains; wall and CPU time (CPU time
   is steadier on a loaded machine). Off-policy (DQN, CQN): one gradient step on a sampled
   batch (``--updates`` default 300). PPO (``--manifest ppo_cartpole``): one whole update
   (every epoch and minibatch) on a rollout of ``learn_step`` env steps each member
   collected in its own env (``--updates`` default 10).
2. Train env steps/s of the manifest without ``training.batched_updates`` (the default
   worker count, and one process) and with it (always one process), each a fresh process
   with the same ``--seed``; evaluation time excluded; an offline manifest's steps are
   gradient updates; with the group sizes of every generation. ``--same-arch`` mutates
   hyperparameters only, so the members keep one architecture.

Prints the load average with every figure: on a shared machine the figures are only as good
as it is quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer  # noqa: E402  (bench/peer.py, run as a script beside this one)

ROUNDS = 5

#: Training runs compared (driver flags): the default (one worker per core), the members in
#: turn in one process (what batching replaces), and batched (always one process).
RUNS = {"unbatched, default workers": [], "unbatched, 1 process": ["--one-process"],
        "batched": ["--batched"]}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _members(manifest: dict, pop: int) -> list:
    """The manifest's initial population of ``pop`` members (no mutation yet)."""
    import copy

    from agilerl.training.trainer import LocalTrainer

    manifest = copy.deepcopy(manifest)
    manifest["training"]["pop_size"] = pop
    return list(LocalTrainer.from_manifest(manifest=manifest, seed=0).population)


def _batch(rng: np.random.Generator, agent, rows: int) -> dict[str, np.ndarray]:
    shape = agent.observation_space.shape
    return {"obs": rng.normal(size=(rows, *shape)).astype(np.float32),
            "action": rng.integers(0, agent.num_actions, size=rows),
            "reward": rng.normal(size=rows).astype(np.float32),
            "next_obs": rng.normal(size=(rows, *shape)).astype(np.float32),
            "done": rng.random(rows) < 0.05}


def _rollouts(manifest: dict, agents: list) -> list:
    """One rollout of ``learn_step`` env steps per PPO member, each in its own env."""
    import copy

    from agilerl.training.experience import on_policy_member_run
    from agilerl.training.trainer import LocalTrainer

    manifest = copy.deepcopy(manifest)
    manifest["training"]["pop_size"] = 1
    make_env = LocalTrainer.from_manifest(manifest=manifest, seed=0).env_builder()
    return [next(on_policy_member_run(a, make_env(), int(a.learn_step), seed=i)).rollout
            for i, a in enumerate(agents)]


def update_rates(manifest: dict, pop: int, updates: int | None) -> None:
    import torch

    from agilerl.algorithms.stacked_groups import make_group

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    agents = _members(manifest, pop)
    on_policy = hasattr(agents[0], "actor_critic")
    if on_policy:
        batches = _rollouts(manifest, agents)
        updates = updates or 10
        what = (f"PPO update (learn_step {agents[0].learn_step}, batch {agents[0].batch_size}, "
                f"{agents[0].update_epochs} epochs)")
    else:
        batches = [_batch(rng, a, a.batch_size) for a in agents]
        updates = updates or 300
        what = f"update step (batch {agents[0].batch_size})"
    group = make_group(agents)
    members = list(range(pop))
    ways = {
        "one member": lambda: agents[0].learn(batches[0]),
        f"{pop} unbatched": lambda: [a.learn(b) for a, b in zip(agents, batches, strict=True)],
        f"{pop} batched": lambda: group.learn(members, batches),
    }
    closed = getattr(group, "chain", None) is not None  # PPO: autograd
    gradient = "closed form" if closed else "autograd"
    print(f"time per {what} of {pop} same-architecture {type(agents[0]).__name__} "
          f"members (hidden {manifest['network']['encoder_config']['hidden_size']}, "
          f"batched gradient in {gradient}, 1 torch thread; best of "
          f"{ROUNDS} alternating rounds; CPU = this thread's CPU time)")
    wall = dict.fromkeys(ways, float("inf"))
    cpu = dict.fromkeys(ways, float("inf"))
    count = max(1, updates // ROUNDS)
    for _ in range(ROUNDS):  # alternate, so every way sees the same (shared-machine) load
        for name, step in ways.items():
            for _ in range(1 if on_policy else 5):
                step()
            start, start_cpu = time.perf_counter(), time.thread_time()
            for _ in range(count):
                step()
            cpu[name] = min(cpu[name], (time.thread_time() - start_cpu) / count)
            wall[name] = min(wall[name], (time.perf_counter() - start) / count)
    one = cpu["one member"]
    for name in ways:
        print(f"  {name:>12} {wall[name] * 1e3:7.3f} ms wall  {cpu[name] * 1e3:7.3f} ms CPU"
              f"  ({cpu[name] / one:.2f}x one member's CPU)  load {_load()}")
    if not on_policy:
        flops = _update_flops(agents[0])
        print(f"  arithmetic: {flops / 1e6:.1f} MFLOP per member update (matrix products); "
              f"one member {flops / one / 1e9:.1f} GFLOP/s, {pop} batched "
              f"{pop * flops / cpu[f'{pop} batched'] / 1e9:.1f} GFLOP/s on one thread")
    speed_up = cpu[f"{pop} unbatched"] / cpu[f"{pop} batched"]
    print(f"  batched speed-up over {pop} unbatched updates: {speed_up:.2f}x (CPU), "
          f"{wall[f'{pop} unbatched'] / wall[f'{pop} batched']:.2f}x (wall)")


def _update_flops(agent) -> float:
    """Floating-point operations of the matrix products in one DQN-family update: the
    online pass at s, the target pass at s' (and the online one for double DQN), and the
    backward pass (weight and input gradients, about two passes)."""
    import torch

    macs = sum(m.in_features * m.out_features for m in agent.actor.modules()
               if isinstance(m, torch.nn.Linear))
    passes = 4 + (1 if getattr(agent, "double", False) else 0)
    return 2.0 * agent.batch_size * macs * passes


def _manifest(args: argparse.Namespace, path: Path) -> dict:
    """The manifest at ``path`` with the size options of ``args`` applied."""
    import yaml

    data = yaml.safe_load(path.read_text())
    peer._resolve_data_files(data, path.parent)
    if args.hidden:
        data["network"] = {"latent_dim": args.hidden,
                           "encoder_config": {"hidden_size": [args.hidden]},
                           "head_config": {"hidden_size": [args.hidden]}}
    if args.batch_size:
        data["algorithm"]["batch_size"] = args.batch_size
    return data


def _driver(args: argparse.Namespace) -> None:
    """One training run (in a fresh process): prints a JSON line with its figures."""
    from agilerl.population import lockstep
    from agilerl.training.trainer import LocalTrainer

    data = _manifest(args, Path(args.driver))
    data["training"]["batched_updates"] = args.batched
    if args.one_process:
        data["training"]["num_workers"] = 1
    if args.train_pop:
        data["training"]["pop_size"] = args.train_pop
    if args.max_steps:
        data["training"]["max_steps"] = args.max_steps
        data["training"]["evo_steps"] = min(data["training"]["evo_steps"], args.max_steps)
    if args.same_arch:  # mutate hyperparameters only: the members keep one architecture
        data.setdefault("mutation", {})["probabilities"] = {
            "no_mut": 0.5, "arch_mut": 0.0, "new_layer": 0.0, "params_mut": 0.0,
            "act_mut": 0.0, "rl_hp_mut": 0.5}
    groups: list[list[int]] = []
    build = lockstep._learners

    def recording(agents):  # type: ignore[no-untyped-def]
        learners = build(agents)
        found = {id(g): g for g, _ in learners.values()}.values()
        groups.append(sorted((len(g.agents) for g in found), reverse=True))
        return learners

    lockstep._learners = recording
    trainer = LocalTrainer.from_manifest(manifest=data, seed=args.seed)
    evaluating = [0.0]
    for cls in {type(agent) for agent in trainer.population}:
        original = cls.test

        def test(self, *args, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return _original(self, *args, **kwargs)
            finally:
                evaluating[0] += time.perf_counter() - start

        cls.test = test
    start = time.perf_counter()
    population, fitnesses = trainer.train(verbose=False)
    seconds = time.perf_counter() - start - evaluating[0]
    steps = sum(int(agent.steps[-1]) for agent in population)
    print(json.dumps({"steps_per_second": steps / seconds, "best": max(fitnesses),
                      "groups": groups, "train_seconds": seconds}))


def train_rates(path: Path, args: argparse.Namespace, argv: list[str]) -> None:
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(peer.REPO)}
    print(f"train steps/s of {path.name} (seed {args.seed}"
          + (f", pop_size={args.train_pop}" if args.train_pop else "")
          + (f", hidden {args.hidden}" if args.hidden else "")
          + (f", batch {args.batch_size}" if args.batch_size else "")
          + (f", max_steps={args.max_steps}" if args.max_steps else "")
          + (", hyperparameter mutation only" if args.same_arch else "")
          + "; evaluation excluded)")
    for attempt in range(args.repeat):
        for label, flags in RUNS.items():
            cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--driver", str(path)]
            cmd += flags
            batched = "--batched" in flags
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(f"  {label:>22} FAILED: {proc.stderr.strip()[-800:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"  {label:>22} {r['steps_per_second']:8.0f} steps/s  best {r['best']:.1f}"
                  f"  train {r['train_seconds']:.1f} s  load {_load()}"
                  + (f"  groups per generation {r['groups']}" if batched else ""))
        if attempt + 1 < args.repeat:
            print("  --")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default="dqn_cartpole")
    parser.add_argument("--pop", type=int, default=4)
    parser.add_argument("--updates", type=int, default=None,
                        help="updates timed per way (default: 300; PPO: 10 whole updates)")
    parser.add_argument("--max-steps", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=None,
                        help="this width for every hidden layer and the latent")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--skip-train", action="store_true")
    parser.add_argument("--skip-updates", action="store_true")
    parser.add_argument("--same-arch", action="store_true",
                        help="train with hyperparameter mutation only (one architecture)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train-pop", type=int, default=None,
                        help="training runs: this pop_size instead of the manifest's")
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    parser.add_argument("--batched", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.driver:
        _driver(args)
        return 0
    path = peer._manifest_path(args.manifest)
    if not args.skip_updates:
        update_rates(_manifest(args, path), args.pop, args.updates)
    if not args.skip_train:
        train_rates(path, args, list(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
