"""One frozen base model per process, one LoRA adapter per population member.

:class:`SharedBase` wraps the base model in a peft model once and holds every member's
adapter under its own name: a population of N adds N small adapters, never N copies of
the base. The base is found again by its key (:func:`shared_base`), so members rebuilt
from a state (selection, resume, ``clone``) join the base already loaded. Running a member
activates its adapter (:meth:`SharedBase.use`); the reference policy is the base with the
adapters switched off (:meth:`SharedBase.reference`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from agilerl.llm.model import load_causal_lm, load_tokenizer, resolve_lora_targets

if TYPE_CHECKING:
    from peft import LoraConfig, PeftModel

    from agilerl.llm.vllm_generation import VLLMGenerator
    from agilerl.models import LLMAlgorithmSpec


@dataclass(frozen=True)
class BaseKey:
    """What identifies a loaded base model: two members with equal keys share it."""

    source: str
    device: str
    dtype: str | None = None
    quantization: str | None = None
    attn_implementation: str | None = None
    gradient_checkpointing: bool = False

    @classmethod
    def from_spec(cls, spec: LLMAlgorithmSpec, device: str) -> BaseKey:
        """The key of an LLM algorithm spec's base model on ``device``."""
        if not spec.pretrained_model_name_or_path:
            raise ValueError("network.pretrained_model_name_or_path is required")
        quant = spec.quantization
        return cls(
            source=str(spec.pretrained_model_name_or_path), device=str(device),
            quantization=quant if isinstance(quant, str | type(None))
            else json.dumps(dict(quant), sort_keys=True),
            attn_implementation=spec.attn_implementation,
            gradient_checkpointing=bool(spec.gradient_checkpointing),
        )


# peft asks transformers' deprecated ``is_gradient_checkpointing`` on every forward pass.
warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)

_BASES: dict[BaseKey, SharedBase] = {}
_LOCK = threading.Lock()


def shared_base(key: BaseKey) -> SharedBase:
    """The base model of ``key``, loaded on first use and shared afterwards."""
    with _LOCK:
        base = _BASES.get(key)
        if base is None:
            base = SharedBase(key)
            _BASES[key] = base
        return base


def forget_bases() -> None:
    """Drop every cached base (tests, or to free memory once no member uses them)."""
    with _LOCK:
        _BASES.clear()


class SharedBase:
    """A frozen causal LM with named LoRA adapters (one per member) on top."""

    def __init__(self, key: BaseKey) -> None:
        self.key = key
        quantization: str | Mapping[str, object] | None = key.quantization
        if key.quantization is not None and key.quantization.startswith("{"):
            quantization = json.loads(key.quantization)  # bitsandbytes keyword arguments
        self.tokenizer = load_tokenizer(key.source)
        self.model = load_causal_lm(
            key.source, device=key.device, dtype=key.dtype, quantization=quantization,
            attn_implementation=key.attn_implementation,
        )
        if key.gradient_checkpointing:
            enable = getattr(self.model, "activation_checkpointing_enable", None)
            if enable is not None:
                enable()
            else:
                self.model.gradient_checkpointing_enable(
                    gradient_checkpointing_kwargs={"use_reentrant": False})
        self.peft: PeftModel | None = None
        self._names = itertools.count()
        self.lora_configs: dict[str, LoraConfig] = {}
        #: The vLLM engine sampling for this base's members (``use_vllm``), once started.
        self.vllm: VLLMGenerator | None = None
        self._vllm_failed = False

    def start_vllm(self, vllm_config: Mapping[str, object] | None, *, max_model_len: int,
                   lora_rank: int, seed: int) -> VLLMGenerator | None:
        """The vLLM engine over this base (:mod:`agilerl.llm.vllm_generation`), started on
        first use; None, after a one-line notice, when vLLM cannot start for this model
        (members then generate with transformers)."""
        if self.vllm is None and not self._vllm_failed:
            from agilerl.llm.model import notice
            from agilerl.llm.vllm_generation import VLLMGenerator

            try:
                self.vllm = VLLMGenerator(self.key.source, vllm_config,
                                          max_model_len=max_model_len, lora_rank=lora_rank,
                                          seed=seed)
            except Exception as exc:  # vLLM's own errors (memory, architecture, kernels)
                self._vllm_failed = True
                notice(f"algorithm.use_vllm = true: vLLM could not start for "
                       f"{self.key.source!r} ({type(exc).__name__}: {exc}); generating "
                       "with transformers")
        return self.vllm

    @property
    def device(self) -> torch.device:
        return torch.device(self.key.device)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @functools.cached_property
    def macs_per_token(self) -> float:
        """Multiply-adds of one token through the model (its parameters outside the
        embeddings): what running a token once instead of again saves."""
        return float(self.model.num_parameters(exclude_embeddings=True))

    # ------------------------------------------------------------------ adapters
    def add_adapter(self, config: LoraConfig, prefix: str = "member", scope: str | None = None) -> str:
        """Add a freshly initialised adapter with LoRA ``config`` (its targets resolved to
        this model's modules under ``scope``: :func:`resolve_lora_targets`); return its name.
        ``lora_configs[name]`` is the resolved config."""
        from peft import get_peft_model

        config = resolve_lora_targets(self.model, config, scope)
        name = f"{prefix}{next(self._names)}"
        if self.peft is None:
            self.peft = get_peft_model(self.model, config, adapter_name=name)
        else:
            self.peft.add_adapter(name, config)
        self.lora_configs[name] = config
        for param in self.parameters(name):
            param.requires_grad_(True)
        return name

    def delete_adapter(self, name: str) -> None:
        """Remove adapter ``name`` (its parameters are freed)."""
        if self.peft is None or name not in self.lora_configs:
            return
        del self.lora_configs[name]
        if not self.lora_configs:
            return  # peft keeps at least one adapter; the slot is reused by the next add
        with warnings.catch_warnings():  # "adapter was active ... setting another active"
            warnings.simplefilter("ignore", UserWarning)
            self.peft.delete_adapter(name)

    def parameters(self, name: str) -> list[torch.nn.Parameter]:
        """The parameters of adapter ``name``, in a fixed order."""
        marker = f".{name}."
        assert self.peft is not None  # adapters were added
        return [p for n, p in self.peft.named_parameters() if marker in n]

    def adapter_state(self, name: str) -> dict[str, torch.Tensor]:
        """Adapter ``name``'s weights (CPU copies) keyed without the adapter name."""
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(self.peft, adapter_name=name)
        return {k: v.detach().to("cpu", copy=True) for k, v in state.items()}

    def load_adapter_state(self, name: str, state: Mapping[str, torch.Tensor]) -> None:
        """Copy ``state`` (from :meth:`adapter_state`) into adapter ``name``."""
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(self.peft, dict(state), adapter_name=name)
        unexpected = getattr(result, "unexpected_keys", None)
        if unexpected:
            raise ValueError(f"adapter state does not fit this model: unexpected keys "
                             f"{sorted(unexpected)[:3]}")

    @contextlib.contextmanager
    def use(self, name: str) -> Iterator[PeftModel]:
        """The peft model with adapter ``name`` active (other adapters are frozen)."""
        assert self.peft is not None  # adapters were added
        if self.peft.active_adapter != name:
            self.peft.set_adapter(name)
        for param in self.parameters(name):
            param.requires_grad_(True)
        yield self.peft

    @contextlib.contextmanager
    def reference(self) -> Iterator[PeftModel]:
        """The base model alone (adapters switched off): the reference policy."""
        assert self.peft is not None  # adapters were added
        with self.peft.disable_adapter():
            yield self.peft
