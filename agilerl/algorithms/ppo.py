"""Proximal Policy Optimization (PPO), clipped objective, discrete and continuous actions.

``learn`` consumes a filled ``RolloutBuffer``: GAE advantages (computed by the collector
with ``gamma``/``gae_lambda``), ``update_epochs`` passes over shuffled minibatches of
``batch_size``, clipped surrogate + ``vf_coef`` * value loss - ``ent_coef`` * entropy,
gradient-norm clipping at ``max_grad_norm``, early stop of the update when the approximate
KL divergence exceeds ``target_kl`` (when set). With ``anneal_lr`` the learning rate
decays linearly to zero over the run (``SpecHyperparameters.set_progress``).

Recurrent PPO (``recurrent: true``, an ``lstm`` encoder) stores the recurrent state of
every step in the rollout and learns by truncated backpropagation through time over
sequences of ``max_seq_len`` steps (``bptt_sequence_type``: ``chunked``,
``fifty_percent_overlap`` or ``maximum``; see ``agilerl.components.rollout_buffer``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from gymnasium import spaces

from agilerl.algorithms.core.base import NetworkInput, ObsLike, RLAlgorithm
from agilerl.algorithms.core.clipped_surrogate import (
    UpdateStats,
    clipped_surrogate_loss,
    closed_form_step,
)
from agilerl.algorithms.core.policy_sampling import categorical_action, gaussian_action
from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.core.single_obs import acts_on_single
from agilerl.algorithms.core.target import clip_grad_norm
from agilerl.components.rollout_buffer import RolloutBuffer, Sequences
from agilerl.core.spaces import IncompatibleSpaceError, ObsEncoder, action_dim, obs_index
from agilerl.models._generated.hyperparameter_attributes import PPOHyperparameterAttributes
from agilerl.networks.actor_critic import ActorCritic
from agilerl.networks.config import NetworkConfig
from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.mlp_gradient import cached_chain
from agilerl.networks.optim import make_optimizer
from agilerl.networks.policy_value_gradient import PolicyValueChain
from agilerl.networks.recurrent_actor_critic import Hidden, RecurrentActorCritic

if TYPE_CHECKING:
    from agilerl.models.algo import AlgoSpec


@registered
class PPO(PPOHyperparameterAttributes, RLAlgorithm):
    """PPO with an actor-critic network (shared encoder when ``share_encoders``).

    With ``recurrent`` the encoder is an LSTM: ``get_action``, ``greedy_action`` and
    ``get_value`` take the recurrent state of the sub-envs (``initial_hidden``), and the
    first two advance it in place (the caller zeroes the rows of sub-envs whose episode
    starts, with ``reset_hidden``); ``learn`` replays BPTT sequences of ``max_seq_len``
    steps cut as ``bptt_sequence_type`` says, and ``batch_size`` counts sequences.
    """

    algo = "PPO"
    unsupported_settings = {
        "rollout_buffer_config": "rollout buffer settings are not implemented in this "
                                 "version; remove them (the rollout buffer is sized by "
                                 "learn_step and num_envs and has no other settings)",
    }
    inert_settings = {
        "max_seq_len": "it applies to recurrent PPO only",
        "bptt_sequence_type": "it applies to recurrent PPO only",
    }

    obs_encoder: ObsEncoder  # (a single-agent algorithm's)

    @classmethod
    def settings_not_honoured(cls, spec: AlgoSpec) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        refused, ignored = super().settings_not_honoured(spec)
        if getattr(spec, "recurrent", False):  # then the sequence settings are read
            ignored = [(n, why) for n, why in ignored if n not in ("max_seq_len", "bptt_sequence_type")]
        return refused, ignored

    def _build(self, net_config: NetworkConfig) -> None:
        if not isinstance(self.action_space, (spaces.Discrete, spaces.Box)):
            raise IncompatibleSpaceError(f"PPO needs a Discrete or Box action space, got {self.action_space}")
        self._check_recurrent_encoder(net_config)
        self.continuous = isinstance(self.action_space, spaces.Box)
        network_class = RecurrentActorCritic if self.recurrent else ActorCritic
        self.actor_critic = network_class.build(
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

    def _check_recurrent_encoder(self, net_config: NetworkConfig) -> None:
        """Recurrence and an LSTM encoder go together (a ``ManifestError`` naming the field)."""
        import agilerl.models as models

        arch = net_config["encoder_config"].get("arch", "mlp")
        if self.recurrent and arch != "lstm":
            issue = models.ManifestIssue(
                path="network.encoder_config.arch",
                message=f"is {arch!r}, but recurrent PPO (algorithm.recurrent: true) needs an "
                        "lstm encoder; set network.arch: lstm, or leave the arch out")
        elif arch == "lstm" and not self.recurrent:
            issue = models.ManifestIssue(
                path="algorithm.recurrent",
                message="is false, but an lstm encoder carries a state across steps, which "
                        "only recurrent PPO keeps; set algorithm.recurrent: true")
        else:
            return
        raise models.ManifestError([issue])

    # ------------------------------------------------------------------ recurrent state
    def initial_hidden(self, num_envs: int) -> Hidden | None:
        """Zero recurrent state for ``num_envs`` sub-envs (None: not recurrent)."""
        if not self.recurrent:
            return None
        return cast(RecurrentActorCritic, self.actor_critic).initial_hidden(num_envs, self.device)

    def _policy_and_value(
        self, obs: NetworkInput, hidden: Hidden | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step's outputs; a given ``hidden`` is advanced in place."""
        if not self.recurrent:
            chain = self._chain()
            if chain is not None and isinstance(obs, torch.Tensor) and obs.dim() == 2:
                return chain.run(obs)  # the same kernels, without the modules' dispatch
            return self.actor_critic(obs)
        net = cast(RecurrentActorCritic, self.actor_critic)
        assert isinstance(obs, torch.Tensor)  # (recurrent: its LSTM encoder reads one tensor)
        state = hidden if hidden is not None else net.initial_hidden(obs.shape[0], obs.device)
        policy_out, value, new_state = net.step(obs, state)
        if hidden is not None:
            hidden.update(new_state)
        return policy_out, value

    # ------------------------------------------------------------------ acting
    @acts_on_single
    @torch.inference_mode()
    def get_action(
        self, obs: ObsLike, hidden: Hidden | None = None, *, deterministic: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Actions for a batch (or one observation): ``(env_action, action, log_prob, value)``.

        ``env_action`` goes to ``env.step``; ``action`` (the raw sample, before clipping or
        squashing) is what the rollout stores and ``learn`` evaluates. Sampled from the
        policy, or with ``deterministic`` its mode (argmax, or the Gaussian mean); by
        default deterministic when the agent was loaded for inference (``inference``).
        Recurrent: ``hidden`` (zero state if None) is advanced in place to the state
        after ``obs``.
        """
        policy_out, value = self._policy_and_value(self.to_tensor(obs), hidden)
        mode = self.inference if deterministic is None else deterministic
        if self.continuous:
            action_np, log_prob = gaussian_action(policy_out, self.actor_critic.log_std, mode,
                                                  self.torch_rng)
        else:
            action_np, log_prob = categorical_action(policy_out, mode, self.np_rng)
        return self._env_action(action_np), action_np, log_prob, value.cpu().numpy()

    @acts_on_single
    @torch.inference_mode()
    def greedy_action(self, obs: ObsLike, hidden: Hidden | None = None) -> np.ndarray:
        """Mode of the policy: argmax logit, or the Gaussian mean. Recurrent: ``hidden``
        (zero state if None) is advanced in place."""
        policy_out, _ = self._policy_and_value(self.to_tensor(obs), hidden)
        if self.continuous:
            return self._env_action(policy_out.cpu().numpy())
        return policy_out.argmax(dim=-1).cpu().numpy()

    @torch.inference_mode()
    def get_value(self, obs: ObsLike, hidden: Hidden | None = None) -> np.ndarray:
        """State values for a batch (used to bootstrap truncated episodes and rollouts);
        recurrent: from ``hidden`` (left unchanged)."""
        state = dict(hidden) if hidden is not None else None
        return self._policy_and_value(self.to_tensor(obs), state)[1].cpu().numpy()

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
        """PPO update from a rollout whose advantages have been computed.

        Recurrent: minibatches of ``batch_size`` BPTT sequences (``rollout.sequences``),
        each replayed from its stored initial state; otherwise of ``batch_size`` steps.
        """
        if rollout.pos == 0 or not rollout.valid[: rollout.pos].any():
            return {}
        stats = UpdateStats()
        if self.recurrent:
            self._learn_sequences(rollout, stats)
        else:
            self._learn_flat(rollout, stats)
        return stats.means()

    def _chain(self) -> PolicyValueChain | None:
        """The network's closed-form chain (None: not an MLP actor-critic it covers)."""
        return cached_chain(self, self.actor_critic, "_policy_value_chain",
                            PolicyValueChain.of)

    def _learn_flat(self, rollout: RolloutBuffer, stats: UpdateStats) -> None:
        data = rollout.flat()
        n = len(data["advantages"])
        obs = self.to_tensor(data["obs"])
        batch = self.batch_tensors(data)
        net = self.actor_critic
        chain = self._chain()
        flat = self._flat_training() if chain is not None else None
        if chain is not None and flat is not None and isinstance(obs, torch.Tensor):
            self._learn_closed_form(chain, flat, obs, batch, stats)
            return
        for idx in self.minibatches(n):
            policy_out, value = net(obs_index(obs, idx))
            minibatch = {k: v[idx] for k, v in batch.items()}
            if self._update(policy_out, value, minibatch, None, stats):
                return

    def _learn_sequences(self, rollout: RolloutBuffer, stats: UpdateStats) -> None:
        seq_len = int(self.max_seq_len) if self.max_seq_len is not None else rollout.pos
        data = rollout.sequences(seq_len, str(self.bptt_sequence_type))
        obs = torch.as_tensor(data["obs"], device=self.device)
        batch = self.batch_tensors(data)
        mask = torch.as_tensor(data["mask"], device=self.device)
        starts = torch.as_tensor(data["starts"], device=self.device)
        hidden = {k: torch.as_tensor(v, device=self.device) for k, v in data["hidden"].items()}
        net = cast(RecurrentActorCritic, self.actor_critic)
        for idx in self.minibatches(obs.shape[1]):
            if not mask[:, idx].any():
                continue
            policy_out, value = net.sequence(
                obs[:, idx], {k: v[idx] for k, v in hidden.items()}, starts[:, idx]
            )
            minibatch = {k: v[:, idx] for k, v in batch.items()}
            if self._update(policy_out, value, minibatch, mask[:, idx], stats):
                return

    def _learn_closed_form(self, chain: PolicyValueChain, flat: FlatTraining,
                           obs: torch.Tensor, batch: dict[str, torch.Tensor],
                           stats: UpdateStats) -> None:
        """:meth:`_learn_flat` without autograd: the loss's gradient in closed form
        (:func:`clipped_surrogate_gradient`, :class:`PolicyValueChain`), written into the
        flat gradient buffer, clipped and applied by one fused Adam step. Each pass gathers
        its permutation of the rollout once and cuts minibatches as slices of it (the
        same rows as :meth:`minibatches`)."""
        n = len(obs)
        batch_size = max(1, min(int(self.batch_size), n))
        flat.attach_grads()
        for order in self.epoch_orders(n):
            shuffled_obs = obs[order]
            shuffled = {k: v[order] for k, v in batch.items()}
            for start in range(0, n, batch_size):
                rows = slice(start, start + batch_size)
                minibatch = {k: v[rows] for k, v in shuffled.items()}
                terms = closed_form_step(self, chain, flat, shuffled_obs[rows], minibatch)
                if self._record(terms, stats):
                    return

    def _flat_training(self) -> FlatTraining | None:
        """The network's parameters, gradients and Adam state in flat buffers (see
        :mod:`agilerl.networks.flat_params`), rebuilt when either was replaced."""
        flat = self.__dict__["_flat"] = FlatTraining.current(
            self.__dict__.get("_flat"), self.actor_critic, None, self.optimizers["optimizer"])
        return flat

    def minibatches(self, n: int) -> Iterator[torch.Tensor]:
        """The indices of every minibatch of an update over ``n`` rows (or sequences):
        ``update_epochs`` passes, each over a permutation drawn from the agent's generator
        as the pass begins (:meth:`epoch_orders`), cut into minibatches of ``batch_size``."""
        batch_size = max(1, min(int(self.batch_size), n))
        for order in self.epoch_orders(n):
            for start in range(0, n, batch_size):
                yield order[start : start + batch_size]

    def epoch_orders(self, n: int) -> Iterator[torch.Tensor]:
        """One permutation of ``range(n)`` per pass of the update, each drawn from the
        agent's generator as the pass begins."""
        for _epoch in range(int(self.update_epochs)):
            yield torch.randperm(n, generator=self.torch_rng).to(self.device)

    def batch_tensors(self, data: Mapping[str, np.ndarray] | Sequences) -> dict[str, torch.Tensor]:
        """A rollout's actions, log-probabilities, advantages and returns as tensors."""
        dtype = torch.float32 if self.continuous else torch.long
        return {
            "actions": torch.as_tensor(data["actions"], dtype=dtype, device=self.device),
            "log_probs": torch.as_tensor(data["log_probs"], device=self.device),
            "advantages": torch.as_tensor(data["advantages"], device=self.device),
            "returns": torch.as_tensor(data["returns"], device=self.device),
        }

    def _update(
        self,
        policy_out: torch.Tensor,
        value: torch.Tensor,
        batch: dict[str, torch.Tensor],
        mask: torch.Tensor | None,
        stats: UpdateStats,
    ) -> bool:
        """One gradient step on a minibatch (``mask``: which entries count, e.g. not the
        padding of BPTT sequences). True when the KL early stop ends the update."""
        net = self.actor_critic
        # --- evaluate the stored actions under the current policy ---
        log_prob, entropy = net.log_prob_entropy(policy_out, batch["actions"])
        if mask is not None:
            log_prob, entropy, value = log_prob[mask], entropy[mask], value[mask]
            batch = {k: v[mask] for k, v in batch.items()}
        # --- clipped surrogate objective on normalised advantages ---
        terms = clipped_surrogate_loss(self, log_prob, entropy, value, batch)

        optimizer = self.optimizers["optimizer"]
        optimizer.zero_grad(set_to_none=True)
        terms.loss.backward()
        # The optimizer's parameter list is the network's, in the same order (rebuilt with
        # it after a mutation): cheaper than walking the modules with ``net.parameters()``.
        clip_grad_norm(optimizer.param_groups[0]["params"], self.max_grad_norm)
        optimizer.step()

        return self._record(terms.floats(), stats)

    def _record(self, values: list[float], stats: UpdateStats) -> bool:
        """Add a minibatch's terms (in :class:`SurrogateTerms`'s order) to ``stats``; True
        when the approximate KL divergence to the rollout policy exceeds ``target_kl``
        (the update stops early)."""
        stats.add(**dict(zip(UpdateStats.KEYS, values, strict=True)))
        approx_kl = values[UpdateStats.KEYS.index("approx_kl")]
        return self.target_kl is not None and approx_kl > self.target_kl
