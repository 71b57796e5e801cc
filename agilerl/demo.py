"""``make demo`` / ``python -m agilerl.demo``: evolve a DQN population that solves CartPole.

Trains a population of DQN agents on ``CartPole-v1`` with tournament selection and mutation,
with the live progress display, until the best agent's evaluation (mean return over its
evaluation episodes) averages at least 475 over three generations (the ``target_score``
rule of :mod:`agilerl.training.early_stop`), then saves the elite and prints where it is.
A few minutes on two CPU cores. Options: ``--seed``, ``--run-dir``, ``--no-verbose``.

The manifest is the YAML below, an ordinary training manifest: ``python -m agilerl.demo
--print-manifest > demo.yaml`` writes it out for ``agilerl train demo.yaml``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

DEMO_MANIFEST = """\
algorithm:
  name: DQN
  batch_size: 64
  lr: 0.001
  learn_step: 1
  gamma: 0.99
  tau: 0.005
  double: true

environment:
  name: CartPole-v1
  num_envs: 8

network:
  latent_dim: 64
  encoder_config:
    hidden_size: [64]
  head_config:
    hidden_size: [64]

mutation:
  probabilities:
    no_mut: 0.4
    arch_mut: 0.2
    new_layer: 0.2
    params_mut: 0.2
    act_mut: 0.0
    rl_hp_mut: 0.2
  rl_hp_selection:
    lr:
      min: 0.0001
      max: 0.005
    batch_size:
      min: 32
      max: 256
    learn_step:
      min: 1
      max: 4
  mutation_sd: 0.1
  rand_seed: 42

selection_strategy:
  tournament_size: 2
  elitism: true

replay_buffer:
  max_size: 50_000

training:
  max_steps: 200_000
  pop_size: 4
  evo_steps: 5_000
  eval_loop: 1
  target_score: 475.0
  learning_delay: 1_000
  eps_start: 1.0
  eps_end: 0.05
  eps_decay: 0.995
"""

DEFAULT_SEED = 1


def demo_manifest() -> JsonObject:
    """The demo manifest as a mapping."""
    import yaml

    return dict(yaml.safe_load(DEMO_MANIFEST))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agilerl.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="run folder (default runs/CartPole-v1-DQN-{timestamp})")
    parser.add_argument("--verbose", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--print-manifest", action="store_true",
                        help="print the demo manifest and exit")
    args = parser.parse_args(argv)
    if args.print_manifest:
        sys.stdout.write(DEMO_MANIFEST)
        return 0

    import torch

    from agilerl.training.trainer import LocalTrainer, TrainingInterrupted

    torch.set_num_threads(1)  # small networks: threads only add contention on 2 cores
    trainer = LocalTrainer.from_manifest(manifest=demo_manifest(), device="cpu", seed=args.seed)
    try:
        _, fitnesses = trainer.train(
            verbose=args.verbose, save_elite=True,
            run_dir=args.run_dir if args.run_dir is not None else "auto",
            source="agilerl.demo",
        )
    except TrainingInterrupted as exc:
        print(f"demo interrupted; checkpoint: {exc.checkpoint}", file=sys.stderr)
        return 128 + exc.signum  # 130 SIGINT, 143 SIGTERM
    best = max(fitnesses)
    elite = trainer.last_elite_path
    print(f"\nbest evaluation: {best:.1f} (target 475)")
    print(f"elite agent saved to: {elite}")
    print(f"load it with: from agilerl.algorithms import DQN; agent = DQN.load({str(elite)!r})")
    return 0 if best >= 475 else 1


if __name__ == "__main__":
    sys.exit(main())
