"""Prompt + response pairs as padded token batches with a mask of the response tokens.

A row is ``prompt tokens + response tokens + EOS``; ``response_mask`` marks the response
tokens (and the EOS), the tokens a supervised or preference loss scores. Rows longer than
``max_length`` lose the start of the prompt first (the end of the prompt sits next to the
response), then the end of the response. Rows are right-padded; ``attention_mask`` marks
real tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["TokenBatch", "encode_prompt_responses", "pad_token_id"]


@dataclass(frozen=True)
class TokenBatch:
    """Right-padded token rows: ``input_ids``, ``attention_mask`` and ``response_mask``,
    each ``(rows, length)`` (``int64``, ``int64``, ``bool``)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def rows(self, start: int, stop: int) -> TokenBatch:
        """Rows ``start:stop`` of this batch."""
        return TokenBatch(self.input_ids[start:stop], self.attention_mask[start:stop],
                          self.response_mask[start:stop])

    def to(self, device: torch.device | str) -> TokenBatch:
        return TokenBatch(self.input_ids.to(device), self.attention_mask.to(device),
                          self.response_mask.to(device))

    @property
    def response_tokens(self) -> int:
        return int(self.response_mask.sum())


def pad_token_id(tokenizer: object) -> int:
    """The tokenizer's pad token, else its EOS token, else 0."""
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


def _ids(tokenizer: PreTrainedTokenizerBase, text: str, special: bool) -> list[int]:
    return list(tokenizer(text, add_special_tokens=special)["input_ids"])


def _fit(prompt: list[int], response: list[int], max_length: int) -> tuple[list[int], list[int]]:
    """Cut a row to ``max_length`` tokens: the prompt's start first, then the response's end
    (one prompt token is kept so the first response token has a context)."""
    overflow = len(prompt) + len(response) - max_length
    if overflow <= 0:
        return prompt, response
    keep_prompt = max(min(1, len(prompt)), len(prompt) - overflow)
    prompt = prompt[len(prompt) - keep_prompt:]
    return prompt, response[: max_length - len(prompt)]


def encode_prompt_responses(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str], responses: Sequence[str],
                            max_length: int) -> TokenBatch:
    """Tokenise ``prompts[i] + responses[i]`` (+ EOS) into one :class:`TokenBatch`.

    The prompt is tokenised with the tokenizer's special tokens (a BOS, if it adds one), the
    response without them, so the boundary between them is exact."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    if max_length < 2:
        raise ValueError(f"max_length must be at least 2 tokens, got {max_length}")
    eos = getattr(tokenizer, "eos_token_id", None)
    rows = []
    for prompt, response in zip(prompts, responses, strict=True):
        response_ids = _ids(tokenizer, str(response), special=False)
        if isinstance(eos, int):
            response_ids.append(eos)
        rows.append(_fit(_ids(tokenizer, str(prompt), special=True), response_ids, max_length))
    length = max(len(p) + len(r) for p, r in rows)
    input_ids = torch.full((len(rows), length), pad_token_id(tokenizer), dtype=torch.long)
    attention = torch.zeros((len(rows), length), dtype=torch.long)
    response_mask = torch.zeros((len(rows), length), dtype=torch.bool)
    for i, (prompt_ids, response_ids) in enumerate(rows):
        n_prompt, n_total = len(prompt_ids), len(prompt_ids) + len(response_ids)
        input_ids[i, :n_total] = torch.tensor(prompt_ids + response_ids, dtype=torch.long)
        attention[i, :n_total] = 1
        # the first token of a row has no context to be predicted from
        response_mask[i, max(n_prompt, 1):n_total] = True
    return TokenBatch(input_ids, attention, response_mask)
