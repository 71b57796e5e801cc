"""The policy-gradient update shared by GRPO, GSPO, CISPO, LLMREINFORCE and LLMPPO.

One ``learn(experience)``: advantages per completion token (the algorithm's
:meth:`PolicyGradientLLM.token_advantages`), log-probabilities under the sampling policy
and the reference policy (when ``beta > 0``), then ``update_epochs`` passes over
mini-batches of ``mini_batch_size`` rows, each accumulated over row chunks (``chunk_rows``,
``micro_batch_size_per_gpu``, or one row with ``reduce_memory_peak``), with gradients clipped
to ``max_grad_norm``. The loss per token is the algorithm's policy loss plus
``beta`` times the k3 estimate of KL(policy || reference); ``loss_norm`` ``micro_batch``
averages tokens within each completion then over completions, ``accumulation_window`` over
all tokens of the mini-batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from agilerl.algorithms.core.llm_base import LanguageModel, LLMAlgorithm, Rollout

if TYPE_CHECKING:
    from agilerl.models.algo import AlgoSpec
    from agilerl.models.algorithms.cispo import CISPOSpec
    from agilerl.models.algorithms.grpo import GRPOSpec
    from agilerl.models.algorithms.gspo import GSPOSpec
    from agilerl.models.algorithms.llmppo import LLMPPOSpec
    from agilerl.models.algorithms.llmreinforce import LLMREINFORCESpec


@dataclass
class Experience:
    """What a step hands to ``learn``: completions and the reward credited to each.

    Reasoning: one row per completion, ``group_size`` consecutive rows per prompt. Multi-turn:
    one row per turn; ``groups`` gives each row's group (episodes started from the same
    environment seed) and ``episode_start`` marks each episode's first row, whose
    ``returns`` entry is the episode's return (group statistics are taken over episodes).
    """

    rollout: Rollout
    rewards: np.ndarray
    """Reward credited to each row (the completion's reward, or a turn's return-to-go)."""
    group_size: int = 1
    """Consecutive rows sampled from the same prompt (when ``groups`` is None)."""
    groups: np.ndarray | None = None
    """Group id of each row (None: consecutive blocks of ``group_size``)."""
    episode_start: np.ndarray | None = None
    """True on the first row of each episode (None: every row is an episode)."""
    returns: np.ndarray | None = None
    """Episode return of each row's episode (None: ``rewards``)."""

    def group_ids(self) -> np.ndarray:
        if self.groups is not None:
            return np.asarray(self.groups)
        return np.arange(len(self.rewards)) // max(int(self.group_size), 1)


@dataclass
class UpdateBatch:
    """Per-token tensors of one update (rows x completion tokens)."""

    rollout: Rollout
    advantages: torch.Tensor
    old_logp: torch.Tensor | None
    ref_logp: torch.Tensor | None
    mask: torch.Tensor
    returns: torch.Tensor | None = None
    old_values: torch.Tensor | None = None


def group_advantages(experience: Experience, norm: str) -> torch.Tensor:
    """Each row's reward relative to its group's episodes (``mean_std``: standardised by
    the group's return deviation; ``mean_only``: centred; ``none``: raw)."""
    rewards = torch.as_tensor(np.asarray(experience.rewards, dtype=np.float64))
    if norm == "none":
        return rewards.float()
    groups = experience.group_ids()
    starts = experience.episode_start if experience.episode_start is not None \
        else np.ones(len(groups), dtype=bool)
    returns = experience.returns if experience.returns is not None else experience.rewards
    adv = torch.zeros_like(rewards)
    for group in np.unique(groups):
        rows = torch.as_tensor(np.nonzero(groups == group)[0])
        episodes = torch.as_tensor(np.asarray(returns, dtype=np.float64)[
            (groups == group) & np.asarray(starts, dtype=bool)])
        mean = episodes.mean() if len(episodes) else torch.tensor(0.0, dtype=torch.float64)
        adv[rows] = rewards[rows] - mean
        if norm == "mean_std" and len(episodes) > 1:
            adv[rows] = adv[rows] / (episodes.std() + 1e-4)
    return adv.float()


class PolicyGradientLLM(LLMAlgorithm):
    """An LLM algorithm trained by a clipped policy-gradient update (see module docstring)."""

    #: The importance-ratio level used when the spec leaves it null or ``auto``.
    default_ratio_level: ClassVar[str] = "token"
    #: Settings fixed for the whole population (mutating them changes no maths here).
    fixed_hyperparameters: ClassVar[tuple[str, ...]] = ()
    spec: GRPOSpec | GSPOSpec | CISPOSpec | LLMPPOSpec | LLMREINFORCESpec
    unsupported_settings: ClassVar[dict[str, str]] = {
        **LLMAlgorithm.unsupported_settings,
        "use_separate_reference_adapter": "the reference policy of the RL algorithms is the "
                                          "base model without adapters (a separate reference "
                                          "adapter is a DPO setting)",
    }
    inert_settings: ClassVar[dict[str, str]] = {
        **LLMAlgorithm.inert_settings,
        "action_granularity": "each completion (each turn of a multi-turn episode) is one "
                              "row whose tokens are the actions",
        "turn_ratio_pooling": "importance ratios are per token or per completion "
                              "(importance_sampling_level); a turn is one completion",
        "turn_level_clip": "a turn is one completion, clipped as importance_sampling_level "
                           "says",
    }

    # ------------------------------------------------------------------ hooks
    def token_advantages(self, experience: Experience, batch: UpdateBatch) -> torch.Tensor:
        """Advantage of every completion token (rows x tokens)."""
        raise NotImplementedError

    def policy_loss(self, logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor,
                    mask: torch.Tensor) -> torch.Tensor:
        """Per-token clipped surrogate ``-min(r A, clip(r) A)`` at this algorithm's ratio level."""
        ratio = self.ratio(logp, old, mask)
        low, high = self.clip_bounds()
        clipped = torch.clamp(ratio, low, high)
        return -torch.minimum(ratio * adv, clipped * adv)

    def clip_bounds(self) -> tuple[float, float]:
        coef = self.spec.clip_coef
        if isinstance(coef, list | tuple):
            from agilerl.llm.errors import LLMSettingError

            raise LLMSettingError(f"algorithm.clip_coef = {coef!r}: {self.algo} takes one "
                                  "coefficient (CISPO takes [low, high] bounds)")
        coef = float(getattr(self, "clip_coef", coef))
        return 1.0 - coef, 1.0 + coef

    def ratio_level(self) -> str:
        level = getattr(self.spec, "importance_sampling_level", None)
        if level in (None, "auto"):
            return self.default_ratio_level
        return "token" if level == "token" else "sequence"  # one turn: turn = trajectory

    def ratio(self, logp: torch.Tensor, old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Importance ratio per token: ``token`` level ``pi/pi_old`` of each token;
        ``sequence`` level (GSPO) the length-normalised ratio of the whole completion, with
        each token's gradient (``sg[s] * pi / sg[pi]``)."""
        if self.ratio_level() == "token":
            return torch.exp(logp - old)
        lengths = mask.sum(dim=1, keepdim=True).clamp(min=1)
        seq = torch.exp(((logp - old) * mask).sum(dim=1, keepdim=True) / lengths)
        return seq.detach() * torch.exp(logp - logp.detach())

    def value_loss(self, batch: UpdateBatch, rows: torch.Tensor,
                   values: torch.Tensor | None) -> torch.Tensor | float:
        """Critic loss of the rows (LLMPPO); 0 without a critic."""
        return 0.0

    def wants_hidden(self) -> bool:
        return False

    # ------------------------------------------------------------------ update
    def learn(self, experience: Experience) -> dict[str, float]:
        """One update from sampled completions and their rewards (see module docstring)."""
        rollout = experience.rollout
        mask = rollout.completion_mask.to(self.device).float()
        one_pass = int(self.update_epochs) == 1 and self._mini_batch(rollout) >= len(mask)
        old = None if one_pass and not self.needs_old_logprobs() else self.logprobs(rollout)
        ref = self.logprobs(rollout, reference=True) if float(self.beta) > 0 else None
        batch = UpdateBatch(rollout, torch.empty(0), old, ref, mask)
        batch.advantages = self.token_advantages(experience, batch).to(self.device)
        keep = self._kept_rows(batch)
        if keep is not None and not keep.any():
            return {"loss": 0.0, "kl": 0.0, "skipped_updates": 1.0}
        totals = {"loss": 0.0, "kl": 0.0, "clip_fraction": 0.0}
        updates = 0
        for _ in range(int(self.update_epochs)):
            for rows in self._mini_batches(len(mask), keep):
                stats = self._step(batch, rows)
                for name in totals:
                    totals[name] += stats[name]
                updates += 1
        metrics = {name: value / max(updates, 1) for name, value in totals.items()}
        if self.lr_schedule is not None:  # the rate of the last update
            metrics["lr"] = float(self.optimizer.param_groups[0]["lr"])
        return metrics

    def needs_old_logprobs(self) -> bool:
        return False

    def _kept_rows(self, batch: UpdateBatch) -> torch.Tensor | None:
        if not getattr(self.spec, "filter_zero_adv", False):
            return None
        return (batch.advantages.abs() * batch.mask).sum(dim=1) > 0

    def _mini_batch(self, rollout: Rollout) -> int:
        size = self.spec.mini_batch_size
        return int(size) if size else rollout.ids.shape[0]

    def _mini_batches(self, rows: int, keep: torch.Tensor | None) -> list[torch.Tensor]:
        index = torch.arange(rows) if keep is None else torch.nonzero(keep.cpu()).flatten()
        size = int(self.spec.mini_batch_size or len(index))
        return [index[s:s + size] for s in range(0, len(index), size)]

    def _step(self, batch: UpdateBatch, rows: torch.Tensor) -> dict[str, float]:
        self.optimizer.zero_grad(set_to_none=True)
        chunk = self.chunk_size(len(rows))
        window_tokens = float(batch.mask[rows].sum().clamp(min=1))
        loss_sum = kl_sum = clip_sum = 0.0
        with self.base.use(self.adapter) as model:
            model.train()
            for start in range(0, len(rows), chunk):
                part = rows[start:start + chunk]
                loss, kl, clip = self._chunk_loss(model, batch, part, len(rows), window_tokens)
                loss.backward()
                loss_sum += float(loss.detach())
                kl_sum += kl * len(part) / len(rows)
                clip_sum += clip * len(part) / len(rows)
        self.optimizer_step()
        return {"loss": loss_sum, "kl": kl_sum, "clip_fraction": clip_sum}

    def _chunk_loss(self, model: LanguageModel, batch: UpdateBatch, part: torch.Tensor, rows: int,
                    window_tokens: float) -> tuple[torch.Tensor, float, float]:
        rollout = batch.rollout
        logp, hidden = self.forward_logprobs(
            model, rollout.ids[part], rollout.attention_mask[part], rollout.prompt_len,
            hidden=self.wants_hidden())
        mask = batch.mask[part]
        old = batch.old_logp[part] if batch.old_logp is not None else logp.detach()
        adv = batch.advantages[part]
        per_token = self.policy_loss(logp, old, adv, mask)
        kl = torch.zeros_like(logp)
        if batch.ref_logp is not None:
            delta = batch.ref_logp[part] - logp
            kl = torch.exp(delta) - delta - 1.0
            per_token = per_token + float(self.beta) * kl
        loss = self._reduce(per_token, mask, rows, window_tokens)
        values = self.value_of(hidden) if hidden is not None else None
        loss = loss + self.value_loss(batch, part, values) * len(part) / rows
        ratio = torch.exp(logp.detach() - old)
        low, high = self.clip_bounds()
        clipped = (((ratio < low) | (ratio > high)).float() * mask).sum() / mask.sum().clamp(min=1)
        mean_kl = float(((kl.detach() * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean())
        return loss, mean_kl, float(clipped)

    def _reduce(self, per_token: torch.Tensor, mask: torch.Tensor, rows: int,
                window_tokens: float) -> torch.Tensor:
        if getattr(self.spec, "loss_norm", "micro_batch") == "accumulation_window":
            return (per_token * mask).sum() / window_tokens
        per_row = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return per_row.sum() / rows

    def value_of(self, hidden: torch.Tensor) -> torch.Tensor | None:
        return None


def finish_advantages(adv: torch.Tensor, spec: AlgoSpec) -> torch.Tensor:
    """``whiten_advantages`` (across the batch) then ``adv_clip_range`` clipping."""
    if getattr(spec, "whiten_advantages", False) and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    clip = getattr(spec, "adv_clip_range", None)
    if clip is not None and math.isfinite(float(clip)):
        adv = adv.clamp(-float(clip), float(clip))
    return adv
