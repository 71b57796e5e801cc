"""The ``llm_preference`` (DPO) and ``llm_sft`` (SFT) paradigms: dataset environments and
their member trainer.

The population is the LLM one (adapters over one shared base,
:func:`agilerl.training.llm.make_llm_population`); the generation loop, evaluation,
selection, mutation and checkpoints are the RL ones. One step of a member is one update on
the training batch of its step (:meth:`agilerl.llm.dataset_envs.DatasetEnv.train_batch`);
``evo_steps`` steps make a generation; ``num_epochs``, when set, replaces ``max_steps`` by
that many passes over the training rows.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, cast

from agilerl.checkpoint.rng import derive_seed
from agilerl.core.algorithm_spec import algo_name
from agilerl.core.member_training import Agent, RunContext, TrainReport
from agilerl.training.llm import LLMRunParts, epochs_max_steps, llm_spec

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from agilerl.algorithms.core.llm_dataset import DatasetLLMAlgorithm
    from agilerl.llm.dataset_envs import DatasetEnv, PreferenceBatch
    from agilerl.llm.text_batches import TokenBatch
    from agilerl.models.env import LLMEnvSpec
    from agilerl.training.trainer import LocalTrainer

_SEED_ENV = 0xE7


def make_dataset_llm_env(trainer: LocalTrainer) -> LLMRunParts:
    """The preference or SFT environment of the trainer's env spec, on the base model's
    tokenizer (the base is loaded here once and shared by every member)."""
    from agilerl.core.errors import UnsupportedAlgorithmError
    from agilerl.llm import require_llm_extra
    from agilerl.llm.adapters import BaseKey, shared_base
    from agilerl.llm.dataset_envs import DATASET_ENVS, make_dataset_env

    require_llm_extra()
    spec = cast("LLMEnvSpec", trainer.env_spec)  # an LLM algorithm's environment
    algo = llm_spec(trainer)
    env_type = getattr(spec.env_type, "value", spec.env_type)
    if env_type not in DATASET_ENVS:
        raise UnsupportedAlgorithmError(
            f"environment.env_type = {env_type!r}: {algo_name(algo)} trains on "
            f"{' or '.join(DATASET_ENVS)} datasets only ({algo_name(algo)} does not support "
            f"{'multi-turn' if env_type == 'multiturn' else env_type} environments)")
    base = shared_base(BaseKey.from_spec(algo, str(trainer.device)))
    env = make_dataset_env(
        spec, base.tokenizer, max_context_length=int(algo.max_model_len),
        seed=derive_seed(trainer.seed, _SEED_ENV),
        evaluation_interval=int(trainer.training_spec.evaluation_interval or 1))
    return LLMRunParts(env, base.tokenizer,
                       epochs_max_steps(trainer.training_spec, algo, env))


class DatasetMemberTrainer:
    """``train(agent, steps, seed)``: ``steps`` updates, each on the batch of the member's
    step. Reports the mean of the update metrics, ``score`` = minus the mean loss, and
    ``tokens_per_second`` (tokens of the batches learned from per second of learning)."""

    def __init__(self, env: DatasetEnv[TokenBatch | PreferenceBatch]) -> None:
        self.env = env

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        # the members of an SFT or DPO run
        member = cast("DatasetLLMAlgorithm[TokenBatch | PreferenceBatch]", agent)
        sums: dict[str, float] = {}
        tokens, seconds = 0, 0.0
        batch_size = int(member.batch_size)
        for _ in range(int(steps)):
            step = int(member.steps[-1])
            sync = getattr(member, "sync_reference", None)
            if sync is not None:
                sync(self.env.epoch_of(step, batch_size))
            batch = self.env.train_batch(step, batch_size)
            start = time.perf_counter()
            metrics = member.learn(batch)
            seconds += time.perf_counter() - start
            tokens += int(_attention(batch).sum())
            for name, value in metrics.items():
                sums[name] = sums.get(name, 0.0) + float(value)
            member.steps[-1] += 1
            member.scores.append(-float(metrics.get("loss", math.nan)))
        report = {name: value / max(int(steps), 1) for name, value in sums.items()}
        report["tokens_per_second"] = tokens / seconds if seconds > 0 else math.nan
        return TrainReport(steps=int(steps), score=-report.get("loss", math.nan),
                           metrics=report)


def _attention(batch: TokenBatch | PreferenceBatch) -> torch.Tensor:
    from agilerl.llm.dataset_envs import PreferenceBatch

    tokens = batch.tokens if isinstance(batch, PreferenceBatch) else batch  # its TokenBatch
    return tokens.attention_mask


def dataset_member_trainer(context: RunContext) -> DatasetMemberTrainer:
    """The member trainer of the ``llm_preference`` and ``llm_sft`` loops."""
    from agilerl.llm.dataset_envs import DatasetEnv

    assert isinstance(context.env, DatasetEnv)  # what make_dataset_llm_env builds
    return DatasetMemberTrainer(context.env)
