"""LLM algorithms that learn from dataset rows (SFT, DPO) rather than sampled completions.

A member still is a LoRA adapter over the shared base (:class:`LLMAlgorithm`); this adds
what learning from token batches (:mod:`agilerl.llm.text_batches`) needs:

* :meth:`DatasetLLMAlgorithm.forward_logits` -- a forward pass over right-padded rows
  (explicit position ids with ``calc_position_embeddings``);
* :meth:`DatasetLLMAlgorithm.optimise` -- ``update_epochs`` passes over mini-batches of
  ``mini_batch_size`` rows, each accumulated over row chunks (``chunk_rows``,
  ``micro_batch_size_per_gpu``, or one row with ``reduce_memory_peak``), gradients clipped to
  ``max_grad_norm``;
* :meth:`DatasetLLMAlgorithm.evaluate_dataset` -- the fitness a dataset environment asks for
  (:meth:`agilerl.llm.dataset_envs.DatasetEnv.evaluate`).
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import torch

from agilerl.algorithms.core.llm_base import LanguageModel, LLMAlgorithm
from agilerl.llm.text_batches import TokenBatch

if TYPE_CHECKING:
    from agilerl.llm.dataset_envs import DatasetEnv

ChunkLoss = Callable[[LanguageModel, slice, range], tuple[torch.Tensor, dict[str, float]]]
"""``(model, chunk rows, mini-batch rows) -> (the chunk's share of the mini-batch loss, its
share of each metric)``: shares summed over a mini-batch's chunks give its loss/metrics."""


BatchT = TypeVar("BatchT")
"""The batch type of the dataset environment an algorithm trains on."""


class DatasetLLMAlgorithm(LLMAlgorithm, Generic[BatchT]):
    """Base of SFT and DPO (see the module docstring)."""

    inert_settings: ClassVar[dict[str, str]] = {
        **LLMAlgorithm.inert_settings,
        "vllm_importance_sampling_correction": "this algorithm learns from dataset rows, not "
                                               "from sampled completions",
        "vllm_importance_sampling_cap": "this algorithm learns from dataset rows, not from "
                                        "sampled completions",
    }

    def forward_logits(self, model: LanguageModel, tokens: TokenBatch) -> torch.Tensor:
        """``(rows, length, vocab)`` logits of right-padded ``tokens`` on this member's device."""
        tokens = tokens.to(self.device)
        kwargs: dict[str, object] = {"input_ids": tokens.input_ids,
                                  "attention_mask": tokens.attention_mask}
        if self.spec.calc_position_embeddings:
            kwargs["position_ids"] = (tokens.attention_mask.cumsum(dim=1) - 1).clamp(min=0)
        return model(**kwargs, use_cache=False).logits

    @contextlib.contextmanager
    def evaluating(self, adapter: str | None = None) -> Iterator[LanguageModel]:
        """The model with ``adapter`` (default: this member's) active, in eval mode (no
        dropout) and without gradients; training mode is restored afterwards."""
        with self.base.use(adapter or self.adapter) as model, torch.no_grad():
            was_training = model.training
            model.eval()
            try:
                yield model
            finally:
                model.train(was_training)

    def row_chunks(self, rows: range) -> list[slice]:
        size = self.chunk_size(len(rows))
        return [slice(s, min(s + size, rows.stop)) for s in range(rows.start, rows.stop, size)]

    def optimise(self, rows: int, chunk_loss: ChunkLoss) -> dict[str, float]:
        """Run the update over ``rows`` rows (see the module docstring); returns each metric
        averaged over the optimizer steps."""
        mini = int(self.spec.mini_batch_size or rows)
        totals: dict[str, float] = {}
        steps = 0
        for _ in range(int(self.update_epochs)):
            for start in range(0, rows, mini):
                window = range(start, min(start + mini, rows))
                self.optimizer.zero_grad(set_to_none=True)
                with self.base.use(self.adapter) as model:
                    model.train()
                    for part in self.row_chunks(window):
                        loss, metrics = chunk_loss(model, part, window)
                        loss.backward()
                        for name, value in metrics.items():
                            totals[name] = totals.get(name, 0.0) + float(value)
                self.optimizer_step()
                steps += 1
        return {name: value / max(steps, 1) for name, value in totals.items()}

    @abstractmethod
    def evaluate_dataset(self, env: DatasetEnv[BatchT]) -> float:
        """Fitness on ``env``'s held-out rows (higher is better)."""
