"""Our trainer alone, quickly: steps/s, time to first step, peak RSS, fitness.

    python bench/train_bench.py [--manifests dqn_cartpole ppo_cartpole] [--max-steps 20000]

Runs each benchmark manifest (``../shared/bench-manifests``) with a reduced budget in a fresh
process, measured exactly as ``bench/peer.py`` measures both libraries (same driver), then
prints the raw vectorised env + policy step rate for the loop-overhead comparison.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _peer_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("_peer_bench", HERE / "peer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", nargs="+", default=["dqn_cartpole", "ppo_cartpole"])
    parser.add_argument("--max-steps", type=int, default=20_000)
    parser.add_argument("--target", type=float, default=475.0,
                        help="return to time (default 475, CartPole-v1 solved)")
    parser.add_argument("--collect-only", action="store_true",
                        help="also measure DQN with learning disabled (loop + env + policy only)")
    args = parser.parse_args(argv)
    peer = _peer_module()
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(peer.REPO)}
    print(peer.HEADER)  # the load and others' CPU columns stay empty: one run each
    for name in args.manifests:
        result = peer._measure(sys.executable, peer._manifest_path(name),
                               args.max_steps, env)
        print(peer._row(name, result, args.target), flush=True)
    if args.collect_only:
        result = peer._measure(sys.executable, peer._manifest_path("dqn_cartpole"),
                               args.max_steps, env, ["training.learning_delay=1000000000"])
        print(peer._row("dqn-collect", result, args.target), flush=True)
    print("\nraw env + policy step rate (ceiling for the loop):")
    print(peer._raw_env_rate(sys.executable, env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
