"""The vLLM sampling path (agilerl.llm.vllm_generation): settings taken from the manifest, the
adapter served by a fresh LoRARequest whenever its weights change, the CPU fallback.

vLLM itself cannot run here (no GPU, not installed): the wiring is exercised against a
stand-in ``vllm`` module that records what it is asked and answers fixed token ids. Nothing
here shows that generation with the real vLLM works."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from llm_helpers import algorithm_settings

from agilerl.llm.vllm_generation import adapter_fingerprint, engine_settings, sampling_settings

LORA = {"lora_r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0}
VLLM_CONFIG = {"gpu_memory_utilization": 0.4, "sleep_mode": True, "dtype": "bfloat16",
               "stop_sequences": ["</answer>"], "presence_penalty": 0.1,
               "strip_multimodal_towers": True}


def test_engine_settings_follow_vllm_config() -> None:
    kwargs, unused = engine_settings(VLLM_CONFIG, max_model_len=512, lora_rank=2, seed=3)
    assert kwargs == {"enable_lora": True, "max_lora_rank": 8, "max_loras": 1,
                      "max_model_len": 512, "seed": 3, "enable_sleep_mode": True,
                      "gpu_memory_utilization": 0.4, "dtype": "bfloat16"}
    assert unused == ["strip_multimodal_towers"]
    assert engine_settings(None, max_model_len=64, lora_rank=24, seed=0)[0]["max_lora_rank"] == 32


def test_sampling_settings_are_the_members_sampling() -> None:
    sampled = sampling_settings(group_size=4, greedy=False, temperature=0.7, max_new_tokens=32,
                                min_new_tokens=2, vllm_config=VLLM_CONFIG, seed=5)
    assert sampled == {"n": 4, "temperature": 0.7, "top_p": 1.0, "max_tokens": 32,
                       "min_tokens": 2, "seed": 5, "stop": ["</answer>"],
                       "presence_penalty": 0.1}
    greedy = sampling_settings(group_size=1, greedy=True, temperature=0.7, max_new_tokens=8,
                               min_new_tokens=None, vllm_config=None, seed=0)
    assert greedy["temperature"] == 0.0 and greedy["min_tokens"] == 0


def _agent(tiny_model: Path, **extra: Any) -> Any:
    from agilerl.algorithms import algorithm_class

    settings = algorithm_settings("GRPO", pretrained_model_name_or_path=str(tiny_model),
                                  max_model_len=64, lora_config=LORA, **extra)
    settings.pop("name")
    return algorithm_class("GRPO")(**settings)


def test_without_vllm_generation_falls_back_to_transformers(tiny_model: Path) -> None:
    from agilerl.llm.model import LLMFallbackWarning, generation_notice

    agent = _agent(tiny_model, use_vllm=True, vllm_config=VLLM_CONFIG)
    assert agent._vllm() is None
    with pytest.warns(LLMFallbackWarning, match="vLLM is not installed|needs a CUDA GPU"):
        generation_notice(True, "cpu")
    rollout = agent.generate([[5, 6, 7]], group_size=2, max_new_tokens=3)
    assert rollout.ids.shape[0] == 2


class _FakeVLLM:
    """Stand-in for the ``vllm`` package: records calls, answers fixed completions."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        fake = self

        class LLM:
            def __init__(self, model: str, **kwargs: Any) -> None:
                fake.calls.append(("LLM", {"model": model, **kwargs}))

            def generate(self, prompts: list[dict[str, Any]], params: Any, *,
                         lora_request: Any, use_tqdm: bool) -> list[Any]:
                fake.calls.append(("generate", (prompts, params.kwargs, lora_request)))
                n = params.kwargs["n"]
                return [types.SimpleNamespace(outputs=[
                    types.SimpleNamespace(token_ids=[20 + i, 21, 3][:2 + i % 2])
                    for i in range(n)]) for _ in prompts]

            def sleep(self, level: int) -> None:
                fake.calls.append(("sleep", level))

            def wake_up(self) -> None:
                fake.calls.append(("wake_up", None))

        class SamplingParams:
            def __init__(self, **kwargs: Any) -> None:
                self.kwargs = kwargs

        class LoRARequest:
            def __init__(self, name: str, number: int, path: str) -> None:
                self.name, self.number, self.path = name, number, path

        self.package = types.ModuleType("vllm")
        self.package.LLM = LLM  # type: ignore[attr-defined]
        self.package.SamplingParams = SamplingParams  # type: ignore[attr-defined]
        self.lora = types.ModuleType("vllm.lora")
        self.request = types.ModuleType("vllm.lora.request")
        self.request.LoRARequest = LoRARequest  # type: ignore[attr-defined]

    def of(self, kind: str) -> list[Any]:
        return [value for name, value in self.calls if name == kind]


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> _FakeVLLM:
    import agilerl.llm.vllm_generation as generation

    fake = _FakeVLLM()
    monkeypatch.setitem(sys.modules, "vllm", fake.package)
    monkeypatch.setitem(sys.modules, "vllm.lora", fake.lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", fake.request)
    monkeypatch.setattr(generation, "vllm_unavailable", lambda device: None)
    return fake


def test_members_sample_through_vllm_with_their_current_adapter(tiny_model: Path,
                                                                fake_vllm: _FakeVLLM) -> None:
    from agilerl.algorithms.core.llm_policy import Experience

    agent = _agent(tiny_model, use_vllm=True, vllm_config=VLLM_CONFIG, lr=0.05)
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="strip_multimodal_towers not used"):
        rollout = agent.generate([[5, 6, 7], [8, 9]], group_size=2)
    (engine,) = fake_vllm.of("LLM")
    assert engine["model"] == str(tiny_model) and engine["max_lora_rank"] == 8
    prompts, params, first = fake_vllm.of("generate")[0]
    assert prompts == [{"prompt_token_ids": [5, 6, 7]}, {"prompt_token_ids": [8, 9]}]
    assert params["n"] == 2 and params["stop"] == ["</answer>"]
    assert (Path(first.path) / "adapter_model.safetensors").exists()
    # rows are prompt-major, completions end at vLLM's end-of-sequence token
    assert rollout.completion_mask.sum(dim=1).tolist() == [2, 3, 2, 3]
    assert rollout.ids[1, rollout.prompt_len:].tolist() == [21, 21, 3]
    assert [c for c in fake_vllm.calls if c[0] in ("sleep", "wake_up")][-2:] == [
        ("wake_up", None), ("sleep", 1)]
    agent.generate([[5, 6, 7]], group_size=2)  # same weights: the same request
    assert fake_vllm.of("generate")[1][2] is first
    agent.learn(Experience(rollout, np.array([1.0, 0.0, 0.0, 1.0]), group_size=2))
    agent.generate([[5, 6, 7]], group_size=2)  # an optimizer step later: a new adapter id
    later = fake_vllm.of("generate")[2][2]
    assert later.number != first.number and not Path(first.path).exists()


def test_the_fingerprint_tracks_the_adapter_weights(tiny_model: Path) -> None:
    agent = _agent(tiny_model)
    before = adapter_fingerprint(agent.base.adapter_state(agent.adapter))
    with torch.no_grad():
        agent.base.parameters(agent.adapter)[0].add_(1.0)
    after = adapter_fingerprint(agent.base.adapter_state(agent.adapter))
    assert before != after
    assert adapter_fingerprint(agent.base.adapter_state(agent.adapter)) == after
