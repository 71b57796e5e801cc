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
from typing import Any, NamedTuple, cast

import numpy as np
import torch
from gymnasium import spaces

from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.algorithms.core.single_obs import acts_on_single
from agilerl.algorithms.core.spaces import IncompatibleSpaceError, action_dim, obs_index
from agilerl.algorithms.core.target import clip_grad_norm
from agilerl.algorithms.registry import registered
from agilerl.components.rollout_buffer import RolloutBuffer
from agilerl.networks.actor_critic import ActorCritic
from agilerl.networks.config import NetworkConfig
from agilerl.networks.optim import make_optimizer
from agilerl.networks.recurrent_actor_critic import Hidden, RecurrentActorCritic


@registered
class PPO(RLAlgorithm):
    """PPO with an actor-critic network (shared encoder when ``share_encoders``).

    With ``recurrent`` the encoder is an LSTM: ``get_action``, ``greedy_action`` and
    ``get_value`` take the recurrent state of the sub-envs (``initial_hidden``), and the
    first two advance it in place (the caller zeroes the rows of sub-envs whose episode
    starts, with ``reset_hidden``); ``learn`` replays BPTT sequences of ``max_seq_len``
    steps cut as ``bptt_sequence_type`` says, and ``batch_size`` counts sequences.
    """

    algo = "PPO"
    hyperparameter_names = (
        "batch_size", "lr", "learn_step", "gamma", "gae_lambda", "action_std_init",
        "clip_coef", "ent_coef", "vf_coef", "max_grad_norm", "target_kl", "update_epochs",
        "share_encoders", "num_envs", "recurrent", "max_seq_len", "bptt_sequence_type",
        "anneal_lr",
    )  # fmt: skip
    fixed_hyperparameters = (
        "action_std_init", "share_encoders", "num_envs", "target_kl", "recurrent",
        "max_seq_len", "bptt_sequence_type", "anneal_lr",
    )  # fmt: skip
    unsupported_settings = {
        "rollout_buffer_config": "rollout buffer settings are not implemented in this "
                                 "version; remove them (the rollout buffer is sized by "
                                 "learn_step and num_envs and has no other settings)",
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
    recurrent: bool
    max_seq_len: int | None
    bptt_sequence_type: str
    anneal_lr: bool

    @classmethod
    def settings_not_honoured(cls, spec: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
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
        self, obs: torch.Tensor, hidden: Hidden | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step's outputs; a given ``hidden`` is advanced in place."""
        if not self.recurrent:
            return self.actor_critic(obs)
        net = cast(RecurrentActorCritic, self.actor_critic)
        state = hidden if hidden is not None else net.initial_hidden(obs.shape[0], obs.device)
        policy_out, value, new_state = net.step(obs, state)
        if hidden is not None:
            hidden.update(new_state)
        return policy_out, value

    # ------------------------------------------------------------------ acting
    @acts_on_single
    @torch.inference_mode()
    def get_action(
        self, obs: Any, hidden: Hidden | None = None, *, deterministic: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Actions for a batch (or one observation): ``(env_action, action, log_prob, value)``.

        ``env_action`` goes to ``env.step``; ``action`` (the raw sample, before clipping or
        squashing) is what the rollout stores and ``learn`` evaluates. Sampled from the
        policy, or with ``deterministic`` its mode (argmax, or the Gaussian mean); by
        default deterministic when the agent was loaded for inference (``inference``).
        Recurrent: ``hidden`` (zero state if None) is advanced in place to the state
        after ``obs``.
        """
        net = self.actor_critic
        policy_out, value = self._policy_and_value(self.to_tensor(obs), hidden)
        mode = self.inference if deterministic is None else deterministic
        if self.continuous:
            std = net.log_std.exp()
            if mode:
                action = policy_out
            else:
                noise = torch.randn(policy_out.shape, generator=self.torch_rng)
                action = policy_out + std * noise.to(policy_out.device)
            log_prob = net.distribution(policy_out).log_prob(action).sum(-1)
        else:
            probs = torch.softmax(policy_out, dim=-1)
            action = (policy_out.argmax(dim=-1).cpu() if mode else
                      torch.multinomial(probs.cpu(), 1, generator=self.torch_rng).squeeze(-1))
            log_prob = torch.log(
                probs.gather(1, action.to(probs.device).unsqueeze(1)).squeeze(1).clamp_min(1e-30)
            )
        action_np = action.cpu().numpy()
        return self._env_action(action_np), action_np, log_prob.cpu().numpy(), value.cpu().numpy()

    @acts_on_single
    @torch.inference_mode()
    def greedy_action(self, obs: Any, hidden: Hidden | None = None) -> np.ndarray:
        """Mode of the policy: argmax logit, or the Gaussian mean. Recurrent: ``hidden``
        (zero state if None) is advanced in place."""
        policy_out, _ = self._policy_and_value(self.to_tensor(obs), hidden)
        if self.continuous:
            return self._env_action(policy_out.cpu().numpy())
        return policy_out.argmax(dim=-1).cpu().numpy()

    @torch.inference_mode()
    def get_value(self, obs: Any, hidden: Hidden | None = None) -> np.ndarray:
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

    def _learn_flat(self, rollout: RolloutBuffer, stats: UpdateStats) -> None:
        data = rollout.flat()
        n = len(data["advantages"])
        obs = self.to_tensor(data["obs"])
        batch = self.batch_tensors(data)
        net = self.actor_critic
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

    def minibatches(self, n: int) -> Iterator[torch.Tensor]:
        """The indices of every minibatch of an update over ``n`` rows (or sequences):
        ``update_epochs`` passes, each over a permutation drawn from the agent's generator
        as the pass begins, cut into minibatches of ``batch_size``."""
        batch_size = max(1, min(int(self.batch_size), n))
        for _epoch in range(int(self.update_epochs)):
            order = torch.randperm(n, generator=self.torch_rng).to(self.device)
            for start in range(0, n, batch_size):
                yield order[start : start + batch_size]

    def batch_tensors(self, data: dict[str, Any]) -> dict[str, torch.Tensor]:
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

        values = torch.stack([term.detach() for term in terms]).tolist()
        stats.add(**dict(zip(UpdateStats.KEYS, values, strict=True)))
        approx_kl = values[UpdateStats.KEYS.index("approx_kl")]
        # --- early stop when the policy moved too far from the rollout policy ---
        return self.target_kl is not None and approx_kl > self.target_kl


class SurrogateTerms(NamedTuple):
    """The terms of one clipped-surrogate minibatch loss (``loss`` with grad); scalars, or
    one per member of a stacked minibatch."""

    loss: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    clipfrac: torch.Tensor


def clipped_surrogate_loss(hp: Any, log_prob: torch.Tensor, entropy: torch.Tensor,
                           value: torch.Tensor, batch: Mapping[str, torch.Tensor]
                           ) -> SurrogateTerms:
    """PPO's loss on a minibatch: the clipped surrogate on normalised advantages, half the
    squared value error and the entropy bonus, weighted by ``hp``'s ``clip_coef``,
    ``vf_coef`` and ``ent_coef`` (PPO, each IPPO unit, and stacked PPO members); with the
    approximate KL to the rollout policy and the clipped fraction, without grad.

    Means run over the last dimension: ``(rows,)`` tensors give scalar terms;
    ``(members, rows)`` tensors, with ``hp``'s coefficients as ``(members, 1)`` tensors,
    give one term per member.
    """
    log_ratio = log_prob - batch["log_probs"]
    ratio = log_ratio.exp()
    adv = batch["advantages"]
    if adv.shape[-1] > 1:
        adv = (adv - adv.mean(-1, keepdim=True)) / (adv.std(-1, keepdim=True) + 1e-8)
    clip = hp.clip_coef
    pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean(-1, True)
    value_loss = 0.5 * (value - batch["returns"]).pow(2).mean(-1, True)
    entropy_mean = entropy.mean(-1, True)
    loss = pg_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy_mean
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean(-1, True)
        clipfrac = ((ratio - 1.0).abs() > clip).float().mean(-1, True)
    return SurrogateTerms(*(term.squeeze(-1) for term in (
        loss, pg_loss, value_loss, entropy_mean, approx_kl, clipfrac)))


class UpdateStats:
    """Running means of the update's metrics over minibatches."""

    KEYS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")

    def __init__(self) -> None:
        self.sums = dict.fromkeys(self.KEYS, 0.0)
        self.updates = 0

    def add(self, **values: float) -> None:
        for key, val in values.items():
            self.sums[key] += val
        self.updates += 1

    def means(self) -> dict[str, float]:
        return {k: v / max(self.updates, 1) for k, v in self.sums.items()}
