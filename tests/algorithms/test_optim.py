"""Our Adam: same updates as torch's fused Adam, state round trips, no torch._dynamo."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from agilerl.networks.optim import Adam


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 2))


def _train(net: nn.Module, opt, steps: int, seed: int = 1) -> None:  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 3, generator=gen)
        opt.zero_grad(set_to_none=True)
        net(x).pow(2).mean().backward()
        opt.step()


def test_updates_equal_torch_fused_adam_bitwise():
    ours_net, ref_net = _net(), _net()
    ours = Adam(ours_net.parameters(), lr=3e-2, betas=(0.8, 0.99), eps=1e-6)
    ref = torch.optim.Adam(ref_net.parameters(), lr=3e-2, betas=(0.8, 0.99), eps=1e-6, fused=True)
    _train(ours_net, ours, 30)
    _train(ref_net, ref, 30)
    for a, b in zip(ours_net.parameters(), ref_net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_lr_set_in_param_groups_takes_effect():
    net = _net()
    opt = Adam(net.parameters(), lr=1e-2)
    opt.param_groups[0]["lr"] = 0.0
    before = copy.deepcopy(net.state_dict())
    _train(net, opt, 3)
    for key, value in net.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_state_dict_round_trip_continues_identically_and_copies():
    net = _net()
    opt = Adam(net.parameters(), lr=1e-2)
    _train(net, opt, 5)
    twin = copy.deepcopy(net)
    twin_opt = Adam(twin.parameters(), lr=1.0)
    saved = opt.state_dict()
    twin_opt.load_state_dict(saved)
    assert twin_opt.param_groups[0]["lr"] == 1e-2
    for state in twin_opt.state.values():  # loading copies: no memory shared with `saved`
        for key in ("exp_avg", "exp_avg_sq"):
            assert all(state[key].data_ptr() != s[key].data_ptr() for s in saved["state"].values())
    _train(net, opt, 5, seed=2)
    _train(twin, twin_opt, 5, seed=2)
    for a, b in zip(net.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)


def test_loads_torch_adam_state_dict():
    ours_net, ref_net = _net(), _net()
    ref = torch.optim.Adam(ref_net.parameters(), lr=1e-2, fused=True)
    _train(ref_net, ref, 4)
    ours_net.load_state_dict(ref_net.state_dict())
    ours = Adam(ours_net.parameters(), lr=0.5)
    ours.load_state_dict(ref.state_dict())
    _train(ours_net, ours, 4, seed=3)
    _train(ref_net, ref, 4, seed=3)
    for a, b in zip(ours_net.parameters(), ref_net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_parameter_without_gradient_is_not_stepped():
    a = nn.Parameter(torch.ones(3))
    b = nn.Parameter(torch.ones(3))
    opt = Adam([a, b], lr=0.1)
    (a.sum() + b.sum()).backward()
    opt.step()
    assert opt.state[a]["step"] is opt.state[b]["step"]  # equal counters are shared
    opt.zero_grad()
    a.sum().backward()  # b gets no gradient this time
    b_before = b.detach().clone()
    opt.step()
    assert float(opt.state[a]["step"]) == 2.0
    assert float(opt.state[b]["step"]) == 1.0
    assert torch.equal(b.detach(), b_before)


def test_mismatched_state_is_rejected():
    opt = Adam(_net().parameters(), lr=1e-3)
    other = Adam([nn.Parameter(torch.zeros(2))], lr=1e-3)
    with pytest.raises(ValueError, match="parameter groups"):
        opt.load_state_dict(other.state_dict())


def test_training_step_does_not_import_dynamo():
    """torch.optim imports torch._dynamo (~0.8 s at start-up); our path never does."""
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from agilerl.algorithms import DQN, PPO
        from agilerl.components.replay_buffer import ReplayBuffer
        from agilerl.envs.probe import make_probe_vector_env
        from agilerl.training.experience import train_off_policy_member, train_on_policy_member
        net = {"latent_dim": 8, "encoder_config": {"hidden_size": [8]},
               "head_config": {"hidden_size": [8]}}
        env = make_probe_vector_env("ObsPolicyEnv", 2)
        dqn = DQN(env.single_observation_space, env.single_action_space, net_config=net,
                  seed=0, batch_size=4, learn_step=2)
        out = train_off_policy_member(dqn, env, ReplayBuffer(100, seed=0), 16, seed=0)
        assert out["learn_updates"] > 0
        ppo = PPO(env.single_observation_space, env.single_action_space, net_config=net,
                  seed=0, batch_size=4, learn_step=8, num_envs=2)
        train_on_policy_member(ppo, env, 16, seed=0)
        dqn.clone().set_state(dqn.get_state())
        print("dynamo" if "torch._dynamo" in sys.modules else "clean")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "clean", out.stderr
