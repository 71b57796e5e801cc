"""LLM fine-tuning paradigms: the environment, the adapter population, the member trainer.

A member is a LoRA adapter over the base model every member shares
(:mod:`agilerl.llm.adapters`); the generation loop, evaluation, selection, mutation and
checkpoints are the RL ones (:mod:`agilerl.training.loop`). One step of a member is one
batch of ``batch_size`` prompts: sample ``group_size`` completions of each, score them with
the environment's reward, learn. ``evo_steps`` steps make a generation; ``num_epochs``, when
set, replaces ``max_steps`` by that many passes over the training prompts.

Mutation changes hyperparameters only (``rl_hp_selection``): architecture, parameter and
activation mutations do not apply to adapters over a frozen base, and their probabilities
are moved to ``no_mut`` with a warning.

The builders return what they build (:class:`LLMRunParts`, the members, a mutation
section); :class:`~agilerl.training.trainer.LocalTrainer` keeps it.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from agilerl.checkpoint.rng import derive_seed
from agilerl.core.algorithm_spec import algo_name
from agilerl.core.member_training import (
    Agent,
    MemberTrainer,
    RunContext,
    TrainReport,
)
from agilerl.training.hp_bounds import hp_config

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerBase

    from agilerl.algorithms.core.llm_policy import PolicyGradientLLM
    from agilerl.llm.dataset_envs import DatasetEnv, PreferenceBatch
    from agilerl.llm.multiturn import MultiTurnEnv
    from agilerl.llm.reasoning import ReasoningEnv
    from agilerl.llm.text_batches import TokenBatch
    from agilerl.models.algo import LLMAlgorithmSpec
    from agilerl.models.env import LLMEnvSpec
    from agilerl.models.hpo import MutationSpec
    from agilerl.models.training import TrainingSpec
    from agilerl.training.trainer import LocalTrainer

_SEED_AGENT = 0xA6E7

#: Mutation kinds that change networks, which LLM members do not evolve.
_NETWORK_MUTATIONS = ("arch_mut", "params_mut", "act_mut")


@dataclass(frozen=True)
class LLMRunParts:
    """What an LLM loop's env builder makes: the env, and what the trainer keeps of it."""

    env: ReasoningEnv | MultiTurnEnv | DatasetEnv[TokenBatch | PreferenceBatch]
    tokenizer: PreTrainedTokenizerBase
    """The base model's tokenizer (the trainer's ``tokenizer``)."""
    max_steps: int | None = None
    """``training.max_steps`` as ``training.num_epochs`` sets it (that many passes over the
    env's training data); None: no ``num_epochs``, ``max_steps`` stands."""


def llm_spec(trainer: LocalTrainer) -> LLMAlgorithmSpec:
    """The trainer's algorithm spec, an LLM one (the LLM loops train LLM algorithms only)."""
    from agilerl.models.algo import LLMAlgorithmSpec

    spec = trainer.algorithm_spec
    assert isinstance(spec, LLMAlgorithmSpec)
    return spec


def _spec_device(trainer: LocalTrainer) -> str:
    return str(trainer.device)


def make_llm_env(trainer: LocalTrainer) -> LLMRunParts:
    """The LLM environment of the trainer's env spec, on the tokenizer of the base model."""
    from agilerl.llm import require_llm_extra
    from agilerl.llm.adapters import BaseKey, shared_base

    require_llm_extra()
    import datasets

    datasets.disable_progress_bars()
    spec = cast("LLMEnvSpec", trainer.env_spec)  # an LLM algorithm's environment
    algo = llm_spec(trainer)
    base = shared_base(BaseKey.from_spec(algo, _spec_device(trainer)))
    training = trainer.training_spec
    # The data split and order follow algorithm.seed (as the reference's trainer sets the
    # env's seed), not the run seed: a resumed run, whose run seed comes from the checkpoint
    # only after the env exists, reads the same prompts.
    seed = int(algo.seed)
    env_type = getattr(spec.env_type, "value", spec.env_type)
    if env_type == "reasoning":
        from agilerl.llm.reasoning import ReasoningEnv

        env: ReasoningEnv | MultiTurnEnv = ReasoningEnv(spec, base.tokenizer, seed=seed,
                                max_context_length=int(algo.max_model_len),
                                evaluation_interval=int(training.evaluation_interval or 1))
    elif env_type == "multiturn":
        from agilerl.llm.multiturn import MultiTurnEnv

        env = MultiTurnEnv(spec, base.tokenizer, seed=seed,
                           max_context_length=int(algo.max_model_len),
                           evaluation_interval=int(training.evaluation_interval or 1))
    else:
        from agilerl.core.errors import UnsupportedAlgorithmError

        raise UnsupportedAlgorithmError(
            f"environment.env_type = {env_type!r} cannot train "
            f"{getattr(algo, 'name', '?')} (it trains on reasoning or multiturn environments)")
    return LLMRunParts(env, base.tokenizer, epochs_max_steps(training, algo, env))


def epochs_max_steps(training: TrainingSpec, algo: LLMAlgorithmSpec,
                     env: object) -> int | None:
    """``training.max_steps`` for ``training.num_epochs`` passes over ``env``'s training
    data (None: no ``num_epochs``, or an env that has no epochs)."""
    epochs = getattr(training, "num_epochs", None)
    if epochs and hasattr(env, "batches_per_epoch"):
        return int(epochs) * int(env.batches_per_epoch(int(algo.batch_size)))
    return None


def network_mutations_off(mutation: MutationSpec | None) -> MutationSpec | None:
    """``mutation`` with its architecture/parameter/activation mutation probabilities moved
    to ``no_mut``, with a warning naming them (LLM members evolve hyperparameters only)."""
    if mutation is None:
        return None
    probs = mutation.probabilities
    asked = {name: float(getattr(probs, name)) for name in _NETWORK_MUTATIONS
             if float(getattr(probs, name) or 0) > 0}
    if not asked:
        return mutation
    warnings.warn(
        "mutation.probabilities " + ", ".join(f"{k} = {v}" for k, v in asked.items())
        + ": LLM members are LoRA adapters over a frozen base model and evolve "
        "hyperparameters only (rl_hp_mut); these draws leave the member unchanged",
        UserWarning, stacklevel=5)  # LocalTrainer's caller
    update = {name: 0.0 for name in asked}
    update["no_mut"] = float(probs.no_mut) + sum(asked.values())
    return mutation.model_copy(update={"probabilities": probs.model_copy(update=update)})


def make_llm_population(trainer: LocalTrainer) -> list[Agent]:
    """``pop_size`` adapters over one shared base, each initialised from its own seed."""
    import torch

    from agilerl.algorithms import algorithm_class
    from agilerl.algorithms.core.llm_base import LLMAlgorithm
    from agilerl.llm.model import generation_notice

    spec = llm_spec(trainer)
    generation_notice(bool(getattr(spec, "use_vllm", False)), str(trainer.device))
    cls = algorithm_class(algo_name(spec))
    assert issubclass(cls, LLMAlgorithm)  # the LLM paradigm's specs name LLM algorithms
    population: list[Agent] = []
    for i in range(int(trainer.training_spec.pop_size)):
        seed = derive_seed(trainer.seed, _SEED_AGENT, i)
        torch.manual_seed(seed)  # the adapter's initial weights
        population.append(cls(index=i, hp_config=hp_config(spec, trainer.mutation_spec),
                              device=trainer.device, spec=spec))
    return population


class ReasoningMemberTrainer:
    """``train(agent, steps, seed)``: ``steps`` batches of prompts, sampled and learned from."""

    def __init__(self, env: ReasoningEnv) -> None:
        self.env = env

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        from agilerl.algorithms.core.llm_policy import Experience

        member = cast("PolicyGradientLLM", agent)  # the members of a reasoning run

        rewards_seen: list[float] = []
        sums: dict[str, float] = {}
        tokens = 0
        generate_s = 0.0
        for _ in range(int(steps)):
            batch = self.env.train_batch(member.steps[-1], int(member.batch_size))
            group = int(getattr(member, "group_size", 1) or 1)
            start = time.perf_counter()
            rollout = member.generate(batch.ids, group_size=group)
            generate_s += time.perf_counter() - start
            rows = [row for row in batch.rows for _ in range(group)]
            rewards = self.env.rewards(rollout.texts, rows)
            metrics = member.learn(Experience(rollout, rewards, group))
            metrics["accuracy"] = self.env.accuracy(rewards)
            metrics["completion_length"] = rollout.tokens / max(len(rollout.texts), 1)
            for name, value in metrics.items():
                sums[name] = sums.get(name, 0.0) + float(value)
            tokens += rollout.tokens
            rewards_seen.extend(rewards.tolist())
            member.steps[-1] += 1
            member.scores.append(float(np.mean(rewards)))
        report = {name: value / max(int(steps), 1) for name, value in sums.items()}
        report["tokens_per_second"] = tokens / generate_s if generate_s > 0 else math.nan
        report["reward"] = float(np.mean(rewards_seen)) if rewards_seen else math.nan
        return TrainReport(steps=int(steps), score=report["reward"], metrics=report)


def reasoning_member_trainer(context: RunContext) -> MemberTrainer:
    """The member trainer of the ``llm_reasoning`` loop (reasoning or multi-turn env)."""
    from agilerl.llm.multiturn import MultiTurnEnv
    from agilerl.llm.reasoning import ReasoningEnv

    if isinstance(context.env, MultiTurnEnv):
        from agilerl.training.llm_multiturn import MultiTurnMemberTrainer

        return MultiTurnMemberTrainer(context.env, context.deadline)
    assert isinstance(context.env, ReasoningEnv)  # what make_llm_env builds otherwise
    return ReasoningMemberTrainer(context.env)
