"""Rainbow DQN: distributional (C51), noisy, dueling, double-Q, n-step, prioritized DQN.

* Distribution: each action's return is a categorical distribution on ``num_atoms`` atoms
  spread evenly over ``[v_min, v_max]``; the loss is the cross-entropy between the online
  distribution of ``(s, a)`` and the target distribution projected onto the support.
* Double Q: the next action is the online network's greedy choice, its distribution the
  target network's.
* Exploration by noisy layers (no epsilon): the agent acts greedily on its noisy network;
  the noise of both networks is resampled after every learning step, from the agent's own
  generator (so runs and resumes repeat exactly). Evaluation uses the noise-free means.
* n-step returns: with ``replay_buffer.n_step_buffer`` the memory stores n-step transitions
  with their step count ``n``, and the target discounts ``next_obs`` by ``gamma ** n``
  (fewer steps at episode ends). ``combined_reward`` adds the one-step loss of the same
  transitions (the memory then keeps their one-step fields too).
* Prioritized replay: with ``replay_buffer.per_buffer`` the loss is weighted by the batch's
  importance-sampling ``weights``, sampled with ``beta`` annealed linearly from its initial
  value to 1 over ``training.max_steps`` (a function of the member's own step count, so it
  carries over through checkpoints); ``learn_prioritized`` returns the new priorities
  (per-sample loss + ``prior_eps``) for the memory beside the metrics.
* Soft target updates with ``tau``; gradients clipped to norm 10 (as the reference).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from gymnasium import spaces

from agilerl.algorithms.core.base import ObsLike, RLAlgorithm
from agilerl.algorithms.core.exploration import EpsilonSchedule
from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.core.single_obs import acts_on_single
from agilerl.algorithms.core.target import (
    Experiences,
    SoftTargetUpdate,
    batch_tensor,
    clip_grad_norm,
)
from agilerl.core.spaces import IncompatibleSpaceError, obs_cat
from agilerl.models._generated.hyperparameter_attributes import RainbowDQNHyperparameterAttributes
from agilerl.networks.config import NetworkConfig
from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.mlp_gradient import Tape, cached_chain
from agilerl.networks.optim import make_optimizer
from agilerl.networks.rainbow_gradient import RainbowChain
from agilerl.networks.rainbow_q_network import RainbowQNetwork

#: (reward, next_obs, done, discount) of one target of a batch.
TargetInputs = tuple[torch.Tensor, torch.Tensor | dict[str, torch.Tensor], torch.Tensor,
                     torch.Tensor]

#: Gradient-norm clip of every update (the reference's value).
MAX_GRAD_NORM = 10.0


@registered
class RainbowDQN(RainbowDQNHyperparameterAttributes, SoftTargetUpdate, RLAlgorithm):
    """Rainbow DQN for discrete action spaces."""

    algo = "RainbowDQN"
    mirrored_networks = {"actor_target": "actor"}
    # gamma too: an n-step memory, shared by the population, folds rewards with it.
    inert_settings = {
        "n_step": "n-step returns are set by the replay_buffer section (n_step_buffer: true "
                  "with n_step_buffer_args.n_step), as in the reference; algorithm.n_step is "
                  "not read",
    }

    actor: RainbowQNetwork
    actor_target: RainbowQNetwork

    def _build(self, net_config: NetworkConfig) -> None:
        if not isinstance(self.action_space, spaces.Discrete):
            raise IncompatibleSpaceError(
                f"RainbowDQN needs a Discrete action space, got {self.action_space}")
        if self.num_atoms < 2:
            raise ValueError(f"num_atoms must be >= 2 for a return distribution, got "
                             f"{self.num_atoms}")
        if not self.v_min < self.v_max:
            raise ValueError(f"v_min must be less than v_max (got {self.v_min} >= {self.v_max})")
        self.num_actions = int(self.action_space.n)
        self.actor = RainbowQNetwork.build(
            self.observation_space, self.num_actions, net_config, self.network_generator(),
            num_atoms=self.num_atoms, v_min=self.v_min, v_max=self.v_max,
            noise_std=self.noise_std,
        ).to(self.device)
        self.actor.reset_noise(self.torch_rng)
        self.actor_target = RainbowQNetwork.from_architecture(
            self.actor.architecture(), device=self.device)
        self.actor_target.load_state_dict(self.actor.state_dict())
        self.networks = {"actor": self.actor, "actor_target": self.actor_target}
        self.optimizer_networks = {"optimizer": ("actor",)}
        self.optimizers = {"optimizer": make_optimizer([self.actor], self.lr)}

    # ------------------------------------------------------------------ acting
    @torch.inference_mode()
    @acts_on_single
    def get_action(
        self, obs: ObsLike, action_mask: npt.ArrayLike | None = None, training: bool = False
    ) -> np.ndarray:
        """Greedy actions of the network's means (the default), or with ``training`` of
        the noisy network (how it explores), one per observation (a batch, or one
        observation); ``action_mask`` (truthy = allowed) restricts the choice."""
        q = self.actor(self.to_tensor(obs), noise=training)
        if action_mask is not None:
            mask = torch.as_tensor(np.asarray(action_mask, dtype=bool), device=q.device)
            q = q.masked_fill(~mask.reshape(q.shape), float("-inf"))
        return q.argmax(dim=-1).cpu().numpy()

    def greedy_action(self, obs: ObsLike) -> np.ndarray:
        return self.get_action(obs, training=False)

    def explore_action(self, obs: ObsLike, vector_step: int,
                       settings: EpsilonSchedule | None = None) -> np.ndarray:
        """Exploration is the noisy network's own: its greedy action with the current noise."""
        return self.get_action(obs, training=True)

    def per_beta(self, progress: float) -> float:
        """Importance-sampling exponent after ``progress`` (0 to 1) of the training budget:
        linear from ``beta`` to 1."""
        return self.beta + (1.0 - self.beta) * min(1.0, max(0.0, float(progress)))

    # ------------------------------------------------------------------ learning
    def learn(self, experiences: Experiences) -> dict[str, float]:
        """One gradient step on a batch ``{obs, action, reward, next_obs, done}``; its
        metrics (``loss``). :meth:`learn_prioritized` is the same step that also gives the
        new priorities of a prioritized batch's rows.

        Optional fields: ``n`` (steps of n-step returns; discount ``gamma ** n``),
        ``one_step_reward``/``one_step_next_obs``/``one_step_done`` (added one-step loss,
        ``combined_reward``), ``weights`` (prioritized replay's importance-sampling weights
        of the loss).

        On an MLP encoder the gradient is taken in closed form (:mod:`~agilerl.networks.
        rainbow_gradient`) into flat buffers; otherwise through autograd. Both give the
        same update up to float rounding.
        """
        _, loss = self._step(experiences)
        return {"loss": float(loss)}

    def learn_prioritized(self, experiences: Experiences) -> tuple[dict[str, float], np.ndarray]:
        """The step of :meth:`learn`: its metrics, and each row's new priority (its own loss
        + ``prior_eps``) for the memory's ``update_priorities``."""
        elementwise, loss = self._step(experiences)
        priorities = elementwise.cpu().numpy() + self.prior_eps
        return {"loss": float(loss)}, priorities

    def _step(self, experiences: Experiences) -> tuple[torch.Tensor, torch.Tensor]:
        """One gradient step, then fresh noise for both networks: (each row's loss, the
        batch's weighted loss), both detached."""
        chain = cached_chain(self, self.actor, "_rainbow_chain", RainbowChain.of)
        target_chain = cached_chain(self, self.actor_target, "_rainbow_target_chain",
                                    RainbowChain.of)
        flat = self._flat_training() if chain is not None and target_chain is not None else None
        if flat is not None and chain is not None and target_chain is not None:
            elementwise, loss = self._closed_form_step(chain, target_chain, flat, experiences)
        else:
            elementwise, loss = self._autograd_step(experiences)
        self.actor.reset_noise(self.torch_rng)
        self.actor_target.reset_noise(self.torch_rng)
        return elementwise, loss

    def _batch(self, experiences: Experiences) -> tuple[
            torch.Tensor | dict[str, torch.Tensor], torch.Tensor, list[TargetInputs],
            torch.Tensor | None]:
        """(obs, action, the targets' inputs (see :meth:`_target_inputs`), weights)."""
        obs = self.to_tensor(experiences["obs"])
        action = batch_tensor(experiences["action"], self.device, torch.long).reshape(-1)
        targets = [self._target_inputs(experiences, "")]
        if "one_step_reward" in experiences:
            targets.append(self._target_inputs(experiences, "one_step_"))
        weights = experiences.get("weights")
        return obs, action, targets, (None if weights is None else batch_tensor(
            weights, self.device, torch.float32).reshape(-1))

    def _projected_targets(self, targets: list[TargetInputs],
                           next_dist: torch.Tensor, q_next_online: torch.Tensor
                           ) -> list[torch.Tensor]:
        """The projected target distribution of each of ``targets`` (rows of ``batch``
        each in ``next_dist``/``q_next_online``)."""
        batch = len(targets[0][0])
        return [self._projected_target(next_dist[k * batch:(k + 1) * batch],
                                       q_next_online[k * batch:(k + 1) * batch],
                                       reward, done, discount)
                for k, (reward, _, done, discount) in enumerate(targets)]

    def _autograd_step(self, experiences: Experiences
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """The update through autograd; returns the per-sample losses and the loss."""
        obs, action, targets, weights = self._batch(experiences)
        # One online pass over s and every s' (the s' rows only choose the next action).
        next_obs = [t[1] for t in targets]
        log_dist_all = self.actor.log_dist(obs_cat([obs, *next_obs]))
        batch = len(action)
        log_p = log_dist_all[:batch][torch.arange(batch, device=action.device), action]
        with torch.no_grad():
            q_next_online = (log_dist_all[batch:].exp() * self.actor.support).sum(-1)
        with torch.inference_mode():
            next_dist = self.actor_target.dist(obs_cat(next_obs))
        elementwise = torch.zeros(batch, device=action.device)
        for projected in self._projected_targets(targets, next_dist, q_next_online):
            elementwise = elementwise - (projected * log_p).sum(-1)
        loss = (elementwise * weights).mean() if weights is not None else elementwise.mean()
        optimizer = self.optimizers["optimizer"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_grad_norm(list(self.actor.parameters()), MAX_GRAD_NORM)
        optimizer.step()
        self.soft_update()
        return elementwise.detach(), loss.detach()

    def _closed_form_step(self, chain: RainbowChain, target_chain: RainbowChain,
                          flat: FlatTraining, experiences: Experiences
                          ) -> tuple[torch.Tensor, torch.Tensor]:
        """The update of :meth:`_autograd_step` with the gradient in closed form, into the
        flat buffers (clip, Adam and the soft update one kernel each)."""
        obs, action, targets, weights = self._batch(experiences)
        # A chain exists for an MLP encoder only (RainbowChain.of): its input is one tensor.
        assert isinstance(obs, torch.Tensor)
        next_obs: list[torch.Tensor] = []
        for target in targets:
            assert isinstance(target[1], torch.Tensor)
            next_obs.append(target[1])
        chain.apply_noise()
        target_chain.apply_noise()
        tape: list[Tape] = []
        log_dist_all = torch.log_softmax(chain.logits(obs_cat([obs, *next_obs]), tape), dim=-1)
        batch, rows = len(action), torch.arange(len(action), device=action.device)
        log_p = log_dist_all[:batch][rows, action]
        q_next_online = (log_dist_all[batch:].exp() * self.actor.support).sum(-1)
        next_dist = torch.softmax(target_chain.logits(obs_cat(next_obs)), dim=-1)
        projected = self._projected_targets(targets, next_dist, q_next_online)
        total = projected[0] if len(projected) == 1 else torch.stack(projected).sum(0)
        elementwise = (total * log_p).sum(-1).neg_()
        loss = (elementwise * weights).mean() if weights is not None else elementwise.mean()
        # d(-sum_j p_j log_softmax(z)_j)/dz = softmax(z) sum_j p_j - p, per row, scaled by
        # the row's weight in the mean; only the taken action's logits carry a gradient.
        scale = (weights / batch)[:, None] if weights is not None else 1.0 / batch
        grad_taken = torch.addcmul(total, log_p.exp(), total.sum(-1, keepdim=True),
                                   value=-1.0).mul_(-scale)
        # The s' rows only chose next actions: the backward pass leaves them out.
        grad = grad_taken.new_zeros((batch, *log_dist_all.shape[1:]))
        grad[rows, action] = grad_taken
        chain.backward_into(tape, grad, flat.grad_views)
        flat.attach_grads()
        flat.clip_grad_norm(MAX_GRAD_NORM)
        flat.adam_step()
        flat.soft_update(self.tau)
        return elementwise, loss

    def _target_inputs(
        self, experiences: Experiences, prefix: str
    ) -> TargetInputs:
        """(reward, next_obs, done, discount) of the ``prefix`` fields of a batch."""
        reward = batch_tensor(experiences[f"{prefix}reward"], self.device, torch.float32).reshape(-1)
        next_obs = self.to_tensor(experiences[f"{prefix}next_obs"])
        done = batch_tensor(experiences[f"{prefix}done"], self.device, torch.float32).reshape(-1)
        if not prefix and "n" in experiences:
            steps = batch_tensor(experiences["n"], self.device, torch.float32).reshape(-1)
            discount = torch.pow(torch.full_like(steps, self.gamma), steps)
        else:
            discount = torch.full_like(reward, self.gamma)
        return reward, next_obs, done, discount

    def _projected_target(
        self, next_dist: torch.Tensor, q_next_online: torch.Tensor, reward: torch.Tensor,
        done: torch.Tensor, discount: torch.Tensor,
    ) -> torch.Tensor:
        """The target distribution ``r + discount * (1 - done) * z`` of the online network's
        best next action under the target network, projected onto the support (from
        inputs that carry no gradient)."""
        batch = len(reward)
        best = q_next_online.argmax(dim=-1)
        prob = next_dist[torch.arange(batch, device=reward.device), best]
        support = self.actor.support
        shifted = reward[:, None] + (discount * (1.0 - done))[:, None] * support[None, :]
        position = (shifted.clamp(self.v_min, self.v_max) - self.v_min) / (
            (self.v_max - self.v_min) / (self.num_atoms - 1))
        lower, upper = position.floor().long(), position.ceil().long()
        # An atom hit exactly (lower == upper) keeps all of its mass.
        exact = (lower == upper).to(prob.dtype)
        projected = torch.zeros_like(prob)
        projected.scatter_add_(1, lower, prob * (upper.to(prob.dtype) - position + exact))
        projected.scatter_add_(1, upper, prob * (position - lower.to(prob.dtype)))
        return projected
