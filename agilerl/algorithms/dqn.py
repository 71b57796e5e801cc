"""Deep Q-Network (DQN) with an optional double-DQN target and soft target updates.

Loss: mean squared TD error (the reference's choice; its tuned learning rates assume it).
Targets bootstrap through truncation and stop only at termination (``done`` in a batch is
the *terminated* flag). Exploration is epsilon-greedy, on the schedule of the run's
``training.eps_*`` settings.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from gymnasium import spaces

from agilerl.algorithms.core.base import ObsLike, RLAlgorithm
from agilerl.algorithms.core.exploration import EpsilonSchedule, epsilon_schedule
from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.core.single_obs import acts_on_single
from agilerl.algorithms.core.target import (
    Experiences,
    SoftTargetUpdate,
    batch_tensor,
    clip_grad_norm,
)
from agilerl.core.spaces import IncompatibleSpaceError, ObsEncoder
from agilerl.models._generated.hyperparameter_attributes import DQNHyperparameterAttributes
from agilerl.networks.config import NetworkConfig
from agilerl.networks.mlp_gradient import MLPChain, Tape, cached_chain
from agilerl.networks.optim import make_optimizer
from agilerl.networks.q_network import QNetwork

if TYPE_CHECKING:
    from agilerl.models.training import TrainingSpec


@registered
class DQN(DQNHyperparameterAttributes, SoftTargetUpdate, RLAlgorithm):
    """DQN for discrete action spaces."""

    algo = "DQN"
    mirrored_networks = {"actor_target": "actor"}
    unsupported_settings = {
        "cudagraphs": "capturing the update with CUDA graphs is not implemented in this "
                      "version; set it to false (or leave it out)",
    }

    #: What :meth:`loss_and_grad` returns as loss terms, in order (reported as metrics).
    loss_metric_names: ClassVar[tuple[str, ...]] = ("loss",)
    #: Gradient-norm clip of every update (None: none).
    grad_norm_clip: ClassVar[float | None] = None

    actor: QNetwork
    actor_target: QNetwork
    obs_encoder: ObsEncoder  # (a single-agent algorithm's)

    def _build(self, net_config: NetworkConfig) -> None:
        if not isinstance(self.action_space, spaces.Discrete):
            raise IncompatibleSpaceError(f"DQN needs a Discrete action space, got {self.action_space}")
        self.num_actions = int(self.action_space.n)
        self.actor = QNetwork.build(
            self.observation_space, self.num_actions, net_config, self.network_generator()
        ).to(self.device)
        self.actor_target = copy.deepcopy(self.actor)
        self.networks = {"actor": self.actor, "actor_target": self.actor_target}
        self.optimizer_networks = {"optimizer": ("actor",)}
        self.optimizers = {"optimizer": make_optimizer([self.actor], self.lr)}

    # ------------------------------------------------------------------ acting
    @torch.inference_mode()
    @acts_on_single
    def get_action(self, obs: ObsLike, epsilon: float = 0.0,
                   action_mask: npt.ArrayLike | None = None) -> np.ndarray:
        """Epsilon-greedy actions for a batch of observations (one per sub-env), or the
        action for one observation; greedy unless ``epsilon`` is given.

        ``action_mask`` (optional, shape ``(batch, num_actions)``, truthy = allowed)
        restricts both the greedy and the random choice.
        """
        q = self.actor(self.to_tensor(obs))
        if action_mask is not None:
            mask = torch.as_tensor(np.asarray(action_mask, dtype=bool), device=q.device).reshape(
                q.shape
            )
            q = q.masked_fill(~mask, float("-inf"))
        actions = q.argmax(dim=-1).cpu().numpy()
        if epsilon > 0.0:
            explore = self.np_rng.random(actions.shape[0]) < epsilon
            if explore.any():
                actions[explore] = self._random_actions(int(explore.sum()), action_mask, explore)
        return actions

    def _random_actions(self, count: int, action_mask: npt.ArrayLike | None, rows: np.ndarray
                        ) -> np.ndarray:
        if action_mask is None:
            return self.np_rng.integers(0, self.num_actions, size=count)
        allowed = np.asarray(action_mask, dtype=bool).reshape(-1, self.num_actions)[rows]
        return np.array([self.np_rng.choice(np.flatnonzero(m)) for m in allowed])

    def greedy_action(self, obs: ObsLike) -> np.ndarray:
        return self.get_action(obs, epsilon=0.0)

    @classmethod
    def exploration_settings(cls, training: TrainingSpec | None) -> EpsilonSchedule:
        return epsilon_schedule(training)

    def explore_action(
        self, obs: ObsLike, vector_step: int, settings: EpsilonSchedule | None = None
    ) -> np.ndarray:
        """Epsilon-greedy with epsilon ``settings.value(vector_step)`` (greedy without one)."""
        epsilon = settings.value(vector_step) if settings is not None else 0.0
        return self.get_action(obs, epsilon=epsilon)

    # ------------------------------------------------------------------ learning
    def learn(self, experiences: Experiences) -> dict[str, float]:
        """One gradient step on a batch ``{obs, action, reward, next_obs, done}``; returns
        the loss terms named by :attr:`loss_metric_names`."""
        chain = cached_chain(self, self.actor)
        if chain is not None:  # an MLP network: the gradient in closed form, no autograd
            terms = self.closed_form_backward(chain, experiences)
            self.apply_gradients(self.grad_norm_clip)
        else:
            losses = self.loss_terms(*self.td_terms(experiences))
            self.step_optimizer(losses["loss"], self.grad_norm_clip)
            terms = tuple(value.detach() for value in losses.values())
        values = torch.stack(terms).tolist()
        return dict(zip(self.loss_metric_names, values, strict=True))

    def loss_terms(self, q_all: torch.Tensor, q: torch.Tensor, target: torch.Tensor
                   ) -> dict[str, torch.Tensor]:
        """The loss terms (named by :attr:`loss_metric_names`; ``"loss"`` is minimised)
        through autograd, from ``Q(s, .)``, ``Q(s, a)`` and the TD target of a batch.

        DQN: ``mean((Q(s, a) - y)^2)``.
        """
        return {"loss": F.mse_loss(q, target)}

    def loss_and_grad(self, q_all: torch.Tensor, action: torch.Tensor, target: torch.Tensor
                      ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """The loss terms of a batch (a tuple of scalars, named by
        :attr:`loss_metric_names`) and the loss's gradient with respect to ``Q(s, .)``, from
        ``Q(s, .)``, the ``(N, 1)`` actions and the TD target.

        DQN: ``mean(delta^2)`` with ``delta = Q(s, a) - y``; its gradient is
        ``2 * delta / N`` in the taken action's column, zero elsewhere.
        """
        delta = q_all.gather(1, action).squeeze(1) - target
        grad = torch.zeros_like(q_all).scatter_(1, action,
                                                delta.mul(2.0 / len(delta)).unsqueeze(1))
        return (delta.square().mean(),), grad

    def closed_form_backward(self, chain: MLPChain, experiences: Experiences
                             ) -> tuple[torch.Tensor, ...]:
        """Set the online network's gradients in closed form, without autograd:
        :meth:`loss_and_grad` gives the gradient with respect to ``Q(s, .)`` and
        :class:`MLPChain` carries it back through the network. Returns the loss terms.

        With flat buffers (:meth:`_flat_training`), no parameter is read attached, so
        this runs without a ``no_grad`` context (whose entry and exit cost more than a
        small kernel), and the gradients land in the flat gradient buffer.
        """
        flat = self._flat_training()
        target_chain = cached_chain(self, self.actor_target, "_target_chain")
        if flat is None or target_chain is None:
            return self._closed_form_backward(chain, experiences)
        obs, next_obs = self._net_input(experiences["obs"]), self._net_input(experiences["next_obs"])
        # (an MLP chain's network reads one tensor: no composite observations here)
        assert isinstance(obs, torch.Tensor) and isinstance(next_obs, torch.Tensor)
        action = _column(experiences["action"], self.device, torch.long, (-1, 1))
        reward = _column(experiences["reward"], self.device, torch.float32, (-1,))
        done = _column(experiences["done"], self.device, torch.float32, (-1,))
        tape: Tape = []
        q_all = chain.run(obs, tape)
        # (One online pass over s and s' together, taping back only the rows at s, measured
        # slower here than two passes: slicing the tape costs more than the second pass.)
        target = bellman_target(reward, done, self.gamma, target_chain.run(next_obs),
                                chain.run(next_obs) if self.double else None)
        terms, grad = self.loss_and_grad(q_all, action, target)
        chain.backward_into(tape, grad, chain.gradient_slots(flat.grad_views))
        flat.attach_grads()
        flat.fresh = True
        return terms

    @torch.no_grad()
    def _closed_form_backward(self, chain: MLPChain, experiences: Experiences
                              ) -> tuple[torch.Tensor, ...]:
        """:meth:`closed_form_backward` into each parameter's own ``.grad``."""
        obs, action, target = self.td_target(experiences)
        assert isinstance(obs, torch.Tensor)  # (an MLP chain's network reads one tensor)
        tape: Tape = []
        q_all = chain.forward(obs, tape)
        terms, grad = self.loss_and_grad(q_all, action, target)
        self.optimizers["optimizer"].zero_grad(set_to_none=True)
        chain.backward(tape, grad)
        return terms

    def _net_input(self, obs: np.ndarray | torch.Tensor) -> torch.Tensor | dict[str, torch.Tensor]:
        """``to_tensor(obs)``; a batch that is already the network's input (a float32
        tensor of rows on the agent's device, as the offline dataset gives) as it is."""
        encoder = self.obs_encoder
        if (isinstance(obs, torch.Tensor) and obs.dtype is torch.float32 and obs.dim() == 2
                and not encoder.composite and not encoder.image
                and obs.shape[1] == encoder.dim and obs.device == self.device):
            return obs
        return self.to_tensor(obs)

    def td_terms(
        self, experiences: Experiences
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(Q(s, .), Q(s, a), target)`` of a batch; the target carries no gradient."""
        obs, action, target = self.td_target(experiences)
        # --- online Q-values: only the batch's own rows carry gradients ---
        q_online = self.actor(obs)
        return q_online, q_online.gather(1, action).squeeze(1), target

    def td_target(
        self, experiences: Experiences
    ) -> tuple[torch.Tensor | dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        """``(obs, action, target)`` of a batch: the network input at s, the actions as a
        ``(batch, 1)`` index, and the TD target, which carries no gradient."""
        obs = self.to_tensor(experiences["obs"])
        next_obs = self.to_tensor(experiences["next_obs"])
        action = batch_tensor(experiences["action"], self.device, torch.long).reshape(-1, 1)
        reward = batch_tensor(experiences["reward"], self.device, torch.float32).reshape(-1)
        done = batch_tensor(experiences["done"], self.device, torch.float32).reshape(-1)

        # --- TD target (bellman_target) ---
        # The passes at s' stay out of the autograd graph (so the backward pass covers only
        # the batch's own rows) and need no bookkeeping at all: inference mode is cheaper
        # than no_grad. The target itself is built outside it, because the loss saves it
        # for the backward pass.
        with torch.inference_mode():
            q_next_target = self.actor_target(next_obs)
            q_next_online = self.actor(next_obs) if self.double else None
        with torch.no_grad():
            target = bellman_target(reward, done, self.gamma, q_next_target, q_next_online)
        return obs, action, target

    def _online_parameters(self) -> list[torch.Tensor]:
        """The online network's parameters, cached until the network is replaced."""
        if getattr(self, "_online_key", None) != id(self.actor):
            self._online_key = id(self.actor)
            self._online_params: list[torch.Tensor] = list(self.actor.parameters())
        return self._online_params

    def step_optimizer(self, loss: torch.Tensor, max_grad_norm: float | None = None) -> None:
        """Backpropagate ``loss``, then :meth:`apply_gradients`."""
        flat = self.__dict__.get("_flat")
        if flat is not None:  # these gradients are autograd's, not the flat buffer's
            flat.fresh = False
        self.optimizers["optimizer"].zero_grad(set_to_none=True)
        loss.backward()
        self.apply_gradients(max_grad_norm)

    def apply_gradients(self, max_grad_norm: float | None = None) -> None:
        """Step the optimizer on the online network's gradients (clipping their norm to
        ``max_grad_norm`` when given), then move the target network by ``tau``."""
        flat = self.__dict__.get("_flat")
        if flat is not None and flat.fresh:  # gradients of closed_form_backward, in place
            flat.fresh = False
            if max_grad_norm is not None:
                flat.clip_grad_norm(max_grad_norm)
            flat.adam_step()
            flat.soft_update(self.tau)
            return
        if max_grad_norm is not None:
            clip_grad_norm(self._online_parameters(), max_grad_norm)
        self.optimizers["optimizer"].step()
        # --- soft target update: theta_target <- tau * theta + (1 - tau) * theta_target ---
        self.soft_update()


def bellman_target(reward: torch.Tensor, done: torch.Tensor, gamma: float | torch.Tensor,
                   q_next_target: torch.Tensor, q_next_online: torch.Tensor | None = None
                   ) -> torch.Tensor:
    """The TD target ``r + gamma * (1 - done) * Q_target(s', a*)``, over any leading
    dimensions (actions on the last one of the Q-values): ``a*`` maximises
    ``q_next_online`` for double DQN (the online network chooses, the target values), else
    ``q_next_target``. ``gamma`` is a number, or a tensor that broadcasts against
    ``reward`` (one per member of a stacked batch)."""
    if q_next_online is not None:
        best = q_next_online.argmax(dim=-1, keepdim=True)
        q_next = q_next_target.gather(-1, best).squeeze(-1)
    else:
        q_next = q_next_target.amax(dim=-1)
    # As r - gamma * ((done - 1) * Q'): two kernels for a number gamma.
    if isinstance(gamma, torch.Tensor):
        return torch.addcmul(reward, done.sub(1.0).mul_(gamma), q_next, value=-1.0)
    return torch.addcmul(reward, done.sub(1.0), q_next, value=-gamma)


def _column(value: np.ndarray | torch.Tensor, device: torch.device, dtype: torch.dtype,
            shape: tuple[int, ...]) -> torch.Tensor:
    """A batch field as a tensor of ``dtype`` on ``device`` with ``shape`` (no op for one
    that already is)."""
    if (isinstance(value, torch.Tensor) and value.dtype is dtype and value.device == device
            and value.dim() == len(shape) and (len(shape) == 1 or value.shape[1] == shape[1])):
        return value
    return batch_tensor(value, device, dtype).reshape(shape)
