"""Deep Deterministic Policy Gradient (DDPG) for bounded continuous action spaces.

Networks: a deterministic actor ``mu(s)`` and a critic ``Q(s, a)``, each with a target
copy that follows it by soft updates (``tau``). Every ``learn`` regresses the critic onto
``r + gamma * (1 - terminated) * Q'(s', mu'(s'))``; every ``policy_freq``-th one also
takes an actor step on ``-Q(s, mu(s))`` and soft-updates the targets.

Actions: the actor produces *normalised* actions in [-1, 1]; the environment receives
them mapped affinely onto its bounds (``low + (a + 1) / 2 * (high - low)``), and replay
memory stores that environment action, which ``learn`` maps back to [-1, 1] before the
critic sees it. Exploration noise (Ornstein-Uhlenbeck or Gaussian, one stream per
sub-env, see :mod:`agilerl.algorithms.core.action_noise`) is added in normalised units
and clipped to the bounds; the OU state of a sub-env restarts when its episode ends.

``share_encoders``: the critic's encoder is the shared one (trained by the critic's
loss); the actor reads a copy of it, refreshed after every critic step, and its own loss
trains only its head. Encoder and latent-width mutations then apply to every network.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn

from agilerl.algorithms.core.action_noise import ActionNoise, NoiseSettings
from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.algorithms.core.single_obs import acts_on_single
from agilerl.algorithms.core.spaces import IncompatibleSpaceError
from agilerl.algorithms.registry import registered
from agilerl.networks.config import NetworkConfig
from agilerl.networks.continuous_q import ContinuousQNetwork
from agilerl.networks.deterministic_actor import DeterministicActor


@registered
class DDPG(RLAlgorithm):
    """DDPG with delayed actor updates (``policy_freq``) and OU or Gaussian action noise."""

    algo = "DDPG"
    hyperparameter_names = (
        "batch_size", "lr_actor", "lr_critic", "learn_step", "gamma", "tau", "policy_freq",
        "O_U_noise", "expl_noise", "mean_noise", "theta", "dt", "share_encoders",
    )  # fmt: skip
    lr_names = ("lr_actor", "lr_critic")
    fixed_hyperparameters = ("O_U_noise", "share_encoders")
    mirrored_networks = {"actor_target": "actor", "critic_target": "critic"}
    #: The critics (all trained by ``critic_optimizer``); the first owns the shared encoder.
    critic_names: tuple[str, ...] = ("critic",)
    inert_settings = {
        "vect_noise_dim": "there is always one noise stream per sub-env (the number of "
                          "sub-envs is read from the observations)",
    }

    batch_size: int
    lr_actor: float
    lr_critic: float
    learn_step: int
    gamma: float
    tau: float
    policy_freq: int
    O_U_noise: bool
    expl_noise: float
    mean_noise: float
    theta: float
    dt: float
    share_encoders: bool

    # ------------------------------------------------------------------ building
    def _build(self, net_config: NetworkConfig) -> None:
        space = self.action_space
        if not isinstance(space, spaces.Box):
            raise IncompatibleSpaceError(f"{self.algo} needs a Box action space, got {space}")
        low, high = space.low.astype(np.float64).reshape(-1), space.high.astype(np.float64).reshape(-1)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise IncompatibleSpaceError(
                f"{self.algo} needs finite action bounds (the policy's output is scaled "
                f"onto them), got {space}"
            )
        self.action_dim = int(low.size)
        self._action_shape, self._action_dtype = tuple(space.shape), space.dtype
        self._low, self._half_range = low, (high - low) / 2.0
        self._low_t = torch.as_tensor(low, dtype=torch.float32, device=self.device)
        self._half_range_t = torch.as_tensor(self._half_range, dtype=torch.float32, device=self.device)
        generator = self.network_generator()
        self.actor = DeterministicActor.build(
            self.observation_space, self.action_dim, net_config, generator
        ).to(self.device)
        self.networks = {"actor": self.actor}
        for name in self.critic_names:
            critic = ContinuousQNetwork.build(
                self.observation_space, self.action_dim, net_config, generator
            ).to(self.device)
            self.networks[name] = critic
        self.networks.update(
            {f"{n}_target": copy.deepcopy(self.networks[n]) for n in ("actor", *self.critic_names)}
        )
        for name, net in self.networks.items():
            setattr(self, name, net)
        self.optimizer_networks = {"actor_optimizer": ("actor",), "critic_optimizer": self.critic_names}
        for opt_name in self.optimizer_networks:
            self._rebuild_optimizer(opt_name)
        self.noise = ActionNoise(self.action_dim)
        self.learn_counter = 0
        if self.share_encoders:
            self._share_encoder()

    def _optimizers_for_lr(self, lr_name: str) -> list[str]:
        return ["actor_optimizer"] if lr_name == "lr_actor" else ["critic_optimizer"]

    def _lr_for_optimizer(self, opt_name: str) -> float:
        return float(self.lr_actor if opt_name == "actor_optimizer" else self.lr_critic)

    def _optimizer_nets(self, opt_name: str) -> list[nn.Module]:  # type: ignore[override]
        nets = [self.networks[n] for n in self.optimizer_networks[opt_name]]
        if self.share_encoders and opt_name == "actor_optimizer":
            return [nets[0].heads]  # the actor's encoder is a copy of the critic's
        return nets  # type: ignore[return-value]

    # ------------------------------------------------------------------ action scaling
    def to_env_action(self, normalised: np.ndarray) -> np.ndarray:
        """Normalised actions (batch, action_dim) in [-1, 1] -> env actions within bounds."""
        env = self._low + (np.asarray(normalised, dtype=np.float64) + 1.0) * self._half_range
        return env.reshape(len(env), *self._action_shape).astype(self._action_dtype, copy=False)

    def to_normalised(self, env_action: torch.Tensor) -> torch.Tensor:
        """Env actions (batch, ...) -> normalised actions (batch, action_dim) in [-1, 1]."""
        flat = env_action.reshape(len(env_action), -1)
        return ((flat - self._low_t) / self._half_range_t - 1.0).clamp(-1.0, 1.0)

    # ------------------------------------------------------------------ acting
    @torch.inference_mode()
    def policy(self, obs: Any) -> np.ndarray:
        """The actor's normalised actions for a batch of observations (numpy)."""
        return self.networks["actor"](self.to_tensor(obs)).cpu().numpy()

    @acts_on_single
    def get_action(self, obs: Any, training: bool = False) -> np.ndarray:
        """Env actions for a batch of observations (or one observation): the policy's
        own by default; with ``training``, plus exploration noise."""
        action = self.policy(obs)
        if training:
            noise = self.noise.sample(len(action), self.np_rng, self.noise_settings())
            action = np.clip(action + noise, -1.0, 1.0)
        return self.to_env_action(action)

    def greedy_action(self, obs: Any) -> np.ndarray:
        return self.get_action(obs, training=False)

    def explore_action(self, obs: Any, vector_step: int, settings: Any = None) -> np.ndarray:
        """The policy's action plus this agent's own exploration noise (no run settings)."""
        return self.get_action(obs, training=True)

    def on_episode_end(self, ended: np.ndarray) -> None:
        self.noise.reset(ended)

    def noise_settings(self) -> NoiseSettings:
        return NoiseSettings(
            ornstein_uhlenbeck=bool(self.O_U_noise), scale=float(self.expl_noise),
            mean=float(self.mean_noise), theta=float(self.theta), dt=float(self.dt),
        )  # fmt: skip

    # ------------------------------------------------------------------ learning
    def _batch(self, experiences: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        obs = self.to_tensor(experiences["obs"])
        next_obs = self.to_tensor(experiences["next_obs"])
        action = self.to_normalised(_tensor(experiences["action"], self.device))
        reward = _tensor(experiences["reward"], self.device).reshape(-1)
        done = _tensor(experiences["done"], self.device).reshape(-1)
        return obs, action, reward, next_obs, done

    def _next_action(self, next_obs: torch.Tensor) -> torch.Tensor:
        """The target policy's action at ``s'`` (TD3 smooths it with clipped noise)."""
        return self.networks["actor_target"](next_obs)

    def _next_value(self, next_obs: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
        return self.networks["critic_target"](next_obs, next_action)

    def _critic_loss(self, obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.networks["critic"](obs, action), target)

    def learn(self, experiences: Mapping[str, Any]) -> dict[str, float]:
        """One critic step on a batch ``{obs, action, reward, next_obs, done}``; every
        ``policy_freq``-th call also an actor step and a soft update of the targets.
        Returns ``loss`` (critic) and, after an actor step, ``actor_loss``."""
        obs, action, reward, next_obs, done = self._batch(experiences)
        with torch.inference_mode():
            q_next = self._next_value(next_obs, self._next_action(next_obs))
        with torch.no_grad():
            target = reward + self.gamma * (1.0 - done) * q_next
        critic_loss = self._critic_loss(obs, action, target)
        _step(self.optimizers["critic_optimizer"], critic_loss)
        if self.share_encoders:
            self._share_encoder()
        self.learn_counter += 1
        metrics = {"loss": float(critic_loss.detach())}
        if self.learn_counter % int(self.policy_freq) == 0:
            critic_params = self._params()["critic"]
            for p in critic_params:  # the actor's loss needs no critic gradients
                p.requires_grad_(False)
            try:
                critic = self.networks[self.critic_names[0]]
                actor_loss = -critic(obs, self.networks["actor"](obs)).mean()
                _step(self.optimizers["actor_optimizer"], actor_loss)
            finally:
                for p in critic_params:
                    p.requires_grad_(True)
            metrics["actor_loss"] = float(actor_loss.detach())
            self.soft_update()
        return metrics

    @torch.no_grad()
    def soft_update(self) -> None:
        """``target <- tau * online + (1 - tau) * target`` for the actor and every critic."""
        cache = self._params()
        torch._foreach_lerp_(cache["targets"], cache["online"], self.tau)

    def _params(self) -> dict[str, Any]:
        """Parameter lists the updates touch, cached until a network is replaced (the
        cache holds the networks, so their ids stay unique while it lives)."""
        nets = tuple(self.networks.values())
        cache = self.__dict__.get("_param_cache")
        if cache is not None and len(cache["nets"]) == len(nets) and all(
            a is b for a, b in zip(cache["nets"], nets, strict=True)
        ):
            return cache

        def data(name: str, part: str = "") -> list[torch.Tensor]:
            module = self.networks[name]
            params = module.encoders.parameters() if part == "encoders" else module.parameters()
            return [p.data for p in params]

        online = ("actor", *self.critic_names)
        cache = {
            "nets": nets,
            "targets": [t for n in online for t in data(f"{n}_target")],
            "online": [t for n in online for t in data(n)],
            "critic": list(self.networks[self.critic_names[0]].parameters()),
            "shared_source": data(self.critic_names[0], "encoders"),
            "shared_readers": [t for n in self._encoder_readers() for t in data(n, "encoders")],
            "readers_count": len(self._encoder_readers()),
        }
        self.__dict__["_param_cache"] = cache
        return cache

    # ------------------------------------------------------------------ shared encoder
    def _encoder_readers(self) -> list[str]:
        """Networks whose encoders copy the first critic's (with ``share_encoders``)."""
        return ["actor", *self.critic_names[1:]]

    @torch.no_grad()
    def _share_encoder(self) -> None:
        cache = self._params()
        torch._foreach_copy_(
            cache["shared_readers"], cache["shared_source"] * cache["readers_count"]
        )

    def apply_architecture_mutation(self, network_name: str, plan: Mapping[str, Any]) -> None:
        """With ``share_encoders``, changes to an encoder (or the latent width, or every
        activation) apply to every network, keeping the shared encoder one shape."""
        if not self.share_encoders or str(plan["target"]).startswith("head:"):
            super().apply_architecture_mutation(network_name, plan)
            return
        for name in ("actor", self.critic_names[0]):
            super().apply_architecture_mutation(name, plan)
        self._share_encoder()

    # ------------------------------------------------------------------ state
    def _extra_state(self) -> dict[str, Any]:
        noise = self.noise.state
        return {
            "noise": None if noise is None else noise.copy(),
            "learn_counter": self.learn_counter,
        }

    def _load_extra_state(self, extra: Mapping[str, Any]) -> None:
        noise = extra.get("noise")
        self.noise.state = None if noise is None else np.array(noise, dtype=np.float64)
        self.learn_counter = int(extra.get("learn_counter", 0))


def _step(optimizer: Any, loss: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def _tensor(value: Any, device: torch.device) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=torch.float32)
    return torch.as_tensor(np.asarray(value), dtype=torch.float32, device=device)
