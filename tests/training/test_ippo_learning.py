"""IPPO learns MPE simple_spread_v3 (slow): the greedy summed-over-agents return ends well
above a uniform random policy's, both measured here on the same env."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from agilerl.algorithms import IPPO
from agilerl.algorithms.core.multi_agent import agent_spaces, evaluate_multi_agent
from agilerl.envs import make_pz_vector_env
from agilerl.training.multi_agent_on_policy import train_multi_agent_on_policy_member

#: Required gain of the trained greedy policy over the random policy's mean summed return.
#: Random episodes (3 agents x 25 steps) sum to about -75 to -81 with a standard deviation
#: of about 20, so the 64-episode mean is known to within ~2.5 (one standard error); a gain
#: of 20 is eight standard errors and two thirds of the ~30 that 100k steps of IPPO reach.
MARGIN = 20.0


class _Uniform:
    def __init__(self, env, seed: int) -> None:
        self.env = env
        for offset, agent in enumerate(env.possible_agents):
            env.action_space(agent).seed(seed + offset)

    def greedy_action(self, obs):
        return {a: self.env.action_space(a).sample() for a in self.env.possible_agents}


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ippo_improves_simple_spread_well_beyond_random() -> None:
    torch.set_num_threads(1)
    spec = SimpleNamespace(name="mpe2.simple_spread_v3", num_envs=16, sync=True)
    env = make_pz_vector_env(spec)
    random_return = evaluate_multi_agent(_Uniform(env, 0), env, seed=1, loop=4)
    obs, act = agent_spaces(env)
    net = {"latent_dim": 64, "encoder_config": {"arch": "mlp", "hidden_size": [64]},
           "head_config": {"hidden_size": [64]}}
    agent = IPPO(obs, act, net_config=net, seed=0, lr=1e-3, learn_step=1024, batch_size=256,
                 ent_coef=0.01, gamma=0.95)
    assert list(agent.units) == ["agent"]  # three homogeneous agents share one network
    for call in range(12):  # 98,304 env steps
        train_multi_agent_on_policy_member(agent, env, 8192, seed=call)
    learned = agent.test(env, seed=100, loop=4)
    env.close()
    assert np.isfinite(random_return)
    assert learned >= random_return + MARGIN, (learned, random_return)
