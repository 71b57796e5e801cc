"""SFT: supervised fine-tuning of a LoRA adapter on prompt / response pairs.

The loss is the mean negative log-likelihood of the response tokens (and the end-of-sequence
token after them) given the prompt; prompt and padding tokens are not scored
(:func:`agilerl.llm.losses.sft_loss`). A member's fitness is minus its mean loss per response
token on the held-out rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from agilerl.algorithms.core.llm_base import LanguageModel
from agilerl.algorithms.core.llm_dataset import DatasetLLMAlgorithm
from agilerl.algorithms.core.registry import registered
from agilerl.llm.losses import sft_loss
from agilerl.llm.text_batches import TokenBatch
from agilerl.models._generated.hyperparameter_attributes import SFTHyperparameterAttributes

if TYPE_CHECKING:
    from agilerl.llm.dataset_envs import DatasetEnv


@registered
class SFT(SFTHyperparameterAttributes, DatasetLLMAlgorithm[TokenBatch]):
    """Masked next-token loss on the response tokens."""

    algo = "SFT"
    inert_settings: ClassVar[dict[str, str]] = {
        **DatasetLLMAlgorithm.inert_settings,
        "beta": "SFT has no reference policy; beta is used by DPO and the RL algorithms",
        "use_separate_reference_adapter": "SFT has no reference policy",
    }

    def learn(self, batch: TokenBatch) -> dict[str, float]:
        """One update on a batch of prompt / response rows; returns ``loss`` (mean over the
        batch's response tokens, before the step) and ``tokens``."""
        def chunk_loss(model: LanguageModel, rows: slice, window: range) -> tuple[torch.Tensor,
                                                                        dict[str, float]]:
            part = batch.rows(rows.start, rows.stop).to(self.device)
            window_tokens = batch.rows(window.start, window.stop).response_tokens
            if part.response_tokens == 0:  # every response cut off: nothing to learn here
                return torch.zeros((), device=self.device, requires_grad=True), {}
            logits = self.forward_logits(model, part)
            share = part.response_tokens / window_tokens
            loss = sft_loss(logits, part.input_ids, part.response_mask) * share
            return loss, {"loss": float(loss.detach())}

        metrics = self.optimise(len(batch), chunk_loss)
        metrics["tokens"] = float(batch.response_tokens)
        return metrics

    @torch.no_grad()
    def held_out_loss(self, env: DatasetEnv[TokenBatch]) -> float:
        """Mean loss per response token over ``env``'s held-out rows."""
        loss_sum, tokens = 0.0, 0
        with self.evaluating() as model:
            for batch in env.eval_batches(int(self.batch_size)):
                for part in self.row_chunks(range(len(batch))):
                    rows = batch.rows(part.start, part.stop).to(self.device)
                    n = rows.response_tokens
                    if n:
                        logits = self.forward_logits(model, rows)
                        loss_sum += float(sft_loss(logits, rows.input_ids,
                                                   rows.response_mask)) * n
                        tokens += n
        return loss_sum / max(tokens, 1)

    def evaluate_dataset(self, env: DatasetEnv[TokenBatch]) -> float:
        """Minus the held-out loss (higher is better)."""
        return -self.held_out_loss(env)
