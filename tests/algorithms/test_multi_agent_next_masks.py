"""Next-step action masks in off-policy multi-agent learning (MADDPG, MATD3).

The target action at ``o'`` must be legal under the mask that applies at ``o'``: the loop
stores the next observation's masks with every transition (``next_action_mask``), and
the critic target is computed with target actions drawn only from legal actions, even
when the target actor prefers an illegal one.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agilerl.algorithms import MADDPG, MATD3
from agilerl.algorithms.core.multi_agent import NEXT_MASK, agent_spaces
from agilerl.components.multi_agent_replay_buffer import MultiAgentReplayBuffer
from agilerl.envs import multi_agent_probe
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv
from agilerl.training.multi_agent_off_policy import train_multi_agent_off_policy_member

NET = {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
       "head_config": {"hidden_size": [16]}}
SEEKERS = ("seeker_0", "seeker_1")


def _filled(cls, steps: int = 64):
    env = PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(action_masks=True)] * 4)
    obs, act = agent_spaces(env)
    agent = cls(obs, act, net_config=NET, seed=0, batch_size=16, learn_step=10**6)
    memory = MultiAgentReplayBuffer(1_000, seed=0)
    train_multi_agent_off_policy_member(agent, env, memory, steps, seed=0)
    return agent, memory


def test_the_next_observations_masks_are_stored_with_each_transition() -> None:
    _, memory = _filled(MADDPG)
    batch = memory.sample(64, np.random.default_rng(0))
    assert set(batch[NEXT_MASK]) == set(SEEKERS)  # the pointer has no mask
    for seeker in SEEKERS:
        masks = batch[NEXT_MASK][seeker].astype(bool)
        assert masks.shape == (64, 3)
        # The probe's mask allows the target the next observation shows (one-hot) and
        # one other action: two legal actions where the seeker is still there, none
        # where its episode is over (zero observation and mask).
        live = batch["next_obs"][seeker].any(-1)
        target = batch["next_obs"][seeker].argmax(-1)
        assert live.any() and (masks[live].sum(-1) == 2).all() and not masks[~live].any()
        assert masks[live][np.arange(int(live.sum())), target[live]].all()


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
def test_target_actions_are_legal_under_the_next_mask(cls) -> None:
    agent, memory = _filled(cls)
    batch = memory.sample(64, np.random.default_rng(1))
    # Make every target actor prefer action 2 by far, then forbid it at o'.
    for seeker in SEEKERS:
        head = [m for m in agent.unit_network("actor_target", seeker).modules()
                if isinstance(m, torch.nn.Linear)][-1]
        with torch.no_grad():
            head.bias.copy_(torch.tensor([0.0, 0.0, 1e4]))
        batch[NEXT_MASK][seeker] = np.tile(np.array([True, True, False]), (64, 1))
    seen: dict[str, torch.Tensor] = {}
    next_value = agent._next_value

    def recording(name, next_obs, next_actions):
        seen.update({a: next_actions[a].detach().clone() for a in SEEKERS})
        return next_value(name, next_obs, next_actions)

    agent._next_value = recording
    agent.learn(batch)
    for seeker in SEEKERS:
        assert torch.all(seen[seeker][:, 2] == 0), seeker
        assert torch.allclose(seen[seeker].sum(-1), torch.ones(64))


def test_ippo_update_uses_the_masks_in_force_when_acting() -> None:
    """Before any gradient step, the update's log-probabilities equal the stored ones
    (approximate KL 0) only when the masks of the observations acted in are applied:
    without them, or with the next step's masks, the masked-out logits count again."""
    from agilerl.algorithms import IPPO
    from agilerl.training.multi_agent_on_policy import train_multi_agent_on_policy_member

    env = PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(action_masks=True)] * 4)
    obs, act = agent_spaces(env)
    agent = IPPO(obs, act, net_config=NET, seed=0, learn_step=64, batch_size=10**3,
                 update_epochs=1, action_std_init=0.5)
    # Logits far apart, so that a wrongly applied mask changes the log-probabilities.
    head = agent.unit_network("actor_critic", "seeker").heads["policy"].linears[-1]
    with torch.no_grad():
        head.bias.copy_(torch.tensor([0.0, 2.0, 4.0]))
    result = train_multi_agent_on_policy_member(agent, env, 64, seed=0)
    assert result["learn_updates"] == 1
    assert abs(result["metrics"]["approx_kl"]) < 1e-6
