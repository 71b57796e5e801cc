"""Synthetic run folders for the dashboard's tests, its load-time benchmark and its screenshots.

A :class:`SyntheticRun` writes what a training run writes (``manifest.yaml``, ``metrics.csv``
with the columns of ``agilerl.training.loop.generation_metrics``, ``events.jsonl`` in format
v1, ``checkpoints/`` and ``elite.pt``) one generation at a time, so a test can grow a run
while the page is open. Fitness follows a noisy learning curve; selection clones the fitter
members, mutation perturbs a learning rate or a batch size.

    python bench/dashboard_synthetic.py OUT_DIR [--runs 3] [--generations 100] [--pop 16]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

EVO_STEPS = 2_000
_KINDS = ("none", "parameters", "rl_hp", "architecture", "activation")


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class SyntheticRun:
    """A run folder written generation by generation (``begin``, ``generation``, ``end``)."""

    def __init__(self, folder: Path, pop_size: int = 16, *, algorithm: str = "PPO",
                 env: str = "CartPole-v1", seed: int = 0, events: bool = True,
                 title: str | None = None, pace: float = 1.0):
        self.folder = Path(folder)
        self.pop_size = pop_size
        self.algorithm, self.env, self.events = algorithm, env, events
        self.title = title
        self.pace = pace
        self.rng = random.Random(seed)
        self.seed = seed
        self.gen = 0
        self.clock = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)
        self.skill = [self.rng.uniform(0, 0.1) for _ in range(pop_size)]
        self.steps = [0] * pop_size
        self.hps = [{"lr": 10 ** self.rng.uniform(-4, -3), "batch_size": self.rng.choice([64, 128]),
                     "learn_step": 2048} for _ in range(pop_size)]
        self.fields: list[str] = []

    def _event(self, event: str, **fields: Any) -> None:
        if not self.events:
            return
        line = json.dumps({"v": 1, "event": event, "time": _iso(self.clock), **fields})
        with (self.folder / "events.jsonl").open("a") as handle:
            handle.write(line + "\n")

    def begin(self) -> SyntheticRun:
        """Write the manifest and the run_start event."""
        self.folder.mkdir(parents=True, exist_ok=True)
        manifest = {"algorithm": {"name": self.algorithm, "lr": 0.0003, "batch_size": 64},
                    "environment": {"name": self.env, "num_envs": 8},
                    "training": {"pop_size": self.pop_size, "evo_steps": EVO_STEPS,
                                 "max_steps": 1_000_000},
                    "mutation": {"rl_hp_selection": {"lr": {"min": 1e-5, "max": 1e-2}}}}
        if self.title is not None:
            manifest["name"] = self.title
        (self.folder / "manifest.yaml").write_text(
            f"# resolved manifest of this run (seed {self.seed})\n"
            + yaml.safe_dump(manifest, sort_keys=False))
        self._event("run_start", algorithm=self.algorithm, env=self.env, pop_size=self.pop_size,
                    max_steps=1_000_000, evo_steps=EVO_STEPS, seed=self.seed, resumed=False,
                    members=[{"member": m, "hyperparameters": dict(self.hps[m]),
                              "architecture": "mlp [64, 64]"} for m in range(self.pop_size)])
        return self

    def _fitness(self, member: int) -> float:
        return 500 * (1 - math.exp(-3 * self.skill[member])) + self.rng.gauss(0, 12)

    def _metrics(self, fitness: list[float], losses: list[float]) -> dict[str, Any]:
        best = max(range(self.pop_size), key=lambda m: fitness[m])
        row: dict[str, Any] = {
            "train/global_step": sum(self.steps), "train/generation": self.gen,
            "train/steps_per_second": 900 + self.rng.uniform(-50, 50),
            "eval/mean_fitness": sum(fitness) / len(fitness), "eval/best_fitness": fitness[best],
            "train/mean_score": sum(fitness) / len(fitness) * 0.9,
            "eval/target_window_mean": fitness[best], "train/mean_loss": sum(losses) / len(losses)}
        for m in range(self.pop_size):
            row[f"train/agent_{m}/local_steps"] = self.steps[m]
            row[f"eval/agent_{m}/fitness"] = fitness[m]
            row[f"train/agent_{m}/score"] = fitness[m] * 0.9
            row[f"train/agent_{m}/loss"] = losses[m]
            row.update({f"train/agent_{m}/{k}": v for k, v in self.hps[m].items()})
        return row

    def _write_row(self, row: dict[str, Any]) -> None:
        path = self.folder / "metrics.csv"
        new = not self.fields
        if new:
            self.fields = list(row)
        with path.open("a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=self.fields)
            if new:
                writer.writeheader()
            writer.writerow(row)

    def generation(self) -> None:
        """Train and evaluate every member, log the row and events, select and mutate."""
        self.gen += 1
        self.clock += timedelta(seconds=30)
        for m in range(self.pop_size):
            self.steps[m] += EVO_STEPS
            self.skill[m] += self.rng.uniform(0, 0.04) * self.pace * (1 + 200 * self.hps[m]["lr"])
        fitness = [self._fitness(m) for m in range(self.pop_size)]
        losses = [abs(self.rng.gauss(1 / (1 + self.skill[m]), 0.05)) for m in range(self.pop_size)]
        self._write_row(self._metrics(fitness, losses))
        self._event("generation", generation=self.gen, env_steps=sum(self.steps), members=[
            {"member": m, "fitness": fitness[m], "steps": self.steps[m],
             "hyperparameters": dict(self.hps[m])} for m in range(self.pop_size)])
        self._select(fitness)

    def _select(self, fitness: list[float]) -> None:
        elite = max(range(self.pop_size), key=lambda m: fitness[m])
        parents = [elite] + [max(self.rng.sample(range(self.pop_size), 2), key=lambda m: fitness[m])
                             for _ in range(self.pop_size - 1)]
        self.skill = [self.skill[p] for p in parents]
        self.steps = [self.steps[p] for p in parents]
        self.hps = [dict(self.hps[p]) for p in parents]
        self._event("selection", generation=self.gen, members=[
            {"member": m, "parent": p, "elite": m == 0} for m, p in enumerate(parents)])
        for m in range(1, self.pop_size):
            kind = self.rng.choice(_KINDS)
            changes = []
            if kind == "rl_hp":
                old = self.hps[m]["lr"]
                self.hps[m]["lr"] = min(max(old * self.rng.choice([0.8, 1.25]), 1e-5), 1e-2)
                changes = [{"name": "lr", "old": old, "new": self.hps[m]["lr"]}]
            self._event("mutation", generation=self.gen, member=m, kind=kind, changes=changes,
                        description=f"{kind} mutation of member {m}")

    def checkpoint(self) -> None:
        """A finished checkpoint folder (small placeholder member files and an index)."""
        name = f"gen{self.gen:05d}-step{sum(self.steps):010d}"
        folder = self.folder / "checkpoints" / name
        folder.mkdir(parents=True, exist_ok=True)
        for m in range(self.pop_size):
            (folder / f"member_{m}.pt").write_bytes(b"synthetic member %d" % m)
        (folder / "index.json").write_text(json.dumps({"format": "agilerl-checkpoint", "summary": {
            "global_step": sum(self.steps), "generation": self.gen, "elite_member": 0}}))
        self._event("checkpoint", generation=self.gen, env_steps=sum(self.steps),
                    path=f"checkpoints/{name}", elite_member=0)

    def end(self, status: str = "finished") -> None:
        """The run_end event and the elite file."""
        (self.folder / "elite.pt").write_bytes(b"synthetic elite")
        best = max((self._fitness(m) for m in range(self.pop_size)), default=None)
        self._event("run_end", status=status, generations=self.gen, env_steps=sum(self.steps),
                    best_fitness=best, elite_member=0)


def write_run(folder: Path, generations: int = 100, pop_size: int = 16, *,
              finished: bool = True, checkpoint_every: int = 25, **options: Any) -> SyntheticRun:
    """A whole run folder of ``generations`` generations."""
    run = SyntheticRun(folder, pop_size, **options).begin()
    for _ in range(generations):
        run.generation()
        if checkpoint_every and run.gen % checkpoint_every == 0:
            run.checkpoint()
    if finished:
        run.end()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--generations", type=int, default=100)
    parser.add_argument("--pop", type=int, default=16)
    args = parser.parse_args()
    for i in range(args.runs):
        algo, env = [("PPO", "CartPole-v1"), ("DQN", "LunarLander-v3"), ("TD3", "Pendulum-v1")][i % 3]
        write_run(args.out / f"{env}-{algo}-2026120{i + 1}-120000", args.generations, args.pop,
                  algorithm=algo, env=env, seed=i)
        print(args.out / f"{env}-{algo}-2026120{i + 1}-120000")


if __name__ == "__main__":
    main()
