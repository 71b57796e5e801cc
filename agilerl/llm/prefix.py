"""Forward passes that run a prompt shared by several rows once.

GRPO-style algorithms sample ``group_size`` completions of each prompt, so a batch holds each
prompt ``group_size`` times. A prompt's tokens attend only to the prompt, so its keys and
values are the same in every row that holds it: they are computed once per distinct prompt
and the key/value cache is expanded to every row; the rest of each row then runs on top of
it. This is the forward pass of the whole rows (same maths; gradients reach the adapter
through the shared prompt, summed over the rows that share it) for a fraction of the
prompt's cost. Sampling uses it to prefill, the update to score completions.

It costs one more forward call, which outweighs what it saves on very small models: it is
used when it saves at least :data:`MIN_SAVED_MACS` multiply-adds.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Protocol

import torch

__all__ = ["MIN_SAVED_MACS", "cache_argument", "distinct_prefixes", "shared_prefix_cache"]

#: Multiply-adds a shared prompt must save to be worth its extra forward call (about a
#: millisecond of CPU time per 1e8 below which a tiny model runs faster without sharing).
MIN_SAVED_MACS = 1e8


def distinct_prefixes(ids: torch.Tensor, attention: torch.Tensor,
                      length: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Rows whose first ``length`` tokens (ids and mask) are equal, as ``(first, inverse)``:
    ``first[k]`` is a row holding distinct prefix ``k``, ``inverse[r]`` the prefix of row
    ``r``. None when no two rows share their prefix (nothing to save)."""
    rows = ids.shape[0]
    if length < 1 or rows < 2:
        return None
    key = torch.cat([ids[:, :length], attention[:, :length].to(ids.dtype)], dim=1)
    unique, inverse = torch.unique(key, dim=0, return_inverse=True)
    if unique.shape[0] == rows:
        return None
    first = torch.full((unique.shape[0],), rows, dtype=torch.long, device=ids.device)
    first = first.scatter_reduce(0, inverse, torch.arange(rows, device=ids.device), "amin")
    return first, inverse


@functools.cache
def _cache_name(model_type: type[torch.nn.Module]) -> str:
    params = inspect.signature(model_type.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class KVCache(Protocol):
    """A transformers key/value cache, as far as this module uses it."""

    def reorder_cache(self, beam_idx: torch.Tensor) -> None: ...


def cache_argument(model: object) -> str:
    """The keyword under which ``model`` (a transformers model, or a peft model over one)
    takes a key/value cache: ``cache`` in recent transformers, ``past_key_values`` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    model_type: Any = type(base)  # a class is hashable, but mypy's ``Hashable`` disagrees
    return _cache_name(model_type)


def _output_cache(out: object) -> KVCache:
    for name in ("cache", "past_key_values"):
        cache = out.get(name) if hasattr(out, "get") else None
        if cache is not None:
            return cache
    raise RuntimeError("the model returned no key/value cache for a shared prompt")


def shared_prefix_cache(model: torch.nn.Module, ids: torch.Tensor, attention: torch.Tensor, length: int,
                        position_ids: torch.Tensor | None = None, *,
                        macs_per_token: float = math.inf) -> KVCache | None:
    """The key/value cache of the first ``length`` tokens of every row, computed once per
    distinct prefix (:func:`distinct_prefixes`) and expanded to all rows; None when no two
    rows share it, or when that saves fewer than :data:`MIN_SAVED_MACS` multiply-adds at
    ``macs_per_token`` (the model's parameters outside its embeddings). Gradients flow
    through it when grad mode is on."""
    groups = distinct_prefixes(ids, attention, length)
    if groups is None:
        return None
    first, inverse = groups
    if (ids.shape[0] - first.shape[0]) * length * macs_per_token < MIN_SAVED_MACS:
        return None
    kwargs: dict[str, object] = {"input_ids": ids[first, :length],
                              "attention_mask": attention[first, :length], "use_cache": True,
                              "logits_to_keep": 1}
    if position_ids is not None:
        kwargs["position_ids"] = position_ids[first, :length]
    cache = _output_cache(model(**kwargs))
    cache.reorder_cache(inverse)
    return cache
