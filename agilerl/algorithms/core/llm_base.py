"""The interface every LLM fine-tuning algorithm shares (GRPO, GSPO, CISPO, LLMPPO, ...).

An LLM member is a LoRA adapter (plus its optimizer state and hyperparameters) over a
frozen base model shared by the whole population (:mod:`agilerl.llm.adapters`). A subclass
holds only its maths (``learn``); this base gives the loops and the population seam what
they use of any member:

* construction from hyperparameters validated by the algorithm's generated spec class
  (defaults and bounds live in ``schemas/``), the base model found or loaded by its key;
* generation (sampling with ``temperature``, in batches) and token log-probabilities
  (in row chunks: ``chunk_rows``, or one row at a time with ``reduce_memory_peak``);
* counters (``steps``, ``scores``, ``fitness``, ``mut``) and ``test`` on an LLM env;
* ``get_state``/``set_state``/``from_state``/``clone`` (adapter weights, optimizer state,
  hyperparameters: never the base), ``save_checkpoint`` (also writes the adapter as a peft
  folder that loads onto the base model) and ``load``;
* hyperparameter mutation (``set_hyperparameter``: learning rates reach the optimizer);
* the optimizer step (``optimizer_step``: gradient clipping, ``cosine_lr_schedule_config``
  by :mod:`agilerl.llm.lr_schedule`, counted in ``optimizer_steps``).
  Architecture mutation does not apply to LLM members (``mutable_networks`` is empty).

Importing this module needs torch only; the ``[llm]`` packages are imported when a member
is built.
"""

from __future__ import annotations

import copy
import os
import weakref
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

import torch

from agilerl.algorithms.core.member_state import MemberState, MemberStateFields, cpu_copy
from agilerl.hpo.ranges import plain_hp_config
from agilerl.models._generated.hyperparameter_attributes import (
    LLMAlgorithmHyperparameterAttributes,
)

if TYPE_CHECKING:
    from agilerl.llm.adapters import BaseKey
    from agilerl.llm.lr_schedule import CosineSchedule
    from agilerl.llm.vllm_generation import VLLMGenerator
    from agilerl.models.algo import AlgoSpec, LLMAlgorithmSpec

#: Spec fields that are constructor arguments of their own, not hyperparameters.
_NOT_HYPERPARAMETERS = frozenset({"net_config", "hp_config", "index", "device", "name"})

#: Settings that change speed or memory only, which this implementation cannot apply on
#: every machine: a value other than the default gets a warning and plain maths is used.
_SPEED_ONLY = {
    "use_liger_loss": "the fused Liger loss kernel is not used; the loss is computed "
                      "with plain torch (same maths)",
    "activation_offload": "activations stay on the training device",
    "use_sequence_packing": "sequences are padded, not packed (same maths)",
}


class ModelOutput(Protocol):
    """What the algorithms read of a causal language model's forward pass."""

    @property
    def logits(self) -> torch.Tensor: ...

    @property
    def hidden_states(self) -> tuple[torch.Tensor, ...]:
        """The hidden states of every layer (asked for with ``output_hidden_states``)."""
        ...


class LanguageModel(Protocol):
    """What the algorithms use of the (peft) causal language model a member runs on."""

    training: bool

    def __call__(self, **kwargs: object) -> ModelOutput: ...

    def generate(self, **kwargs: object) -> torch.Tensor: ...

    def eval(self) -> object: ...

    def train(self, mode: bool = True) -> object: ...


class LLMEnv(Protocol):
    """What :meth:`LLMAlgorithm.test` uses of an LLM environment (its ``evaluation_interval``
    is read when it has one)."""

    def evaluate(self, agent: LLMAlgorithm, loop: int = 1) -> float: ...


@dataclass
class Rollout:
    """Sampled completions of a batch of prompts (``group_size`` rows per prompt)."""

    ids: torch.Tensor
    """``(rows, prompt_len + completion_len)`` token ids, prompts left-padded."""
    attention_mask: torch.Tensor
    """1 on real tokens (prompt and completion up to its end-of-sequence token)."""
    prompt_len: int
    """Width of the (padded) prompt part."""
    completion_mask: torch.Tensor
    """``(rows, completion_len)``: 1 on the completion tokens that count."""
    texts: list[str]
    """Decoded completions."""

    @property
    def completion_ids(self) -> torch.Tensor:
        return self.ids[:, self.prompt_len:]

    @property
    def tokens(self) -> int:
        return int(self.completion_mask.sum())


class _LLMStateRequired(MemberStateFields):
    spec: dict[str, object]
    adapter: dict[str, torch.Tensor]
    optimizer: dict[str, object]


class LLMStateFields(_LLMStateRequired, total=False):
    """What :meth:`LLMAlgorithm.get_state` writes (the fields read back by ``set_state``)."""

    extra_modules: dict[str, dict[str, torch.Tensor]]
    evaluated_at: int | None
    optimizer_steps: int


class LLMAlgorithm(LLMAlgorithmHyperparameterAttributes, MemberState):
    """Base class of LLM fine-tuning algorithms (a LoRA adapter over a shared base).

    Subclasses set ``algo`` and ``lr_names`` and implement ``learn``; their
    ``hyperparameter_names`` come from the schema (as for :class:`RLAlgorithm`).
    """

    unsupported_settings: ClassVar[dict[str, str]] = {}
    inert_settings: ClassVar[dict[str, str]] = dict(_SPEED_ONLY)
    #: LLM members evolve hyperparameters only.
    mirrored_networks: ClassVar[dict[str, str]] = {}

    # Hyperparameters the shared code reads that not every LLM algorithm has (SFT has
    # neither, DPO no temperature), so no base spec states them; those every one has come
    # from LLMAlgorithmHyperparameterAttributes.
    beta: float
    temperature: float
    spec: LLMAlgorithmSpec

    def __init__(
        self,
        *,
        index: int = 0,
        hp_config: Mapping[str, object] | None = None,
        device: str | torch.device = "cpu",
        spec: LLMAlgorithmSpec | None = None,
        **hyperparameters: object,
    ) -> None:
        from agilerl.llm import require_llm_extra
        from agilerl.models.algo import LLMAlgorithmSpec

        require_llm_extra(f"{self.algo}")
        self.index = int(index)
        self.device = torch.device(device)
        validated = self.spec_from(spec, hyperparameters)
        assert isinstance(validated, LLMAlgorithmSpec)  # an LLM algorithm's spec class is one
        self.spec = validated
        self.seed = int(self.spec.seed)
        for name in self.hyperparameter_names:
            setattr(self, name, getattr(self.spec, name))
        self.hp_config: dict[str, dict[str, float]] = plain_hp_config(hp_config)
        self._check_hp_config()
        self.steps: list[int] = [0]
        self.scores: list[float] = []
        self.fitness: list[float] = []
        self.mut: str = "None"
        #: ``steps // evaluation_interval`` at the last evaluation (see the LLM envs).
        self.evaluated_at: int | None = None
        self.lr_schedule = self._lr_schedule(self.spec)
        #: Optimizer steps taken (the position in ``cosine_lr_schedule_config``).
        self.optimizer_steps = 0
        self._attach_base()
        self.extra_modules: dict[str, torch.nn.Module] = {}
        self._build_extra()
        self.optimizer = self._make_optimizer()

    # ------------------------------------------------------------------ spec plumbing
    def _lr_param_groups(self, lr_name: str) -> Iterator[dict[str, object]]:
        return (g for g in self.optimizer.param_groups if g.get("lr_name") == lr_name)

    @staticmethod
    def _lr_schedule(spec: AlgoSpec) -> CosineSchedule | None:
        from agilerl.llm.errors import LLMSettingError
        from agilerl.llm.lr_schedule import CosineSchedule

        try:
            return CosineSchedule.from_setting(getattr(spec, "cosine_lr_schedule_config", None))
        except ValueError as exc:
            raise LLMSettingError(str(exc)) from None

    @classmethod
    def settings_not_honoured(cls, spec: AlgoSpec) -> tuple[list[tuple[str, str]],
                                                       list[tuple[str, str]]]:
        refused, ignored = super().settings_not_honoured(spec)
        try:
            cls._lr_schedule(spec)
        except ValueError as exc:
            refused.append(("cosine_lr_schedule_config", str(exc)))
        return refused, ignored

    def optimizer_step(self) -> None:
        """Clip the gradients to ``max_grad_norm`` and step the optimizer, at the learning
        rates of ``cosine_lr_schedule_config`` for this step when it is set."""
        groups = self.optimizer.param_groups
        torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]],
                                       float(self.max_grad_norm))
        if self.lr_schedule is not None:
            for group in groups:
                # a group whose own rate is unset (LLMPPO's lr_critic: null) runs at the first
                base = getattr(self, group["lr_name"], None)
                if base is None:
                    base = getattr(self, self.lr_names[0])
                group["lr"] = self.lr_schedule.lr(float(base), self.optimizer_steps)
        self.optimizer.step()
        self.optimizer_steps += 1

    # ------------------------------------------------------------------ model
    def base_key(self) -> BaseKey:
        """What identifies the base model this member runs on."""
        from agilerl.llm.adapters import BaseKey

        return BaseKey.from_spec(self.spec, str(self.device))

    def _attach_base(self) -> None:
        from agilerl.llm.adapters import shared_base
        from agilerl.llm.model import lora_config

        self.base = shared_base(self.base_key())
        self.tokenizer = self.base.tokenizer
        self.adapter = self.base.add_adapter(lora_config(self.spec.lora_config),
                                             scope=self.spec.lora_target_scope)
        self.lora_config = self.base.lora_configs[self.adapter]
        weakref.finalize(self, self.base.delete_adapter, self.adapter)

    def _build_extra(self) -> None:
        """Create modules beyond the adapter (a value head) in ``extra_modules``."""
        return None

    def _make_optimizer(self) -> torch.optim.Optimizer:
        groups: list[dict[str, object]] = [
            {"params": self.base.parameters(self.adapter), "lr": float(getattr(self, self.lr_names[0])),
             "lr_name": self.lr_names[0]},
        ]
        groups.extend(self._extra_param_groups())
        return torch.optim.AdamW(groups, weight_decay=0.0)

    def _extra_param_groups(self) -> list[dict[str, object]]:
        return []

    @property
    def max_model_len(self) -> int:
        return int(self.spec.max_model_len)

    # ------------------------------------------------------------------ generation
    def encode_prompts(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-pad token-id prompts into ``(ids, attention_mask)`` on the device."""
        width = max(len(p) for p in prompts)
        pad = int(self.tokenizer.pad_token_id)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            if prompt:
                ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
                mask[row, width - len(prompt):] = 1
        return ids.to(self.device), mask.to(self.device)

    @property
    def context_limit(self) -> int:
        """``network.max_context_length``, or the model's own position limit if smaller."""
        own = getattr(self.base.model.config, "max_position_embeddings", None)
        return min(self.max_model_len, int(own)) if own else self.max_model_len

    def max_new_tokens(self, prompt_len: int) -> int:
        limit = self.context_limit - prompt_len
        if limit < 1:
            raise ValueError(f"a prompt of {prompt_len} tokens leaves no room to generate within "
                             f"network.max_context_length ({self.context_limit})")
        wanted = getattr(self.spec, "max_output_tokens", None)  # DPO/SFT specs have none
        return min(int(wanted), limit) if wanted else limit

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], *, group_size: int = 1, greedy: bool = False,
        max_new_tokens: int | None = None,
    ) -> Rollout:
        """Sample ``group_size`` completions of each prompt (``greedy``: argmax decoding).

        Generation runs in batches of ``micro_batch_size_per_gpu`` rows (all rows at once
        when unset).
        """
        rows = [p for p in prompts for _ in range(group_size)]
        engine = self._vllm()
        if engine is not None:  # vLLM samples; log-probabilities stay with this model
            new = max_new_tokens or self.max_new_tokens(max(len(p) for p in rows))
            completions = engine.generate(self, prompts, group_size=group_size, greedy=greedy,
                                          max_new_tokens=new)
            return self.rollout_from_pairs(rows, completions)
        ids, mask = self.encode_prompts(rows)
        prompt_len = ids.shape[1]
        new = max_new_tokens or self.max_new_tokens(prompt_len)
        batch = int(self.spec.micro_batch_size_per_gpu or len(rows))
        pieces = []
        with self.base.use(self.adapter) as model:
            was_training = model.training
            model.eval()
            for start in range(0, len(rows), batch):
                pieces.append(self._generate_rows(model, ids[start:start + batch],
                                                  mask[start:start + batch], new, greedy))
            model.train(was_training)
        width = max(p.shape[1] for p in pieces)
        pad = int(self.tokenizer.pad_token_id)
        out = torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=pad)
                         for p in pieces])
        return self._rollout(out, mask, prompt_len)

    def _vllm(self) -> VLLMGenerator | None:
        """The vLLM engine of this member's base when ``use_vllm`` is set and vLLM can run
        here (:mod:`agilerl.llm.vllm_generation`), else None (transformers generates)."""
        if not getattr(self.spec, "use_vllm", False):
            return None
        from agilerl.llm.vllm_generation import vllm_unavailable

        if vllm_unavailable(str(self.device)) is not None:
            return None
        return self.base.start_vllm(getattr(self.spec, "vllm_config", None),
                                    max_model_len=self.context_limit,
                                    lora_rank=int(self.lora_config.r), seed=self.seed)

    def _generate_rows(self, model: LanguageModel, ids: torch.Tensor, mask: torch.Tensor, new: int,
                       greedy: bool) -> torch.Tensor:
        kwargs: dict[str, object] = {"do_sample": not greedy, "max_new_tokens": new,
                                  "pad_token_id": self.tokenizer.pad_token_id,
                                  "eos_token_id": self.tokenizer.eos_token_id}
        if self.shares_prompts:
            # Rows of one prompt are prefilled once (all but the last prompt token, which
            # generation itself runs), with the positions generation gives them.
            from agilerl.llm.prefix import cache_argument, shared_prefix_cache

            positions = (mask.cumsum(dim=1) - 1).masked_fill(mask == 0, 0)
            cache = shared_prefix_cache(cast(torch.nn.Module, model), ids, mask, ids.shape[1] - 1, positions,
                                        macs_per_token=self.base.macs_per_token)
            if cache is not None:
                kwargs[cache_argument(model)] = cache
        if not greedy:
            temperature = float(getattr(self, "temperature", 1.0))
            kwargs.update(temperature=temperature or 1e-6, top_k=0, top_p=1.0)
        min_tokens = getattr(self.spec, "min_output_tokens", None)
        if min_tokens:
            kwargs["min_new_tokens"] = int(min_tokens)
        return model.generate(input_ids=ids, attention_mask=mask, **kwargs)

    def _rollout(self, out: torch.Tensor, prompt_mask: torch.Tensor, prompt_len: int) -> Rollout:
        completion = out[:, prompt_len:]
        eos = int(self.tokenizer.eos_token_id)
        is_eos = completion == eos
        # Tokens up to and including the first end-of-sequence token count.
        after_eos = (torch.cumsum(is_eos.int(), dim=1) - is_eos.int()) > 0
        completion_mask = (~after_eos).long()
        attention = torch.cat([prompt_mask, completion_mask], dim=1)
        texts = self.tokenizer.batch_decode(
            completion.masked_fill(after_eos, int(self.tokenizer.pad_token_id)),
            skip_special_tokens=True)
        return Rollout(out, attention, prompt_len, completion_mask, texts)

    def rollout_from_pairs(self, prompts: list[list[int]],
                           completions: list[list[int]]) -> Rollout:
        """A :class:`Rollout` of given (prompt, completion) token pairs (multi-turn turns,
        preference or SFT data): prompts left-padded, completions right-padded."""
        ids, prompt_mask = self.encode_prompts(prompts)
        width = max(max((len(c) for c in completions), default=1), 1)
        pad = int(self.tokenizer.pad_token_id)
        completion = torch.full((len(completions), width), pad, dtype=torch.long)
        completion_mask = torch.zeros((len(completions), width), dtype=torch.long)
        for row, tokens in enumerate(completions):
            if tokens:
                completion[row, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
                completion_mask[row, :len(tokens)] = 1
        completion, completion_mask = completion.to(self.device), completion_mask.to(self.device)
        texts = self.tokenizer.batch_decode(
            [c[:int(m.sum())] for c, m in zip(completion, completion_mask, strict=True)],
            skip_special_tokens=True)
        return Rollout(torch.cat([ids, completion], dim=1),
                       torch.cat([prompt_mask, completion_mask], dim=1), ids.shape[1],
                       completion_mask, texts)

    # ------------------------------------------------------------------ log-probabilities
    @property
    def shares_prompts(self) -> bool:
        """Whether rows holding the same prompt run it once (:mod:`agilerl.llm.prefix`).
        Not with gradient checkpointing, which runs without a key/value cache."""
        return not self.base.key.gradient_checkpointing

    def chunk_size(self, rows: int) -> int:
        """Rows per forward pass: 1 with ``reduce_memory_peak``, else ``chunk_rows`` or
        ``micro_batch_size_per_gpu``, else all."""
        if self.spec.reduce_memory_peak:
            return 1
        return int(self.spec.chunk_rows or self.spec.micro_batch_size_per_gpu or rows)

    def forward_logprobs(
        self, model: LanguageModel, ids: torch.Tensor, attention: torch.Tensor, prompt_len: int,
        *, hidden: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-token log-probabilities of the completion part of ``ids`` (and, with
        ``hidden``, the last hidden states at those positions), at the sampling temperature."""
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0) \
            if self.spec.calc_position_embeddings else None
        # Only the positions that predict completion tokens go through the LM head (with a
        # large vocabulary that head is most of a forward pass's memory).
        keep = ids.shape[1] - prompt_len + 1
        split = prompt_len - 1  # the last prompt token predicts the first completion token
        cache = None
        if self.shares_prompts:
            from agilerl.llm.prefix import cache_argument, shared_prefix_cache

            cache = shared_prefix_cache(cast(torch.nn.Module, model), ids, attention, split, positions,
                                        macs_per_token=self.base.macs_per_token)
        if cache is not None:  # rows of one prompt: the prompt ran once, the rest per row
            kwargs: dict[str, object] = {"input_ids": ids[:, split:], "attention_mask": attention,
                                      cache_argument(model): cache, "use_cache": True}
            if positions is not None:
                kwargs["position_ids"] = positions[:, split:]
        else:
            kwargs = {"input_ids": ids, "attention_mask": attention, "use_cache": False}
            if positions is not None:
                kwargs["position_ids"] = positions
        out = model(**kwargs, output_hidden_states=hidden, logits_to_keep=keep)
        logits = out.logits[:, -keep:-1].float()
        temperature = float(getattr(self, "temperature", 1.0) or 1.0)
        logp = torch.log_softmax(logits / temperature, dim=-1)
        targets = ids[:, prompt_len:]
        token_logp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        states = out.hidden_states[-1][:, -keep:-1] if hidden else None
        return token_logp, states

    @torch.no_grad()
    def logprobs(self, rollout: Rollout, *, reference: bool = False) -> torch.Tensor:
        """Completion token log-probabilities under this member (or the reference policy:
        the base model without adapters), without gradients, in row chunks."""
        ctx = self.base.reference() if reference else self.base.use(self.adapter)
        size = self.chunk_size(rollout.ids.shape[0])
        with ctx as model:
            parts = [self.forward_logprobs(model, rollout.ids[s:s + size],
                                           rollout.attention_mask[s:s + size],
                                           rollout.prompt_len)[0]
                     for s in range(0, rollout.ids.shape[0], size)]
        return torch.cat(parts)

    # ------------------------------------------------------------------ maths hooks
    @abstractmethod
    def learn(self, experience: Any) -> dict[str, float]:
        """One update from a batch of experience; returns scalar metrics."""

    # ------------------------------------------------------------------ evaluation
    def test(self, env: LLMEnv, max_steps: int | None = None, loop: int = 1,
             seed: int | None = None) -> float:
        """Evaluate on ``env`` (``env.evaluate(agent, loop)``: greedy completions of its
        held-out prompts or episodes); the result is appended to ``fitness``.

        Evaluations happen every ``env.evaluation_interval`` of this member's steps: asked
        again before the next one is due, the member's last fitness stands."""
        due = self.steps[-1] // max(int(getattr(env, "evaluation_interval", 1)), 1)
        if self.fitness and self.evaluated_at == due:
            fitness = float(self.fitness[-1])
        else:
            fitness = float(env.evaluate(self, loop=loop))
            self.evaluated_at = due
        self.fitness.append(fitness)
        return fitness

    # ------------------------------------------------------------------ mutation support
    def mutable_networks(self) -> list[str]:
        """None: LLM members evolve hyperparameters only (architecture mutation is off)."""
        return []

    # ------------------------------------------------------------------ state
    def _spec_state(self) -> dict[str, object]:
        spec = self.spec.model_dump(mode="python")
        spec["lora_config"] = {k: v for k, v in self.lora_config.to_dict().items()
                               if k != "peft_type"}
        return spec

    def get_state(self) -> dict[str, object]:
        """Everything needed to rebuild this member exactly (never the base weights)."""
        return {
            **self.member_state(),
            "spec": self._spec_state(),
            "adapter": self.base.adapter_state(self.adapter),
            "extra_modules": {n: cpu_copy(m.state_dict()) for n, m in self.extra_modules.items()},
            "optimizer": cpu_copy(self.optimizer.state_dict()),
            "evaluated_at": self.evaluated_at,
            "optimizer_steps": self.optimizer_steps,
        }

    def set_state(self, state: Mapping[str, object]) -> None:
        self.load_member_state(state)
        state = cast(LLMStateFields, state)  # a get_state dict (or its torch.load)
        self.base.load_adapter_state(self.adapter, state["adapter"])
        for name, module_state in state.get("extra_modules", {}).items():
            self.extra_modules[name].load_state_dict(module_state)
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # mutated learning rates
            if group.get("lr_name") in self.hyperparameters:
                group["lr"] = float(getattr(self, group["lr_name"]))
        self.evaluated_at = state.get("evaluated_at")
        self.optimizer_steps = int(state.get("optimizer_steps", 0))

    @classmethod
    def from_state(cls, state: Mapping[str, object],
                   device: str | torch.device | None = None) -> LLMAlgorithm:
        """A member rebuilt from ``get_state`` output on the shared base it names."""
        from agilerl.algorithms.core.registry import algorithm_class

        state = cast(LLMStateFields, state)  # a get_state dict (or its torch.load)
        target = cls if getattr(cls, "algo", None) == state["algo"] \
            else algorithm_class(state["algo"])
        assert issubclass(target, LLMAlgorithm)  # an LLM member's state names an LLM algorithm
        # (the spec's values, by name: the constructor validates them)
        hyper: dict[str, Any] = {k: v for k, v in state["spec"].items()
                                 if k not in _NOT_HYPERPARAMETERS}
        agent = target(index=state["index"], hp_config=state["hp_config"],
                       device=device if device is not None else "cpu", **hyper)
        agent.set_state(state)
        return agent

    def save_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Write ``get_state()`` to ``path`` atomically, and the adapter as a peft folder
        beside it (``<stem>_adapter/``: loads onto the base model with
        ``PeftModel.from_pretrained``)."""
        from agilerl.checkpoint.folder import save_torch_atomically

        path = Path(path)
        save_torch_atomically(self.get_state(), path)
        self.save_adapter(path.parent / f"{path.stem}_adapter")

    def save_adapter(self, folder: str | os.PathLike[str]) -> Path:
        """Write this member's adapter as a peft adapter folder (config + safetensors)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        config = copy.deepcopy(self.lora_config)
        config.base_model_name_or_path = str(self.spec.pretrained_model_name_or_path)
        config.save_pretrained(str(folder))
        weights = {k: v.contiguous() for k, v in self.base.adapter_state(self.adapter).items()}
        save_file(weights, str(folder / "adapter_model.safetensors"))
        return folder

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(index={self.index}, adapter={self.adapter!r}, "
                f"steps={self.steps[-1]}, mut={self.mut!r})")
