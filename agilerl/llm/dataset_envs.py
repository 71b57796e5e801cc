"""Dataset environments of the offline LLM algorithms: ``preference`` (DPO) and ``sft``.

Each holds the training and held-out rows of ``environment.dataset``
(:func:`agilerl.llm.datasets.load_llm_dataset`) and serves them as token batches:

* :meth:`DatasetEnv.train_batch` -- a member's training batch at its step ``i``: a pure
  function of ``i``. Pass ``e`` over the training rows (steps ``e * batches_per_epoch``
  onwards) visits them in a permutation seeded by ``(seed, e)``, so a member resumed at
  step ``i`` reads exactly the rows it would have read, and members at the same step read
  the same rows;
* :meth:`DatasetEnv.eval_batches` -- the first :data:`EVAL_ROWS` held-out rows in order;
* :meth:`DatasetEnv.evaluate` -- a member's fitness on them (its ``evaluate_dataset``),
  recomputed every ``evaluation_interval`` of the member's steps.

A preference row is ``prompt``, ``chosen`` and ``rejected`` text; a batch stacks the chosen
rows, then the rejected rows, into one :class:`~agilerl.llm.text_batches.TokenBatch`, so a
single forward pass scores both. An SFT row is ``prompt`` and the ``response_column`` text.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import numpy as np

from agilerl.llm.datasets import DatasetSplit, load_llm_dataset
from agilerl.llm.text_batches import TokenBatch, encode_prompt_responses

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from agilerl.llm.members import DatasetLearner
    from agilerl.models import LLMEnvSpec

__all__ = ["EVAL_ROWS", "DatasetEnv", "PreferenceBatch", "PreferenceEnv", "SFTEnv",
           "make_dataset_env"]

EVAL_ROWS = 256
"""Held-out rows an evaluation scores at most (the same rows for every member): enough for
a stable loss or accuracy, bounded so evaluating a population stays cheap."""

#: The batch an environment serves (:class:`PreferenceBatch` or ``TokenBatch``).
BatchT = TypeVar("BatchT", covariant=True)
#: A dataset environment class, for constructors that return their own class.
EnvT = TypeVar("EnvT", bound="DatasetEnv[object]")
#: A column-major slice of text rows: column name -> its values.
TextRows = Mapping[str, Sequence[str]]


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


class DatasetEnv(Generic[BatchT]):
    """Training and held-out rows of one dataset, served as token batches."""

    env_type: ClassVar[str]
    needed_by: ClassVar[str]

    def __init__(self, split: DatasetSplit, tokenizer: PreTrainedTokenizerBase, *,
                 max_context_length: int, seed: int = 0, evaluation_interval: int = 1) -> None:
        self.train, self.test, self.source = split.train, split.test, split.source
        self.name = split.source
        self.tokenizer = tokenizer
        self.max_context_length = int(max_context_length)
        self.seed = int(seed)
        self.evaluation_interval = max(int(evaluation_interval), 1)
        self._orders: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------------ subclass hooks
    def encode(self, rows: TextRows) -> BatchT:
        """Token batch of a column-major slice of rows."""
        raise NotImplementedError

    # ------------------------------------------------------------------ batches
    def reset(self, seed: int | None = None) -> None:
        """Nothing to reset: batches depend only on the step (kept for the loops' API)."""
        return None

    def close(self) -> None:
        return None

    def batches_per_epoch(self, batch_size: int) -> int:
        """Training batches in one pass over the training rows (the last may be short)."""
        return -(-len(self.train) // int(batch_size))

    def epoch_of(self, step: int, batch_size: int) -> int:
        """The pass over the training rows that the batch of step ``step`` belongs to."""
        return int(step) // self.batches_per_epoch(batch_size)

    def _order(self, epoch: int) -> np.ndarray:
        order = self._orders.get(epoch)
        if order is None:
            order = np.random.default_rng([self.seed, epoch]).permutation(len(self.train))
            self._orders = {epoch: order}  # members walk the passes in order: keep one
        return order

    def train_batch(self, step: int, batch_size: int) -> BatchT:
        """The training batch of a member's step ``step`` (0-based; module docstring)."""
        if step < 0 or batch_size < 1:
            raise ValueError(f"step must be >= 0 and batch_size >= 1, got {step}, {batch_size}")
        epoch, position = divmod(int(step), self.batches_per_epoch(batch_size))
        start = position * int(batch_size)
        rows = self._order(epoch)[start:start + int(batch_size)]
        return self.encode(self.train[[int(i) for i in rows]])

    def eval_batches(self, batch_size: int) -> Iterator[BatchT]:
        """The first :data:`EVAL_ROWS` held-out rows in order, ``batch_size`` at a time."""
        rows = min(len(self.test), EVAL_ROWS)
        for start in range(0, rows, int(batch_size)):
            yield self.encode(self.test[start:min(start + int(batch_size), rows)])

    def evaluate(self, agent: DatasetLearner, loop: int = 1) -> float:
        """``agent``'s fitness on the held-out rows (``agent.evaluate_dataset(self)``),
        recomputed when the member reaches a new ``evaluation_interval`` of steps; between
        those its last fitness stands. Deterministic, so ``loop`` passes would agree."""
        due = agent.steps[-1] // self.evaluation_interval
        if agent.fitness and getattr(agent, "evaluated_at", None) == due:
            return float(agent.fitness[-1])
        fitness = float(agent.evaluate_dataset(self))
        agent.evaluated_at = due
        return fitness

    @classmethod
    def from_spec(cls: type[EnvT], spec: LLMEnvSpec, tokenizer: PreTrainedTokenizerBase, *,
                  max_context_length: int, seed: int = 0, evaluation_interval: int = 1,
                  base_dir: str | os.PathLike[str] | None = None) -> EnvT:
        """Load ``spec.dataset`` (an ``LLMEnvSpec``), check its columns and split it."""
        split = load_llm_dataset(spec, cls.columns_of(spec), cls.needed_by, base_dir=base_dir,
                                 seed=seed)
        return cls(split, tokenizer, max_context_length=max_context_length, seed=seed,
                   evaluation_interval=evaluation_interval, **cls.options_of(spec))

    @classmethod
    def columns_of(cls, spec: object) -> list[str]:
        """The dataset columns this environment reads (after ``environment.columns``)."""
        raise NotImplementedError

    @classmethod
    def options_of(cls, spec: object) -> dict[str, str]:
        """Constructor keywords taken from the spec beyond the common ones."""
        return {}


class PreferenceEnv(DatasetEnv[PreferenceBatch]):
    """``prompt`` / ``chosen`` / ``rejected`` rows as :class:`PreferenceBatch` es (DPO)."""

    env_type = "preference"
    needed_by = "a preference environment (DPO)"

    @classmethod
    def columns_of(cls, spec: object) -> list[str]:
        return ["prompt", "chosen", "rejected"]

    def encode(self, rows: TextRows) -> PreferenceBatch:
        prompts = list(rows["prompt"])
        tokens = encode_prompt_responses(self.tokenizer, prompts + prompts,
                                         list(rows["chosen"]) + list(rows["rejected"]),
                                         self.max_context_length)
        return PreferenceBatch(tokens=tokens, pairs=len(prompts))


class SFTEnv(DatasetEnv[TokenBatch]):
    """``prompt`` / response rows as :class:`~agilerl.llm.text_batches.TokenBatch` es (SFT);
    the response column is ``environment.response_column``."""

    env_type = "sft"
    needed_by = "an SFT environment"

    def __init__(self, split: DatasetSplit, tokenizer: PreTrainedTokenizerBase, *,
                 max_context_length: int, seed: int = 0, evaluation_interval: int = 1,
                 response_column: str = "response") -> None:
        self.response_column = response_column
        super().__init__(split, tokenizer, max_context_length=max_context_length, seed=seed,
                         evaluation_interval=evaluation_interval)

    @classmethod
    def columns_of(cls, spec: object) -> list[str]:
        return ["prompt", getattr(spec, "response_column", None) or "response"]

    @classmethod
    def options_of(cls, spec: object) -> dict[str, str]:
        return {"response_column": cls.columns_of(spec)[1]}

    def encode(self, rows: TextRows) -> TokenBatch:
        return encode_prompt_responses(self.tokenizer, list(rows["prompt"]),
                                       list(rows[self.response_column]),
                                       self.max_context_length)


DATASET_ENVS: dict[str, type[PreferenceEnv] | type[SFTEnv]] = {"preference": PreferenceEnv, "sft": SFTEnv}


def make_dataset_env(spec: LLMEnvSpec, tokenizer: PreTrainedTokenizerBase, *,
                     max_context_length: int, seed: int = 0, evaluation_interval: int = 1,
                     base_dir: str | os.PathLike[str] | None = None
                     ) -> PreferenceEnv | SFTEnv:
    """The preference or SFT environment of an ``LLMEnvSpec`` (by its ``env_type``)."""
    env_type = getattr(spec.env_type, "value", spec.env_type)
    if env_type not in DATASET_ENVS:
        raise ValueError(f"environment.env_type {env_type!r} is not a dataset environment "
                         f"(expected one of {', '.join(DATASET_ENVS)})")
    return DATASET_ENVS[env_type].from_spec(spec, tokenizer,
                                            max_context_length=max_context_length, seed=seed,
                                            evaluation_interval=evaluation_interval,
                                            base_dir=base_dir)
