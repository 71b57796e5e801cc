"""Sampling with vLLM (``use_vllm: true``, on a CUDA GPU where the ``vllm`` package is
installed); everywhere else generation stays with transformers after a one-line notice.

One vLLM engine per shared base model serves the whole population: it loads the base once
more, in vLLM's own GPU memory (``vllm_config.gpu_memory_utilization`` of the GPU), with LoRA
enabled. A member is served by its adapter: the adapter's weights are written as a peft
folder and named in a ``LoRARequest`` whose id changes whenever the weights change (an
optimizer step, selection copying another member's adapter), so vLLM never samples from
stale weights. Sampling follows the member: its ``temperature`` (0 for greedy), no top-k or
top-p, ``max_output_tokens``/``min_output_tokens``, ``group_size`` samples per prompt, a seed
drawn from torch's generator (so a seeded run draws the same seeds), and
``vllm_config.stop_sequences``, ``presence_penalty`` and ``frequency_penalty``. With
``vllm_config.sleep_mode`` the engine frees its GPU memory between generations.

vLLM only samples: every log-probability the update uses is computed by the training model,
so the maths of the algorithms is unchanged.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

if TYPE_CHECKING:
    from vllm.lora.request import LoRARequest

    from agilerl.llm.members import AdapterMember

__all__ = ["VLLMGenerator", "adapter_fingerprint", "engine_settings", "sampling_settings",
           "vllm_unavailable"]

#: ``vllm_config`` keys that are ``vllm.LLM`` engine arguments of the same name.
ENGINE_KEYS = ("tensor_parallel_size", "gpu_memory_utilization", "max_num_seqs",
               "enforce_eager", "dtype", "quantization", "kv_cache_memory_bytes")
#: ``vllm_config`` keys that set sampling (``SamplingParams``), with vLLM's names.
SAMPLING_KEYS = {"stop_sequences": "stop", "presence_penalty": "presence_penalty",
                 "frequency_penalty": "frequency_penalty"}
#: LoRA ranks vLLM's kernels are built for; the engine takes the smallest one that fits.
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def vllm_unavailable(device: str) -> str | None:
    """Why vLLM cannot generate here (None: it can)."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed"
    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return f"vLLM needs a CUDA GPU and this run is on {device!r}"
    return None


def engine_settings(vllm_config: Mapping[str, object] | None, *, max_model_len: int,
                    lora_rank: int, seed: int) -> tuple[dict[str, object], list[str]]:
    """``vllm.LLM`` keyword arguments for a base model (beyond ``model``), and the
    ``vllm_config`` keys this version does not pass to vLLM."""
    config = dict(vllm_config or {})
    rank = next((r for r in VLLM_LORA_RANKS if r >= int(lora_rank)), int(lora_rank))
    kwargs: dict[str, object] = {"enable_lora": True, "max_lora_rank": rank, "max_loras": 1,
                              "max_model_len": int(max_model_len), "seed": int(seed),
                              "enable_sleep_mode": bool(config.get("sleep_mode", False))}
    kwargs.update({k: config[k] for k in ENGINE_KEYS if config.get(k) is not None})
    unused = sorted(set(config) - set(ENGINE_KEYS) - set(SAMPLING_KEYS) - {"sleep_mode"})
    return kwargs, unused


def sampling_settings(*, group_size: int, greedy: bool, temperature: float,
                      max_new_tokens: int, min_new_tokens: int | None,
                      vllm_config: Mapping[str, object] | None, seed: int) -> dict[str, object]:
    """``vllm.SamplingParams`` keyword arguments of one generation (the member's sampling,
    as the transformers path samples: the plain distribution at ``temperature``)."""
    settings: dict[str, object] = {
        "n": int(group_size), "temperature": 0.0 if greedy else float(temperature or 1e-6),
        "top_p": 1.0, "max_tokens": int(max_new_tokens), "min_tokens": int(min_new_tokens or 0),
        "seed": int(seed),
    }
    config = dict(vllm_config or {})
    for ours, theirs in SAMPLING_KEYS.items():
        if config.get(ours) is not None:
            value = config[ours]  # free-form: ``list`` refuses a non-sequence, as vLLM would
            settings[theirs] = list(cast("Iterable[str]", value)) if ours == "stop_sequences" \
                else value
    return settings


def adapter_fingerprint(state: Mapping[str, torch.Tensor]) -> str:
    """A digest of an adapter's weights (equal weights, equal digest)."""
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(name.encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class VLLMGenerator:
    """A vLLM engine over one base model, sampling with members' adapters (module docstring)."""

    def __init__(self, source: str, vllm_config: Mapping[str, object] | None, *,
                 max_model_len: int, lora_rank: int, seed: int) -> None:
        from vllm import LLM

        kwargs, unused = engine_settings(vllm_config, max_model_len=max_model_len,
                                         lora_rank=lora_rank, seed=seed)
        if unused:
            warnings.warn(f"algorithm.vllm_config: {', '.join(unused)} not used by this "
                          "version's vLLM engine", UserWarning, stacklevel=3)
        self.config = dict(vllm_config or {})
        self.sleeps = bool(kwargs["enable_sleep_mode"])
        self.llm = LLM(model=str(source), **kwargs)
        self.folder = Path(tempfile.mkdtemp(prefix="agilerl-vllm-"))
        self._ids = itertools.count(1)
        self._served: dict[str, tuple[str, LoRARequest, Path]] = {}
        if self.sleeps:
            self.llm.sleep(level=1)

    def _lora_request(self, agent: AdapterMember) -> LoRARequest:
        from vllm.lora.request import LoRARequest

        fingerprint = adapter_fingerprint(agent.base.adapter_state(agent.adapter))
        served = self._served.get(agent.adapter)
        if served is not None and served[0] == fingerprint:
            return served[1]
        number = next(self._ids)
        folder = agent.save_adapter(self.folder / f"{agent.adapter}-{number}")
        request = LoRARequest(f"{agent.adapter}-{number}", number, str(folder))
        if served is not None:
            shutil.rmtree(served[2], ignore_errors=True)
        self._served[agent.adapter] = (fingerprint, request, folder)
        return request

    def generate(self, agent: AdapterMember, prompts: list[list[int]], *, group_size: int, greedy: bool,
                 max_new_tokens: int) -> list[list[int]]:
        """Completion token ids of ``group_size`` samples of each prompt under ``agent``'s
        adapter, prompt-major (the rows of :meth:`LLMAlgorithm.generate`)."""
        from vllm import SamplingParams

        seed = int(torch.randint(0, 2**31 - 1, ()).item())
        params = SamplingParams(**sampling_settings(
            group_size=group_size, greedy=greedy, temperature=float(agent.temperature),
            max_new_tokens=max_new_tokens,
            min_new_tokens=getattr(agent.spec, "min_output_tokens", None),
            vllm_config=self.config, seed=seed))
        request = self._lora_request(agent)
        if self.sleeps:
            self.llm.wake_up()
        try:
            outputs = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompts],
                                        params, lora_request=request, use_tqdm=False)
        finally:
            if self.sleeps:
                self.llm.sleep(level=1)
        return [list(sample.token_ids) for output in outputs for sample in output.outputs]

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
