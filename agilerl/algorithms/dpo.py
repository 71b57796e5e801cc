"""DPO: Direct Preference Optimisation of a LoRA adapter on chosen / rejected pairs.

For each pair the implicit reward of a response is ``beta * (log pi(y|x) - log pi_ref(y|x))``
summed over its tokens, and the loss is ``-log sigmoid(reward(chosen) - reward(rejected))``
(:func:`agilerl.llm.losses.dpo_loss`). The reference policy ``pi_ref`` is the frozen base
model with the adapters switched off; with ``use_separate_reference_adapter`` it is a second,
frozen adapter of the member instead, which starts as a copy of the member's adapter and is
set to it again at the start of every pass over the training data.

A member's fitness is its preference accuracy on the held-out pairs: the share of pairs
whose chosen response earns the higher implicit reward (0 before any update, when the
policy still equals the reference).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any, cast

import torch

from agilerl.algorithms.core.llm_base import LanguageModel, LLMStateFields
from agilerl.algorithms.core.llm_dataset import DatasetLLMAlgorithm
from agilerl.algorithms.core.registry import registered
from agilerl.llm.dataset_envs import DatasetEnv, PreferenceBatch
from agilerl.llm.losses import DPOOutput, dpo_loss, response_log_probs
from agilerl.llm.text_batches import TokenBatch
from agilerl.models._generated.hyperparameter_attributes import DPOHyperparameterAttributes


class DPOStateFields(LLMStateFields, total=False):
    """:class:`LLMStateFields` and, with a separate reference adapter, its state."""

    reference_adapter: dict[str, torch.Tensor]
    reference_epoch: int


@registered
class DPO(DPOHyperparameterAttributes, DatasetLLMAlgorithm[PreferenceBatch]):
    """Preference optimisation against a reference policy with strength ``beta``."""

    algo = "DPO"

    def _build_extra(self) -> None:
        self.reference_adapter: str | None = None
        self.reference_epoch = 0
        if self.spec.use_separate_reference_adapter:
            self.reference_adapter = self.base.add_adapter(self.lora_config, prefix="reference")
            weakref.finalize(self, self.base.delete_adapter, self.reference_adapter)
            self.sync_reference(0, force=True)

    # ------------------------------------------------------------------ reference policy
    def sync_reference(self, epoch: int, force: bool = False) -> None:
        """With a separate reference adapter: copy this member's adapter into it when a new
        pass over the training data (``epoch``) starts. Without one, nothing to do."""
        if self.reference_adapter is None or (epoch <= self.reference_epoch and not force):
            return
        self.base.load_adapter_state(self.reference_adapter,
                                     self.base.adapter_state(self.adapter))
        for param in self.base.parameters(self.reference_adapter):
            param.requires_grad_(False)
        self.reference_epoch = int(epoch)

    @torch.no_grad()
    def reference_log_probs(self, tokens: TokenBatch) -> torch.Tensor:
        """Summed response log-probabilities of every row under the reference policy."""
        if self.reference_adapter is None:
            context: Any = self.base.reference()
        else:
            context = self.evaluating(self.reference_adapter)
        parts = []
        with context as model:
            was_training = model.training
            model.eval()
            for part in self.row_chunks(range(len(tokens))):
                rows = tokens.rows(part.start, part.stop).to(self.device)
                logits = self.forward_logits(model, rows)
                parts.append(response_log_probs(logits, rows.input_ids, rows.response_mask))
            model.train(was_training)
        return torch.cat(parts)

    @torch.no_grad()
    def policy_log_probs(self, tokens: TokenBatch) -> torch.Tensor:
        """Summed response log-probabilities under this member (eval mode, no gradients)."""
        parts = []
        with self.evaluating() as model:
            for part in self.row_chunks(range(len(tokens))):
                rows = tokens.rows(part.start, part.stop).to(self.device)
                logits = self.forward_logits(model, rows)
                parts.append(response_log_probs(logits, rows.input_ids, rows.response_mask))
        return torch.cat(parts)

    # ------------------------------------------------------------------ update
    def _pair_tokens(self, batch: PreferenceBatch, pairs: slice) -> TokenBatch:
        """Chosen rows, then rejected rows, of ``pairs`` (one forward pass for both)."""
        chosen = batch.chosen.rows(pairs.start, pairs.stop)
        rejected = batch.rejected.rows(pairs.start, pairs.stop)
        return TokenBatch(torch.cat([chosen.input_ids, rejected.input_ids]),
                          torch.cat([chosen.attention_mask, rejected.attention_mask]),
                          torch.cat([chosen.response_mask, rejected.response_mask]))

    def learn(self, batch: PreferenceBatch) -> dict[str, float]:
        """One update on a batch of preference pairs; returns ``loss``, ``accuracy``,
        ``margin`` (mean implicit reward margin) and the mean ``chosen_reward`` /
        ``rejected_reward`` (before the step)."""
        reference = self.reference_log_probs(batch.tokens).to(self.device)
        ref_chosen, ref_rejected = reference[:batch.pairs], reference[batch.pairs:]

        def chunk_loss(model: LanguageModel, pairs: slice, window: range) -> tuple[torch.Tensor,
                                                                         dict[str, float]]:
            tokens = self._pair_tokens(batch, pairs).to(self.device)
            logits = self.forward_logits(model, tokens)
            logp = response_log_probs(logits, tokens.input_ids, tokens.response_mask)
            n = pairs.stop - pairs.start
            out = dpo_loss(logp[:n], logp[n:], ref_chosen[pairs], ref_rejected[pairs],
                           float(self.beta))
            share = n / len(window)
            return out.loss * share, {name: value * share
                                      for name, value in _metrics(out).items()}

        return self.optimise(batch.pairs, chunk_loss)

    # ------------------------------------------------------------------ evaluation
    def held_out_preferences(self, env: DatasetEnv[PreferenceBatch]) -> DPOOutput:
        """Implicit rewards of ``env``'s held-out pairs (the loss at this member's beta)."""
        policy, reference = [], []
        for batch in env.eval_batches(int(self.batch_size)):
            policy.append(_split_pairs(self.policy_log_probs(batch.tokens), batch.pairs))
            reference.append(_split_pairs(self.reference_log_probs(batch.tokens), batch.pairs))
        return dpo_loss(torch.cat([c for c, _ in policy]), torch.cat([r for _, r in policy]),
                        torch.cat([c for c, _ in reference]),
                        torch.cat([r for _, r in reference]), float(self.beta))

    def evaluate_dataset(self, env: DatasetEnv[PreferenceBatch]) -> float:
        """Preference accuracy on the held-out pairs (higher is better)."""
        out = self.held_out_preferences(env)
        self.eval_metrics = _metrics(out)
        return out.accuracy

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, object]:
        state = super().get_state()
        if self.reference_adapter is not None:
            state["reference_adapter"] = self.base.adapter_state(self.reference_adapter)
            state["reference_epoch"] = self.reference_epoch
        return state

    def set_state(self, state: Mapping[str, object]) -> None:
        super().set_state(state)
        state = cast(DPOStateFields, state)  # a get_state dict (or its torch.load)
        if self.reference_adapter is not None and "reference_adapter" in state:
            self.base.load_adapter_state(self.reference_adapter, state["reference_adapter"])
            self.reference_epoch = int(state["reference_epoch"])


def _split_pairs(values: torch.Tensor, pairs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) halves of per-row values of a :class:`PreferenceBatch`."""
    return values[:pairs], values[pairs:]


def _metrics(out: DPOOutput) -> dict[str, float]:
    return {"loss": float(out.loss.detach()), "accuracy": out.accuracy,
            "margin": float(out.margins.mean()),
            "chosen_reward": float(out.chosen_rewards.mean()),
            "rejected_reward": float(out.rejected_rewards.mean())}
