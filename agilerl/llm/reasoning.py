"""The ``reasoning`` environment: dataset prompts, completions scored by the user's reward.

Each dataset row (after ``environment.columns`` renames) has a ``question`` and an
``answer``; ``prompt_template`` turns it into chat messages (keys ``<role>_<order>``;
``{question}`` and ``{answer}`` are substituted, every other brace is literal), rendered by
the tokenizer's chat template. A final ``assistant`` message is continued by the model
rather than closed. The reward function (``reward_file_path`` / ``reward_fn_name``) scores
each completion; ``max_reward`` makes a completion reaching it count as correct (accuracy).

Batches are a pure function of the member's step count: epoch ``e`` visits the training
rows in a permutation seeded by ``(seed, e)``, so a resumed member sees the prompts it would
have seen, and every member of a generation gets the same prompts.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from agilerl.llm.members import Generator
    from agilerl.models import LLMEnvSpec

#: Columns a reasoning dataset needs (after ``environment.columns`` renames).
REQUIRED_COLUMNS = ("question", "answer")


@dataclass
class PromptBatch:
    """Prompts of one training or evaluation step."""

    ids: list[list[int]]
    """Token ids of each rendered prompt."""
    rows: list[dict[str, object]]
    """The dataset rows they came from."""


def template_messages(template: Mapping[str, object], row: Mapping[str, object]
                      ) -> list[dict[str, str]]:
    """Chat messages of ``row`` through ``prompt_template`` (``system_0``, ``user_1``...)."""
    keyed = []
    for key, text in template.items():
        role, _, order = str(key).rpartition("_")
        if not role or not order.isdigit():
            raise ValueError(f"environment.prompt_template: key {key!r} is not <role>_<order> "
                             "(e.g. system_0, user_1, assistant_2)")
        content = str(text).replace("{question}", str(row.get("question", ""))) \
            .replace("{answer}", str(row.get("answer", "")))
        keyed.append((int(order), role, content))
    return [{"role": role, "content": content} for _, role, content in sorted(keyed)]


def render_prompt(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` through the tokenizer's chat template (a final assistant
    message is left open for the model to continue)."""
    continue_final = bool(messages) and messages[-1]["role"] == "assistant"
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=not continue_final,
            continue_final_message=continue_final)
    else:  # a base model without a chat template: the contents, one per line
        text = "\n".join(m["content"] for m in messages)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class ReasoningEnv:
    """Prompts from a dataset, rewards from the user's function (see module docstring)."""

    def __init__(
        self,
        spec: LLMEnvSpec,
        tokenizer: PreTrainedTokenizerBase,
        *,
        seed: int = 0,
        max_context_length: int | None = None,
        evaluation_interval: int = 1,
        base_dir: str | None = None,
    ) -> None:
        from agilerl.llm.datasets import load_llm_dataset
        from agilerl.llm.reward import load_reward_function, reward_caller

        self.spec = spec
        self.tokenizer = tokenizer
        self.seed = int(seed)
        self.max_reward = spec.max_reward
        self.evaluation_interval = max(int(evaluation_interval), 1)
        self.name = str(spec.dataset)
        split = load_llm_dataset(spec, REQUIRED_COLUMNS, "reasoning environments",
                                 base_dir=base_dir, seed=self.seed)
        self.train_rows = [dict(r) for r in split.train]
        self.test_rows = [dict(r) for r in split.test]
        if not spec.prompt_template:
            raise ValueError("environment.prompt_template is required for reasoning "
                             "environments")
        self.template = dict(spec.prompt_template)
        # required of a reasoning environment by the manifest rules
        assert spec.reward_file_path is not None
        self.reward = reward_caller(load_reward_function(spec.reward_file_path,
                                                         str(spec.reward_fn_name)))
        self.max_context_length = max_context_length
        self._cache: dict[tuple[str, int], list[int]] = {}
        self._truncated = False
        self.check_prompts()

    # ------------------------------------------------------------------ prompts
    def reset(self, seed: int | None = None) -> None:
        """Nothing to reset: batches depend only on the step (kept for the loops' API)."""
        return None

    def close(self) -> None:
        return None

    def batches_per_epoch(self, batch_size: int) -> int:
        return max(math.ceil(len(self.train_rows) / int(batch_size)), 1)

    def _prompt(self, split: str, index: int, row: Mapping[str, object]) -> list[int]:
        key = (split, index)
        ids = self._cache.get(key)
        if ids is None:
            ids = render_prompt(self.tokenizer, template_messages(self.template, row))
            limit = self.max_context_length
            if limit is not None and len(ids) >= limit:
                if not self._truncated:
                    warnings.warn(
                        f"a prompt of dataset {self.name!r} ({split} row {index}) is {len(ids)} "
                        f"tokens, over network.max_context_length ({limit}); such prompts "
                        "keep their last tokens", UserWarning, stacklevel=2)
                    self._truncated = True
                ids = ids[len(ids) - limit + 1:]
            self._cache[key] = ids
        return ids

    def check_prompts(self, rows: int = 64) -> None:
        """Refuse a dataset whose first prompts leave no room to answer (a template or a
        ``max_context_length`` mistake, named here rather than deep inside training)."""
        limit = self.max_context_length
        if limit is None:
            return
        for split, table in (("train", self.train_rows), ("test", self.test_rows)):
            for index, row in enumerate(table[:rows]):
                length = len(render_prompt(self.tokenizer, template_messages(self.template, row)))
                if length >= limit:
                    raise ValueError(
                        f"a prompt of dataset {self.name!r} ({split} row {index}) is {length} "
                        f"tokens, which leaves no room to answer within "
                        f"network.max_context_length ({limit})")

    def train_batch(self, step: int, batch_size: int) -> PromptBatch:
        """The ``batch_size`` training prompts of a member's step ``step`` (0-based)."""
        rows, size = len(self.train_rows), int(batch_size)
        per_epoch = self.batches_per_epoch(size)
        epoch, position = divmod(int(step), per_epoch)
        order = np.random.default_rng([self.seed, epoch]).permutation(rows)
        chosen = [int(order[(position * size + k) % rows]) for k in range(size)]
        return PromptBatch([self._prompt("train", i, self.train_rows[i]) for i in chosen],
                           [self.train_rows[i] for i in chosen])

    def test_batch(self, batch_size: int) -> PromptBatch:
        """The first ``batch_size`` held-out prompts (the same for every member)."""
        chosen = range(min(int(batch_size), len(self.test_rows)))
        return PromptBatch([self._prompt("test", i, self.test_rows[i]) for i in chosen],
                           [self.test_rows[i] for i in chosen])

    # ------------------------------------------------------------------ rewards
    def rewards(self, texts: Sequence[str], rows: Sequence[Mapping[str, object]]) -> np.ndarray:
        """Reward of each completion (``rows[i]`` is the prompt row of ``texts[i]``)."""
        return np.array([self.reward(text, row.get("answer"), row.get("question"))
                         for text, row in zip(texts, rows, strict=True)], dtype=np.float64)

    def accuracy(self, rewards: np.ndarray) -> float:
        """Share of completions reaching ``max_reward`` (NaN when it is not set)."""
        if self.max_reward is None or rewards.size == 0:
            return math.nan
        return float(np.mean(rewards >= float(self.max_reward) - 1e-9))

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, agent: Generator, loop: int = 1) -> float:
        """Mean reward of greedy completions of the held-out prompts (one batch of the
        member's ``batch_size``; ``loop`` passes)."""
        batch = self.test_batch(int(getattr(agent, "batch_size", 8)))
        scores = []
        for _ in range(max(int(loop), 1)):
            rollout = agent.generate(batch.ids, greedy=True)
            scores.append(float(np.mean(self.rewards(rollout.texts, batch.rows))))
        return float(np.mean(scores))
