"""Proximal Policy Optimization (PPO), clipped objective, discrete and continuous actions.

``learn`` consumes a filled ``RolloutBuffer``: GAE advantages (computed by the collector
with ``gamma``/``gae_lambda``), ``update_epochs`` passes over shuffled minibatches of
``batch_size``, clipped surrogate + ``vf_coef`` * value loss - ``ent_coef`` * entropy,
gradient-norm clipping at ``max_grad_norm``, early stop of the update when the approximate
KL divergence exceeds ``target_kl`` (when set).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
from gymnasium import spaces

from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.algorithms.core.spaces import IncompatibleSpaceError, action_dim, obs_index
from agilerl.algorithms.registry import registered
from agilerl.components.rollout_buffer import RolloutBuffer
from agilerl.networks.actor_critic import ActorCritic
from agilerl.networks.config import NetworkConfig
from agilerl.networks.optim import make_optimizer


@registered
class PPO(RLAlgorithm):
    """PPO with an actor-critic network (shared encoder when ``share_encoders``)."""

    algo = "PPO"
    hyperparameter_names = (
        "batch_size", "lr", "learn_step", "gamma", "gae_lambda", "action_std_init",
        "clip_coef", "ent_coef", "vf_coef", "max_grad_norm", "target_kl", "update_epochs",
        "share_encoders", "num_envs",
    )  # fmt: skip
    fixed_hyperparameters = ("action_std_init", "share_encoders", "num_envs", "target_kl")
    unsupported_settings = {
        "recurrent": "recurrent (LSTM) PPO is not implemented in this version; "
                     "set it to false (or leave it out)",
        "rollout_buffer_config": "rollout buffer settings are not implemented in this "
                                 "version; remove them (the rollout buffer has none)",
    }
    inert_settings = {
        "max_seq_len": "it applies to recurrent PPO only",
        "bptt_sequence_type": "it applies to recurrent PPO only",
    }

    batch_size: int
    lr: float
    learn_step: int
    gamma: float
    gae_lambda: float
    action_std_init: float
    clip_coef: float
    ent_coef: float
    vf_coef: float
    max_grad_norm: float
    target_kl: float | None
    update_epochs: int
    share_encoders: bool
    num_envs: int

    def _build(self, net_config: NetworkConfig) -> None:
        if getattr(self.spec, "recurrent", False):
            raise NotImplementedError("recurrent PPO is not supported yet")
        if not isinstance(self.action_space, (spaces.Discrete, spaces.Box)):
            raise IncompatibleSpaceError(f"PPO needs a Discrete or Box action space, got {self.action_space}")
        self.continuous = isinstance(self.action_space, spaces.Box)
        self.actor_critic = ActorCritic.build(
            self.observation_space,
            action_dim(self.action_space),
            continuous=self.continuous,
            net_config=net_config,
            share_encoders=bool(self.share_encoders),
            action_std_init=self.action_std_init,
            generator=self.network_generator(),
        ).to(self.device)
        self.networks = {"actor_critic": self.actor_critic}
        self.optimizer_networks = {"optimizer": ("actor_critic",)}
        self.optimizers = {"optimizer": make_optimizer([self.actor_critic], self.lr)}

    # ------------------------------------------------------------------ acting
    @torch.inference_mode()
    def get_action(self, obs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Sample actions for a batch: ``(env_action, action, log_prob, value)``.

        ``env_action`` goes to ``env.step``; ``action`` (the raw sample, before clipping or
        squashing) is what the rollout stores and ``learn`` evaluates.
        """
        net = self.actor_critic
        policy_out, value = net(self.to_tensor(obs))
        if self.continuous:
            std = net.log_std.exp()
            noise = torch.randn(policy_out.shape, generator=self.torch_rng).to(policy_out.device)
            action = policy_out + std * noise
            log_prob = net.distribution(policy_out).log_prob(action).sum(-1)
        else:
            probs = torch.softmax(policy_out, dim=-1)
            action = torch.multinomial(probs.cpu(), 1, generator=self.torch_rng).squeeze(-1)
            log_prob = torch.log(
                probs.gather(1, action.to(probs.device).unsqueeze(1)).squeeze(1).clamp_min(1e-30)
            )
        action_np = action.cpu().numpy()
        return self._env_action(action_np), action_np, log_prob.cpu().numpy(), value.cpu().numpy()

    @torch.inference_mode()
    def greedy_action(self, obs: Any) -> np.ndarray:
        """Mode of the policy: argmax logit, or the Gaussian mean."""
        policy_out = self.actor_critic.policy(self.to_tensor(obs))
        if self.continuous:
            return self._env_action(policy_out.cpu().numpy())
        return policy_out.argmax(dim=-1).cpu().numpy()

    @torch.inference_mode()
    def get_value(self, obs: Any) -> np.ndarray:
        """State values for a batch (used to bootstrap truncated episodes and rollouts)."""
        return self.actor_critic(self.to_tensor(obs))[1].cpu().numpy()

    def _env_action(self, raw: np.ndarray) -> np.ndarray:
        if not self.continuous:
            return raw
        box = cast(spaces.Box, self.action_space)
        low, high = box.low.reshape(-1), box.high.reshape(-1)
        if self.actor_critic.arch["extra"]["squash_output"]:
            scaled = low + (np.tanh(raw) + 1.0) * 0.5 * (high - low)
        else:
            scaled = np.clip(raw, low, high)
        return scaled.reshape((-1, *box.shape)).astype(box.dtype)

    # ------------------------------------------------------------------ learning
    def learn(self, rollout: RolloutBuffer) -> dict[str, float]:
        """PPO update from a rollout whose advantages have been computed."""
        data = rollout.flat()
        n = len(data["advantages"])
        if n == 0:
            return {}
        obs = self.to_tensor(data["obs"])
        dtype = torch.float32 if self.continuous else torch.long
        actions = torch.as_tensor(data["actions"], dtype=dtype, device=self.device)
        old_log_probs = torch.as_tensor(data["log_probs"], device=self.device)
        advantages = torch.as_tensor(data["advantages"], device=self.device)
        returns = torch.as_tensor(data["returns"], device=self.device)
        optimizer = self.optimizers["optimizer"]
        net = self.actor_critic
        sums = {
            "loss": 0.0,
            "policy_loss": 0.0,
            "value_loss": 0.0,
            "entropy": 0.0,
            "approx_kl": 0.0,
            "clipfrac": 0.0,
        }
        updates = 0
        batch_size = max(1, min(int(self.batch_size), n))
        for _epoch in range(int(self.update_epochs)):
            order = torch.randperm(n, generator=self.torch_rng).to(self.device)
            stop = False
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                # --- evaluate the stored actions under the current policy ---
                policy_out, value = net(obs_index(obs, idx))
                dist = net.distribution(policy_out)
                log_prob = dist.log_prob(actions[idx])
                entropy = dist.entropy()
                if self.continuous:
                    log_prob, entropy = log_prob.sum(-1), entropy.sum(-1)
                log_ratio = log_prob - old_log_probs[idx]
                ratio = log_ratio.exp()

                # --- clipped surrogate objective on normalised advantages ---
                adv = advantages[idx]
                if len(idx) > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(
                    -adv * ratio, -adv * ratio.clamp(1 - self.clip_coef, 1 + self.clip_coef)
                ).mean()
                value_loss = 0.5 * (value - returns[idx]).pow(2).mean()
                entropy_mean = entropy.mean()
                loss = pg_loss + self.vf_coef * value_loss - self.ent_coef * entropy_mean

                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), self.max_grad_norm)
                optimizer.step()

                with torch.no_grad():
                    approx_kl = float(((ratio - 1) - log_ratio).mean())
                    clipfrac = float(((ratio - 1.0).abs() > self.clip_coef).float().mean())
                for key, val in (
                    ("loss", float(loss.detach())), ("policy_loss", float(pg_loss.detach())),
                    ("value_loss", float(value_loss.detach())), ("entropy", float(entropy_mean.detach())),
                    ("approx_kl", approx_kl), ("clipfrac", clipfrac),
                ):  # fmt: skip
                    sums[key] += val
                updates += 1
                # --- early stop when the policy moved too far from the rollout policy ---
                if self.target_kl is not None and approx_kl > self.target_kl:
                    stop = True
                    break
            if stop:
                break
        return {k: v / max(updates, 1) for k, v in sums.items()}
