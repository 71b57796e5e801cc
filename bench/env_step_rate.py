"""Raw vectorised env step rate for CartPole-v1: the ceiling for the training loop.

Prints env steps per second (sub-env steps, i.e. ``num_envs`` per ``step`` call) with 16
and 1 sub-envs, with random actions and with a batched policy forward pass (a small torch
MLP under ``torch.inference_mode``), for each vectoriser:

* ``native``: Gymnasium's NumPy ``CartPoleVectorEnv``;
* ``sync``: Gymnasium's ``SyncVectorEnv``;
* ``async``: Gymnasium's ``AsyncVectorEnv`` (one process per sub-env, as the reference);
* ``chunked``: our ``ChunkedAsyncVectorEnv`` (one process per core), what
  ``make_vector_env`` uses for ``sync: false`` when no native env applies.

    python bench/env_step_rate.py [--seconds 3] [--num-envs 16 1] [--modes native sync async chunked]
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import numpy as np


def _policy(obs_dim: int, n_actions: int):  # type: ignore[no-untyped-def]
    import torch

    torch.set_num_threads(1)
    net = torch.nn.Sequential(
        torch.nn.Linear(obs_dim, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, n_actions),
    )
    net.eval()

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            q = net(torch.from_numpy(obs))
            return q.argmax(dim=1).numpy()

    return act


def _build(mode: str, num_envs: int):  # type: ignore[no-untyped-def]
    """The vectoriser named by ``mode``, built directly so every mode runs at every size."""
    import gymnasium
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    from agilerl.envs import AUTORESET_MODE, ChunkedAsyncVectorEnv, make_env_factory

    if mode == "native":
        return gymnasium.make_vec(
            "CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point"
        )
    factory = make_env_factory(SimpleNamespace(name="CartPole-v1", num_envs=num_envs))
    vectoriser = {"sync": SyncVectorEnv, "async": AsyncVectorEnv, "chunked": ChunkedAsyncVectorEnv}
    return vectoriser[mode]([factory] * num_envs, autoreset_mode=AUTORESET_MODE)


def measure(mode: str, num_envs: int, with_policy: bool, seconds: float) -> float:
    """Sub-env steps per second for one configuration."""
    env = _build(mode, num_envs)
    obs, _ = env.reset(seed=0)
    act = _policy(obs.shape[1], int(env.single_action_space.n)) if with_policy else None
    rng = np.random.default_rng(0)

    def step_once(obs: np.ndarray) -> np.ndarray:
        actions = act(obs) if act is not None else rng.integers(0, 2, size=num_envs)
        return env.step(actions)[0]

    for _ in range(50):  # warm-up
        obs = step_once(obs)
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(20):
            obs = step_once(obs)
        calls += 20
        now = time.perf_counter()
        if now >= deadline:
            break
    env.close()
    return calls * num_envs / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 1])
    parser.add_argument("--modes", nargs="+", default=["native", "sync", "async", "chunked"])
    args = parser.parse_args()
    from agilerl.envs import vector_mode

    print(f"CartPole-v1 env steps/s (each figure measured for {args.seconds:g} s)")
    print(f"{'vectoriser':<10} {'num_envs':>8} {'random actions':>15} {'MLP policy':>12}")
    for num_envs in args.num_envs:
        for mode in args.modes:
            random_rate = measure(mode, num_envs, False, args.seconds)
            policy_rate = measure(mode, num_envs, True, args.seconds)
            print(f"{mode:<10} {num_envs:>8} {random_rate:>15,.0f} {policy_rate:>12,.0f}")
        chosen = vector_mode(SimpleNamespace(name="CartPole-v1", num_envs=num_envs))
        print(f"  make_vector_env picks '{chosen}' for CartPole-v1 with {num_envs} env(s)")
    print("(sync: false without a native env means 'chunked'; sync: true means 'sync')")


if __name__ == "__main__":
    main()
