"""Dataset environments of the offline LLM algorithms: ``preference`` (DPO) and ``sft``.

Each holds the training and held-out rows of ``environment.dataset``
(:func:`agilerl.llm.datasets.load_llm_dataset`) and serves them as token batches:

* :meth:`DatasetEnv.next_batch` -- the next ``batch_size`` training rows, in an order
  reshuffled every pass over the data from ``(seed, epoch)``; its position is the whole
  state (:meth:`DatasetEnv.state_dict`), so a resumed run reads the same rows next;
* :meth:`DatasetEnv.eval_batches` -- the held-out rows in order, for evaluation.

A preference row is ``prompt``, ``chosen`` and ``rejected`` text; a batch stacks the chosen
rows, then the rejected rows, into one :class:`~agilerl.llm.text_batches.TokenBatch`, so a
single forward pass scores both. An SFT row is ``prompt`` and the ``response_column`` text.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from agilerl.llm.datasets import DatasetSplit, load_llm_dataset
from agilerl.llm.text_batches import TokenBatch, encode_prompt_responses

__all__ = ["DatasetEnv", "PreferenceBatch", "PreferenceEnv", "SFTEnv", "make_dataset_env"]


@dataclass(frozen=True)
class PreferenceBatch:
    """``pairs`` preference pairs: rows ``:pairs`` of ``tokens`` are prompt + chosen, rows
    ``pairs:`` prompt + rejected."""

    tokens: TokenBatch
    pairs: int

    @property
    def chosen(self) -> TokenBatch:
        return self.tokens.rows(0, self.pairs)

    @property
    def rejected(self) -> TokenBatch:
        return self.tokens.rows(self.pairs, 2 * self.pairs)


class DatasetEnv:
    """Training and held-out rows of one dataset, served as token batches."""

    env_type: ClassVar[str]
    needed_by: ClassVar[str]

    def __init__(self, split: DatasetSplit, tokenizer: Any, *, batch_size: int,
                 max_context_length: int, seed: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.train, self.test, self.source = split.train, split.test, split.source
        self.tokenizer = tokenizer
        self.batch_size = int(batch_size)
        self.max_context_length = int(max_context_length)
        self.seed = int(seed)
        self.epoch = 0
        self.cursor = 0
        self._order = self._epoch_order()

    # ------------------------------------------------------------------ subclass hooks
    def encode(self, rows: dict[str, list[Any]]) -> Any:
        """Token batch of a column-major slice of rows."""
        raise NotImplementedError

    # ------------------------------------------------------------------ batches
    def _epoch_order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.train))

    @property
    def batches_per_epoch(self) -> int:
        """Training batches in one pass over the training rows (the last may be short)."""
        return -(-len(self.train) // self.batch_size)

    def next_batch(self) -> Any:
        """The next training batch; a new shuffled pass starts when one ends."""
        if self.cursor >= len(self._order):
            self.epoch += 1
            self.cursor = 0
            self._order = self._epoch_order()
        indices = self._order[self.cursor:self.cursor + self.batch_size]
        self.cursor += len(indices)
        return self.encode(self.train[[int(i) for i in indices]])

    def eval_batches(self, batch_size: int | None = None) -> Iterator[Any]:
        """The held-out rows in order, ``batch_size`` (default: the training size) at a time."""
        size = int(batch_size or self.batch_size)
        for start in range(0, len(self.test), size):
            yield self.encode(self.test[start:start + size])

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict[str, int]:
        """Where the training stream stands: enough to continue it exactly."""
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.seed, self.epoch, self.cursor = int(state["seed"]), int(state["epoch"]), \
            int(state["cursor"])
        self._order = self._epoch_order()

    @classmethod
    def from_spec(cls, spec: Any, tokenizer: Any, *, batch_size: int, max_context_length: int,
                  seed: int = 0, base_dir: str | os.PathLike[str] | None = None) -> DatasetEnv:
        """Load ``spec.dataset`` (an ``LLMEnvSpec``), check its columns and split it."""
        split = load_llm_dataset(spec, cls.columns_of(spec), cls.needed_by, base_dir=base_dir,
                                 seed=seed)
        return cls(split, tokenizer, batch_size=batch_size,
                   max_context_length=max_context_length, seed=seed, **cls.options_of(spec))

    @classmethod
    def columns_of(cls, spec: Any) -> list[str]:
        """The dataset columns this environment reads (after ``environment.columns``)."""
        raise NotImplementedError

    @classmethod
    def options_of(cls, spec: Any) -> dict[str, Any]:
        """Constructor keywords taken from the spec beyond the common ones."""
        return {}


class PreferenceEnv(DatasetEnv):
    """``prompt`` / ``chosen`` / ``rejected`` rows as :class:`PreferenceBatch` es (DPO)."""

    env_type = "preference"
    needed_by = "a preference environment (DPO)"

    @classmethod
    def columns_of(cls, spec: Any) -> list[str]:
        return ["prompt", "chosen", "rejected"]

    def encode(self, rows: dict[str, list[Any]]) -> PreferenceBatch:
        prompts = list(rows["prompt"])
        tokens = encode_prompt_responses(self.tokenizer, prompts + prompts,
                                         list(rows["chosen"]) + list(rows["rejected"]),
                                         self.max_context_length)
        return PreferenceBatch(tokens=tokens, pairs=len(prompts))


class SFTEnv(DatasetEnv):
    """``prompt`` / response rows as :class:`~agilerl.llm.text_batches.TokenBatch` es (SFT);
    the response column is ``environment.response_column``."""

    env_type = "sft"
    needed_by = "an SFT environment"

    def __init__(self, split: DatasetSplit, tokenizer: Any, *, batch_size: int,
                 max_context_length: int, seed: int = 0,
                 response_column: str = "response") -> None:
        self.response_column = response_column
        super().__init__(split, tokenizer, batch_size=batch_size,
                         max_context_length=max_context_length, seed=seed)

    @classmethod
    def columns_of(cls, spec: Any) -> list[str]:
        return ["prompt", getattr(spec, "response_column", None) or "response"]

    @classmethod
    def options_of(cls, spec: Any) -> dict[str, Any]:
        return {"response_column": cls.columns_of(spec)[1]}

    def encode(self, rows: dict[str, list[Any]]) -> TokenBatch:
        return encode_prompt_responses(self.tokenizer, list(rows["prompt"]),
                                       list(rows[self.response_column]),
                                       self.max_context_length)


DATASET_ENVS: dict[str, type[DatasetEnv]] = {"preference": PreferenceEnv, "sft": SFTEnv}


def make_dataset_env(spec: Any, tokenizer: Any, *, batch_size: int, max_context_length: int,
                     seed: int = 0,
                     base_dir: str | os.PathLike[str] | None = None) -> DatasetEnv:
    """The preference or SFT environment of an ``LLMEnvSpec`` (by its ``env_type``)."""
    env_type = getattr(spec.env_type, "value", spec.env_type)
    if env_type not in DATASET_ENVS:
        raise ValueError(f"environment.env_type {env_type!r} is not a dataset environment "
                         f"(expected one of {', '.join(DATASET_ENVS)})")
    return DATASET_ENVS[env_type].from_spec(spec, tokenizer, batch_size=batch_size,
                                            max_context_length=max_context_length, seed=seed,
                                            base_dir=base_dir)
