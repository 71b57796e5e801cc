"""Loading a pretrained causal LM and its tokenizer, and LoRA configs, without surprises.

``pretrained_model_name_or_path`` is a local folder or a Hugging Face hub id. A folder is
read as is. A hub id is looked up in the local Hugging Face cache first; it is downloaded
only when it is not cached and the hub answers within seconds (never when
``HF_HUB_OFFLINE`` is set), so a machine without network never hangs: it gets
:class:`~agilerl.llm.errors.ModelUnavailableError`, saying how to point at a local folder.

Settings this machine cannot honour fall back with a one-line notice
(:class:`LLMFallbackWarning`): quantisation on CPU (or without bitsandbytes) loads full
precision; an attention implementation the device lacks uses the model's default.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, overload

from agilerl.llm.datasets import hub_reachable
from agilerl.llm.errors import LLMSettingError, ModelUnavailableError

if TYPE_CHECKING:
    import torch
    from peft import LoraConfig
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        BitsAndBytesConfig,
        PreTrainedModel,
        PreTrainedTokenizerBase,
    )

#: Quantisation presets the ``quantization`` field accepts (or bitsandbytes kwargs).
QUANTIZATION_PRESETS = ("none", "int8", "nf4", "fp4")


class LLMFallbackWarning(UserWarning):
    """A setting this machine cannot honour was replaced by a working default."""


def notice(message: str) -> None:
    """A one-line fallback notice."""
    warnings.warn(message, LLMFallbackWarning, stacklevel=3)


def _looks_like_path(source: str) -> bool:
    return source.startswith((".", "/", "~")) or os.sep in source.strip("/").replace("/", "", 1) \
        or source.count("/") > 1


@overload
def _load(loader: type[AutoTokenizer], source: str, what: str,
          **kwargs: object) -> PreTrainedTokenizerBase: ...


@overload
def _load(loader: type[AutoModelForCausalLM], source: str, what: str,
          **kwargs: object) -> PreTrainedModel: ...


def _load(loader: type[AutoTokenizer] | type[AutoModelForCausalLM], source: str, what: str,
          **kwargs: object) -> PreTrainedTokenizerBase | PreTrainedModel:
    """``loader.from_pretrained(source)`` for a folder, a cached hub id, or a reachable hub."""
    path = Path(source).expanduser()
    if path.is_dir():
        return loader.from_pretrained(str(path), local_files_only=True, **kwargs)
    if _looks_like_path(source):
        raise ModelUnavailableError(
            f"{what} {source!r}: no such folder; network.pretrained_model_name_or_path must "
            "be a folder holding a saved model (config.json, weights, tokenizer) or a "
            "Hugging Face hub id such as 'Qwen/Qwen2.5-0.5B-Instruct'"
        )
    try:
        return loader.from_pretrained(source, local_files_only=True, **kwargs)
    except OSError:
        pass
    if not hub_reachable():
        raise ModelUnavailableError(
            f"{what} {source!r} is not in the local Hugging Face cache and the hub "
            "(huggingface.co) cannot be reached from this machine, so nothing could be "
            "downloaded. Download it where the hub is reachable (e.g. `hf download "
            f"{source} --local-dir ./model`) and set network.pretrained_model_name_or_path "
            "to that folder"
        )
    try:
        return loader.from_pretrained(source, **kwargs)
    except OSError as exc:
        raise ModelUnavailableError(f"{what} {source!r} could not be loaded: {exc}") from None


def load_tokenizer(source: str) -> PreTrainedTokenizerBase:
    """The tokenizer of ``source``; padding on the left (generation), a pad token set."""
    from transformers import AutoTokenizer

    tokenizer = _load(AutoTokenizer, source, "tokenizer")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def resolve_dtype(device: str, dtype: str | torch.dtype | None = None) -> torch.dtype:
    """The weights' dtype: as given, else float32 on CPU and bfloat16 on a GPU that has it."""
    import torch

    if dtype is not None:
        return getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if str(device).startswith("cuda") and torch.cuda.is_available() \
            and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def quantization_config(quantization: str | Mapping[str, object] | None, device: str
                        ) -> BitsAndBytesConfig | None:
    """A ``BitsAndBytesConfig`` for ``quantization`` (preset or kwargs), or None: on CPU and
    without bitsandbytes the model loads in full precision, with a notice."""
    if quantization is None or quantization == "none":
        return None
    if isinstance(quantization, str) and quantization not in QUANTIZATION_PRESETS:
        raise LLMSettingError(f"algorithm.quantization = {quantization!r}: use one of "
                         f"{', '.join(QUANTIZATION_PRESETS)} or a mapping of bitsandbytes "
                         "arguments")
    if not str(device).startswith("cuda"):
        notice(f"algorithm.quantization = {quantization!r} needs a CUDA GPU; loading the "
               "model in full precision on this device")
        return None
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        notice(f"algorithm.quantization = {quantization!r} needs bitsandbytes (pip install "
               "bitsandbytes); loading the model in full precision")
        return None
    import torch
    from transformers import BitsAndBytesConfig

    if isinstance(quantization, Mapping):
        return BitsAndBytesConfig(**dict(quantization))
    if quantization == "int8":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=quantization,
                              bnb_4bit_compute_dtype=torch.bfloat16)


def generation_notice(use_vllm: bool, device: str) -> None:
    """The one-line notice of ``use_vllm: true`` where vLLM cannot generate (not installed,
    or no CUDA GPU): generation runs with transformers."""
    if not use_vllm:
        return
    from agilerl.llm.vllm_generation import vllm_unavailable

    why = vllm_unavailable(device)
    if why is not None:
        notice(f"algorithm.use_vllm = true: {why}; generating with transformers")


def _attention(attn_implementation: str | None, device: str) -> str | None:
    if attn_implementation in (None, "auto"):
        return None
    if attn_implementation in ("eager", "sdpa"):
        return attn_implementation
    if not str(device).startswith("cuda"):
        notice(f"algorithm.attn_implementation = {attn_implementation!r} is for GPUs; using "
               "the model's default attention on this device")
        return None
    return attn_implementation


def load_causal_lm(
    source: str,
    *,
    device: str = "cpu",
    dtype: str | torch.dtype | None = None,
    quantization: str | Mapping[str, object] | None = None,
    attn_implementation: str | None = None,
) -> PreTrainedModel:
    """The pretrained causal LM of ``source`` on ``device``, frozen, in eval mode."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    kwargs: dict[str, object] = {"dtype": resolve_dtype(device, dtype)}
    quant = quantization_config(quantization, device)
    if quant is not None:
        kwargs["quantization_config"] = quant
        kwargs["device_map"] = {"": device}
    attention = _attention(attn_implementation, device)
    if attention is not None:
        kwargs["attn_implementation"] = attention
    model = _load(AutoModelForCausalLM, source, "model", **kwargs)
    if quant is None:
        module: torch.nn.Module = model  # (transformers types ``PreTrainedModel.to`` unbound)
        module.to(device)
    model.eval()
    for param in model.parameters():
        param.requires_grad_(False)
    return model


def lora_config(value: object) -> LoraConfig:
    """A peft ``LoraConfig`` from a manifest mapping (``lora_r`` or ``r``, ``lora_alpha``,
    ``target_modules``, ``lora_dropout``, ``task_type``) or a ``LoraConfig`` object (copied).
    Its targets are matched to a model by :func:`resolve_lora_targets`."""
    from peft import LoraConfig

    if value is None:
        raise LLMSettingError("network.lora_config is required to fine-tune with LoRA adapters")
    if isinstance(value, LoraConfig):
        return LoraConfig(**{k: v for k, v in value.to_dict().items()
                             if k in LoraConfig.__dataclass_fields__ and k != "peft_type"})
    if not isinstance(value, Mapping):
        raise LLMSettingError(f"network.lora_config must be a mapping or a peft LoraConfig, "
                              f"not {type(value).__name__}")
    data = {k: v for k, v in dict(value).items() if v is not None}
    if "lora_r" in data:
        data["r"] = data.pop("lora_r")
    data.setdefault("task_type", "CAUSAL_LM")
    unknown = sorted(set(data) - set(LoraConfig.__dataclass_fields__))
    if unknown:
        raise LLMSettingError(f"network.lora_config: unknown LoRA setting(s) "
                              f"{', '.join(map(repr, unknown))}")
    return LoraConfig(**data)


def resolve_lora_targets(model: torch.nn.Module, config: LoraConfig, scope: str | None = None
                         ) -> LoraConfig:
    """``config`` with its ``target_modules`` resolved to the module paths of ``model``.

    ``scope`` (``lora_target_scope``, e.g. ``language_model``) keeps the modules under that
    sub-model; a model without one (a text-only model is all language model) keeps them all,
    with a notice. A target ``x.linear`` (the linear layer inside a wrapped projection, as in
    multimodal Gemma checkpoints) falls back to ``x`` itself where ``x`` is the linear layer,
    with a notice. A target matching no module is a :class:`LLMSettingError`. A regular
    expression (a string target) is left to peft.
    """
    import copy

    targets = config.target_modules
    if targets is None or isinstance(targets, str):
        return config
    names = [name for name, _ in model.named_modules() if name]
    if scope:
        scoped = [n for n in names if f".{scope}." in f".{n}."]
        if scoped:
            names = scoped
        else:
            notice(f"algorithm.lora_target_scope = {scope!r}: the model has no {scope!r} "
                   "sub-model; LoRA targets are looked up in the whole model")
    resolved: list[str] = []
    for target in sorted(targets):
        found = _module_paths(names, str(target))
        if not found and str(target).endswith(".linear"):
            found = _module_paths(names, str(target)[: -len(".linear")])
            if found:
                notice(f"network.lora_config.target_modules {target!r}: the model's "
                       f"projections are not wrapped; targeting {str(target)[:-7]!r}")
        if not found:
            raise LLMSettingError(
                f"network.lora_config.target_modules: {target!r} matches no module of the "
                f"model (its linear layers: {', '.join(_linear_leaves(model))})")
        resolved.extend(found)
    config = copy.deepcopy(config)
    config.target_modules = sorted(set(resolved))
    return config


def _module_paths(names: list[str], target: str) -> list[str]:
    return [n for n in names if n == target or n.endswith("." + target)]


def _linear_leaves(model: torch.nn.Module) -> list[str]:
    import torch

    return sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                   if isinstance(module, torch.nn.Linear)})
