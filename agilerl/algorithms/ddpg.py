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
from collections.abc import Callable, Mapping
from typing import TypedDict, TypeVar, cast

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn

from agilerl.algorithms.core.action_noise import ActionNoise, NoiseSettings
from agilerl.algorithms.core.base import NetworkInput, ObsLike, RLAlgorithm
from agilerl.algorithms.core.exploration import EpsilonSchedule
from agilerl.algorithms.core.flat_actor_critic import ActorCriticBuffers
from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.core.single_obs import acts_on_single
from agilerl.algorithms.core.target import Experiences
from agilerl.core.spaces import IncompatibleSpaceError
from agilerl.core.value_types import JsonValue
from agilerl.models._generated.hyperparameter_attributes import DDPGHyperparameterAttributes
from agilerl.networks.actor_critic_gradient import ActorCriticChains
from agilerl.networks.config import NetworkConfig
from agilerl.networks.continuous_q import ContinuousQNetwork
from agilerl.networks.deterministic_actor import DeterministicActor
from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.mlp_gradient import Tape
from agilerl.networks.optim import Adam

#: What the target policy and critics read: a network input, or a tensor (closed-form chains).
InputT = TypeVar("InputT", bound=NetworkInput)


class _ParamCache(TypedDict):
    """The parameter lists of :meth:`DDPG._params`, and the networks they are of."""

    nets: tuple[nn.Module, ...]
    targets: list[torch.Tensor]
    online: list[torch.Tensor]
    critic: list[torch.Tensor]
    shared_source: list[torch.Tensor]
    shared_readers: list[torch.Tensor]
    readers_count: int


class _ExtraState(TypedDict, total=False):
    """DDPG's own part of its state (``extra``)."""

    noise: np.ndarray | None
    learn_counter: int


@registered
class DDPG(DDPGHyperparameterAttributes, RLAlgorithm):
    """DDPG with delayed actor updates (``policy_freq``) and OU or Gaussian action noise."""

    algo = "DDPG"
    lr_names = ("lr_actor", "lr_critic")
    mirrored_networks = {"actor_target": "actor", "critic_target": "critic"}
    #: The critics (all trained by ``critic_optimizer``); the first owns the shared encoder.
    critic_names: tuple[str, ...] = ("critic",)
    inert_settings = {
        "vect_noise_dim": "there is always one noise stream per sub-env (the number of "
                          "sub-envs is read from the observations)",
    }

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
    def policy(self, obs: ObsLike) -> np.ndarray:
        """The actor's normalised actions for a batch of observations (numpy)."""
        return self.networks["actor"](self.to_tensor(obs)).cpu().numpy()

    @acts_on_single
    def get_action(self, obs: ObsLike, training: bool = False) -> np.ndarray:
        """Env actions for a batch of observations (or one observation): the policy's
        own by default; with ``training``, plus exploration noise."""
        action = self.policy(obs)
        if training:
            noise = self.noise.sample(len(action), self.np_rng, self.noise_settings())
            action = np.clip(action + noise, -1.0, 1.0)
        return self.to_env_action(action)

    def greedy_action(self, obs: ObsLike) -> np.ndarray:
        return self.get_action(obs, training=False)

    def explore_action(self, obs: ObsLike, vector_step: int,
                       settings: EpsilonSchedule | None = None) -> np.ndarray:
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
    def _batch(self, experiences: Experiences) -> tuple[
            NetworkInput, torch.Tensor, torch.Tensor, NetworkInput, torch.Tensor]:
        obs = self.to_tensor(experiences["obs"])
        next_obs = self.to_tensor(experiences["next_obs"])
        action = self.to_normalised(_tensor(experiences["action"], self.device))
        reward = _tensor(experiences["reward"], self.device).reshape(-1)
        done = _tensor(experiences["done"], self.device).reshape(-1)
        return obs, action, reward, next_obs, done

    def _smooth_target_action(self, action: torch.Tensor) -> torch.Tensor:
        """The action the critic targets value at ``s'``, from the target policy's (TD3
        smooths it with clipped noise)."""
        return action

    def _next_value(self, q_next: list[torch.Tensor]) -> torch.Tensor:
        """The value at ``s'`` from each target critic's (TD3: their minimum)."""
        return q_next[0]

    def _q_next(self, next_obs: InputT, policy: Callable[[InputT], torch.Tensor],
                critics: list[Callable[[InputT, torch.Tensor], torch.Tensor]]) -> torch.Tensor:
        """The bootstrap value at ``s'``, from the target policy and critics (modules, or
        their closed-form chains' ``run``)."""
        next_action = self._smooth_target_action(policy(next_obs))
        return self._next_value([critic(next_obs, next_action) for critic in critics])

    def learn(self, experiences: Experiences) -> dict[str, float]:
        """One critic step on a batch ``{obs, action, reward, next_obs, done}``; every
        ``policy_freq``-th call also an actor step and a soft update of the targets.
        Returns ``loss`` (critic) and, after an actor step, ``actor_loss``.

        With MLP networks both steps take their gradients in closed form
        (:mod:`agilerl.networks.actor_critic_gradient`), otherwise through autograd; the
        two give the same gradients up to float rounding."""
        obs, action, reward, next_obs, done = self._batch(experiences)
        chains = self._chains()
        flat = None if chains is None else self._flat_buffers(chains)
        if chains is not None:
            assert isinstance(next_obs, torch.Tensor)  # (chains cover MLPs on one tensor)
            q_next = self._q_next(next_obs, chains.actor_target.run,
                                  [c.run for c in chains.critic_targets])
            target = reward + self.gamma * (1.0 - done) * q_next
            metrics = {"loss": self._critic_step_closed_form(chains, flat, obs, action, target)}
        else:
            metrics = {"loss": self._critic_step(obs, action, reward, next_obs, done)}
        if self.share_encoders:
            self._share_encoder()
        self.learn_counter += 1
        if self.learn_counter % int(self.policy_freq) == 0:
            metrics["actor_loss"] = (self._actor_step_closed_form(chains, flat, obs)
                                     if chains is not None else self._actor_step(obs))
            if flat is not None:
                flat.soft_update(self.tau)
            else:
                self.soft_update()
        return metrics

    # --- through autograd ---
    def _critic_step(self, obs: NetworkInput, action: torch.Tensor, reward: torch.Tensor,
                     next_obs: NetworkInput, done: torch.Tensor) -> float:
        """Regress every critic onto the TD target: ``sum_i mean((Q_i(s, a) - y)^2)``."""
        with torch.inference_mode():
            q_next = self._q_next(next_obs, self.networks["actor_target"],
                                  [self.networks[f"{n}_target"] for n in self.critic_names])
        with torch.no_grad():
            target = reward + self.gamma * (1.0 - done) * q_next
        loss = F.mse_loss(self.networks[self.critic_names[0]](obs, action), target)
        for name in self.critic_names[1:]:
            loss = loss + F.mse_loss(self.networks[name](obs, action), target)
        _step(self.optimizers["critic_optimizer"], loss)
        return float(loss.detach())

    def _actor_step(self, obs: NetworkInput) -> float:
        """Ascend the first critic: minimise ``-mean(Q_1(s, mu(s)))``."""
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
        return float(actor_loss.detach())

    # --- in closed form (the same losses) ---
    def _critic_step_closed_form(self, chains: ActorCriticChains,
                                 flat: ActorCriticBuffers | None, obs: NetworkInput,
                                 action: torch.Tensor, target: torch.Tensor) -> float:
        """:meth:`_critic_step`'s loss; its gradient at ``Q_i`` is ``2 (Q_i - y) / N``.
        With ``flat``, the gradients land in its buffers and its Adam steps them."""
        assert isinstance(obs, torch.Tensor)  # (chains cover MLPs on one tensor)
        scale = 2.0 / len(target)
        loss: torch.Tensor | None = None
        for i, critic in enumerate(chains.critics):
            encoder_tape: Tape = []
            head_tape: Tape = []
            delta = critic.run(obs, action, encoder_tape, head_tape) - target
            term = delta.square().mean()
            loss = term if loss is None else loss + term
            critic.backward(encoder_tape, head_tape, delta * scale,
                            None if flat is None else flat.critic_slots[i])
        _adam_step(self.optimizers["critic_optimizer"], None if flat is None else flat.critic)
        return float(loss)  # type: ignore[arg-type]

    def _actor_step_closed_form(self, chains: ActorCriticChains,
                                flat: ActorCriticBuffers | None, obs: NetworkInput) -> float:
        """:meth:`_actor_step`'s loss; its gradient at ``Q_1`` is ``-1 / N``, carried to
        the action through the critic's head (its parameters frozen), then to the actor."""
        assert isinstance(obs, torch.Tensor)  # (chains cover MLPs on one tensor)
        critic = chains.critics[0]
        policy_tape: Tape = []
        head_tape: Tape = []
        q = critic.run(obs, chains.actor.run(obs, policy_tape), head_tape=head_tape)
        grad_q = torch.full_like(q, -1.0 / len(q))
        chains.actor.backward(policy_tape, critic.action_gradient(head_tape, grad_q),
                              None if flat is None else flat.actor_slots)
        _adam_step(self.optimizers["actor_optimizer"], None if flat is None else flat.actor)
        return -float(q.mean())

    def _flat_buffers(self, chains: ActorCriticChains) -> ActorCriticBuffers | None:
        """The networks' and optimizers' flat buffers (:mod:`.core.flat_actor_critic`),
        rebuilt when any of them was replaced; None with ``share_encoders``, or where the
        optimizers do not fit them."""
        if self.share_encoders:
            return None
        optimizers = self.optimizers
        key = (chains, optimizers["actor_optimizer"], optimizers["critic_optimizer"])
        cached = self.__dict__.get("_flat_cache")
        if cached is not None and _same(cached[0], key) and (
                cached[1] is None or cached[1].bound_to(optimizers)):
            return cached[1]
        flat = ActorCriticBuffers.build(chains, self.networks, optimizers, self.critic_names)
        self.__dict__["_flat_cache"] = (key, flat)
        self.__dict__.pop("_param_cache", None)  # its tensors may no longer be the parameters'
        return flat

    def _chains(self) -> ActorCriticChains | None:
        """The networks' closed-form chains (None: not covered), cached until a network
        is replaced."""
        nets = tuple(self.networks.values())
        cache = self.__dict__.get("_chain_cache")
        if cache is None or not _same(cache[0], nets):
            cache = (nets, ActorCriticChains.of(self.networks, self.critic_names))
            self.__dict__["_chain_cache"] = cache
        return cache[1]

    @torch.no_grad()
    def soft_update(self) -> None:
        """``target <- tau * online + (1 - tau) * target`` for the actor and every critic."""
        cache = self._params()
        torch._foreach_lerp_(cache["targets"], cache["online"], self.tau)

    def _params(self) -> _ParamCache:
        """Parameter lists the updates touch, cached until a network is replaced (the
        cache holds the networks, so their ids stay unique while it lives)."""
        nets = tuple(self.networks.values())
        cache: _ParamCache | None = self.__dict__.get("_param_cache")
        if cache is not None and _same(cache["nets"], nets):
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

    def apply_architecture_mutation(self, network_name: str,
                                    plan: Mapping[str, JsonValue]) -> None:
        """With ``share_encoders``, changes to an encoder (or the latent width, or every
        activation) apply to every network, keeping the shared encoder one shape."""
        if not self.share_encoders or str(plan["target"]).startswith("head:"):
            super().apply_architecture_mutation(network_name, plan)
            return
        for name in ("actor", self.critic_names[0]):
            super().apply_architecture_mutation(name, plan)
        self._share_encoder()

    # ------------------------------------------------------------------ state
    def _extra_state(self) -> dict[str, object]:
        noise = self.noise.state
        return {
            "noise": None if noise is None else noise.copy(),
            "learn_counter": self.learn_counter,
        }

    def _load_extra_state(self, extra: Mapping[str, object]) -> None:
        extra = cast(_ExtraState, extra)  # what _extra_state wrote (or its torch.load)
        noise = extra.get("noise")
        self.noise.state = None if noise is None else np.array(noise, dtype=np.float64)
        self.learn_counter = int(extra.get("learn_counter", 0))


def _same(cached: tuple[object, ...], nets: tuple[object, ...]) -> bool:
    """Whether ``nets`` are the very networks ``cached`` holds."""
    return len(cached) == len(nets) and all(a is b for a, b in zip(cached, nets, strict=True))


def _adam_step(optimizer: Adam, flat: FlatTraining | None) -> None:
    """Step ``optimizer`` on the gradients just written: ``flat``'s, in its buffer, when
    given."""
    if flat is None:
        optimizer.step()
    else:
        flat.attach_grads()
        flat.adam_step()


def _step(optimizer: Adam, loss: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def _tensor(value: torch.Tensor | npt.ArrayLike, device: torch.device) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=torch.float32)
    return torch.as_tensor(np.asarray(value), dtype=torch.float32, device=device)
