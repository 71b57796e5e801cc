"""MADDPG and MATD3 learn MPE simple_speaker_listener_v4 through the trainer (slow).

The listener must reach the landmark only the speaker sees (both agents get the same
reward, minus the squared distance, over 25 steps; the summed return counts it twice).
The random baseline is measured here over 100 episodes: uniform random actions give about
-79 per episode (standard deviation about 66, so a standard error of about 7 on that
mean), and standing still about -64. A trained member must lose at most 60% of what the
random policy loses (about -47) over 40 greedy episodes: about five standard errors above
the random mean and well above standing still. MADDPG and MATD3 reach -30 to -40 within
this budget (30,000 env steps, 2.5-3 min on two loaded cores), and about -20 with longer
training, where the listener follows the speaker's message.
"""

from __future__ import annotations

import numpy as np
import pytest

from agilerl.algorithms.core.multi_agent import MultiAgentStepper
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv
from agilerl.training.trainer import LocalTrainer

pytest.importorskip("mpe2")

ENV = "mpe2.simple_speaker_listener_v4"
EVAL_ENVS = 10


def _manifest(name: str) -> dict:
    algorithm = {"name": name, "batch_size": 128, "lr_actor": 1e-3, "lr_critic": 1e-3,
                 "learn_step": 8, "gamma": 0.95, "tau": 0.01}
    if name == "MATD3":
        algorithm["policy_freq"] = 2
    return {
        "algorithm": algorithm,
        "environment": {"name": ENV, "num_envs": 8},
        "network": {"latent_dim": 64, "arch": "mlp", "encoder_config": {"hidden_size": [64]},
                    "head_config": {"hidden_size": [64, 64]}},
        "replay_buffer": {"max_size": 100_000},
        "training": {"max_steps": 30_000, "evo_steps": 10_000, "pop_size": 1},
    }


def _eval_env() -> PettingZooVectorEnv:
    from mpe2 import simple_speaker_listener_v4

    return PettingZooVectorEnv([simple_speaker_listener_v4.parallel_env] * EVAL_ENVS)


def _random_return(env: PettingZooVectorEnv, rounds: int = 10) -> float:
    """Mean summed return of uniform random actions over ``rounds * EVAL_ENVS`` episodes
    (sub-env ``i`` of round ``r`` starts from seed ``1000 + r * EVAL_ENVS + i``)."""
    stepper = MultiAgentStepper(env)
    rng = np.random.default_rng(0)
    totals: list[float] = []
    for round_index in range(rounds):
        stepper.reset(seed=1000 + round_index * EVAL_ENVS)
        total = np.zeros(env.num_envs)
        running = np.ones(env.num_envs, dtype=bool)
        while running.any():
            actions = {a: rng.integers(env.single_action_space(a).n, size=env.num_envs)
                       for a in env.agents}
            _, rewards, _, _, acted, ended, _ = stepper.step(actions)
            for agent in env.agents:
                total += np.where(acted[agent] & running, rewards[agent], 0.0)
            running &= ~ended
        totals.extend(total.tolist())
    return float(np.mean(totals))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MADDPG", "MATD3"])
def test_speaker_listener_is_learned(name: str) -> None:
    env = _eval_env()
    random_return = _random_return(env)
    assert random_return < -60  # the task is not trivial for chance
    trainer = LocalTrainer.from_manifest(manifest=_manifest(name), seed=0)
    population, _ = trainer.train(verbose=False)
    fitness = population[0].test(env, loop=4, seed=500)  # 40 greedy episodes
    assert fitness >= 0.6 * random_return, (fitness, random_return)
