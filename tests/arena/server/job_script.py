"""Test-only worker with the training CLI's interface, for scheduler tests.

    job_script.py MANIFEST --checkpoint-path P --checkpoint-steps N --run-dir R --no-verbose
                  [--resume-from-checkpoint DIR]

Counts to ``training.max_steps`` (per agent) in ``--checkpoint-steps`` increments, printing
a line, appending a metrics row and writing a checkpoint folder (``index.json`` last) per
increment. Like the real trainer, the metrics and checkpoints count the whole population's
steps (``global_step`` = per-agent steps x ``pop_size``). ``JOB_MODE`` selects behaviour:
``ok`` (default), ``fail`` (exit 3 after the first checkpoint), ``fail_late`` (unless
resuming, exit 3 after logging the second increment's metrics row, before its checkpoint),
``stubborn``
(ignores SIGTERM, so only SIGKILL ends it). ``JOB_STEP_S`` is the pause per increment.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import yaml


def _checkpoint(root: Path, steps: int, agents: int) -> None:
    folder = root / f"step_{steps}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "member_0.pt").write_bytes(b"x" * 100)
    summary = {"global_step": steps * agents, "evaluation_score": float(steps % 7),
               "training_score": 1.0, "generation": steps // 100, "elite_member": 1}
    (folder / "index.json").write_text(json.dumps({"summary": summary}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--checkpoint-path", type=Path, required=True)
    parser.add_argument("--checkpoint-steps", type=int, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--resume-from-checkpoint", type=Path, default=None)
    parser.add_argument("--no-verbose", action="store_true")
    args = parser.parse_args()
    mode = os.environ.get("JOB_MODE", "ok")
    pause = float(os.environ.get("JOB_STEP_S", "0.02"))
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    training = yaml.safe_load(args.manifest.read_text())["training"]
    max_steps, agents = int(training["max_steps"]), int(training.get("pop_size", 1))
    steps = 0
    if args.resume_from_checkpoint is not None:
        index = json.loads((args.resume_from_checkpoint / "index.json").read_text())
        steps = int(index["summary"]["global_step"]) // agents
        print(f"resuming from {args.resume_from_checkpoint.name} at step {steps}", flush=True)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    metrics = args.run_dir / "metrics.csv"
    if not metrics.exists():
        metrics.write_text("train/global_step,eval/mean_fitness\n")
    print(f"training to {max_steps} steps", flush=True)
    print("a warning on stderr", file=sys.stderr, flush=True)
    while steps < max_steps:
        time.sleep(pause)
        steps = min(max_steps, steps + args.checkpoint_steps)
        with metrics.open("a") as fh:
            fh.write(f"{steps * agents},{steps / max_steps:.3f}\n")
        if mode == "fail_late" and args.resume_from_checkpoint is None \
                and steps > args.checkpoint_steps:
            print("boom: crashed before the checkpoint", file=sys.stderr, flush=True)
            return 3
        _checkpoint(args.checkpoint_path, steps, agents)
        print(f"step {steps}", flush=True)
        if mode == "fail":
            print("boom: simulated crash", file=sys.stderr, flush=True)
            return 3
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
