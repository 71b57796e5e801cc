"""The maths of the LLM RL algorithms on hand-checkable inputs, and the settings that change
how it is computed (row chunks) or are refused / replaced with a notice."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from llm_helpers import algorithm_settings

from agilerl.algorithms.core.llm_policy import Experience, group_advantages

LORA = {"lora_r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0}


def _agent(tiny_model: Path, name: str = "GRPO", **extra: Any) -> Any:
    from agilerl.algorithms import algorithm_class

    settings = algorithm_settings(name, pretrained_model_name_or_path=str(tiny_model),
                                  max_model_len=64, lora_config=LORA, **extra)
    settings.pop("name")
    return algorithm_class(name)(**settings)


def _experience(rewards: list[float], **kwargs: Any) -> Experience:
    return Experience(rollout=None, rewards=np.array(rewards), **kwargs)  # type: ignore[arg-type]


def test_group_advantages_standardise_centre_or_keep_rewards() -> None:
    exp = _experience([1.0, 0.0, 2.0, 2.0], group_size=2)
    std = math.sqrt(0.5)
    assert group_advantages(exp, "mean_std").tolist() == pytest.approx(
        [0.5 / (std + 1e-4), -0.5 / (std + 1e-4), 0.0, 0.0])
    assert group_advantages(exp, "mean_only").tolist() == pytest.approx([0.5, -0.5, 0, 0])
    assert group_advantages(exp, "none").tolist() == [1.0, 0.0, 2.0, 2.0]


def test_group_statistics_count_episodes_not_turns() -> None:
    # Group 0: an episode of two turns (return 1.0) and one of one turn (return 0.0).
    exp = _experience([1.0, 0.5, 0.0], groups=np.array([0, 0, 0]),
                      episode_start=np.array([True, False, True]),
                      returns=np.array([1.0, 1.0, 0.0]))
    assert group_advantages(exp, "mean_only").tolist() == pytest.approx([0.5, 0.0, -0.5])


def test_token_gae_by_hand() -> None:
    from agilerl.algorithms.llmppo import token_gae

    values = torch.tensor([[0.5, 0.2, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # two tokens count
    adv, returns = token_gae(torch.tensor([1.0]), values, mask, gamma=0.9, lam=0.5)
    last = 1.0 - 0.2  # reward at the second token, no value after it
    first = (0.9 * 0.2 - 0.5) + 0.9 * 0.5 * last
    assert adv[0, :2].tolist() == pytest.approx([first, last])
    assert adv[0, 2] == 0
    assert returns[0, :2].tolist() == pytest.approx([first + 0.5, last + 0.2])


def test_cispo_clip_bounds(tiny_model: Path) -> None:
    assert _agent(tiny_model, "CISPO", clip_coef=[0.8, 2.0]).clip_bounds() == (0.8, 2.0)
    assert _agent(tiny_model, "CISPO", clip_coef=0.25).clip_bounds() == (0.75, 1.25)
    with pytest.raises(ValueError, match="clip_coef"):
        _agent(tiny_model, "CISPO", clip_coef=[1.5, 2.0]).clip_bounds()


def test_cispo_keeps_a_gradient_where_grpo_clips(tiny_model: Path) -> None:
    grpo, cispo = _agent(tiny_model), _agent(tiny_model, "CISPO")
    logp = torch.tensor([[-1.0]], requires_grad=True)
    old = torch.tensor([[-2.0]])  # ratio e > 1 + clip
    adv, mask = torch.tensor([[1.0]]), torch.ones(1, 1)
    grpo.policy_loss(logp, old, adv, mask).sum().backward()
    assert logp.grad is not None and logp.grad.item() == 0.0
    logp.grad = None
    cispo.policy_loss(logp, old, adv, mask).sum().backward()
    assert logp.grad.item() == pytest.approx(-1.2)  # -clip(e, 0.8, 1.2) * A


def test_gspo_ratio_is_one_length_normalised_value_per_completion(tiny_model: Path) -> None:
    gspo = _agent(tiny_model, "GSPO")
    logp = torch.tensor([[-1.0, -2.0, -5.0]])
    old = torch.tensor([[-1.5, -1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    ratio = gspo.ratio(logp, old, mask)
    assert ratio[0, :2].tolist() == pytest.approx([math.exp(-0.25)] * 2)
    assert _agent(tiny_model).ratio(logp, old, mask)[0, 0].item() == pytest.approx(math.exp(0.5))


def _one_update(agent: Any, prompts: list[list[int]]) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    rollout = agent.generate(prompts, group_size=2)
    agent.learn(Experience(rollout, np.array([1.0, 0.0, 0.0, 1.0]), group_size=2))
    return agent.base.adapter_state(agent.adapter)


def test_reduce_memory_peak_gives_the_update_of_the_whole_batch(tiny_model: Path) -> None:
    whole = _agent(tiny_model, beta=0.01)
    chunked = _agent(tiny_model, beta=0.01, reduce_memory_peak=True)
    chunked.set_state({**whole.get_state(), "index": 1})
    assert chunked.chunk_size(8) == 1
    prompts = [[5, 6, 7], [8, 9]]
    a, b = _one_update(whole, prompts), _one_update(chunked, prompts)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_unsupported_and_speed_only_settings_are_named(tiny_model: Path) -> None:
    from agilerl.algorithms import algorithm_class
    from agilerl.core.errors import UnsupportedAlgorithmError
    from agilerl.models import ALGO_REGISTRY
    from agilerl.training.paradigms import check_settings

    spec = ALGO_REGISTRY["GRPO"].model_validate(
        {"group_size": 2, "use_separate_reference_adapter": True})
    with pytest.raises(UnsupportedAlgorithmError, match="use_separate_reference_adapter"):
        check_settings(algorithm_class("GRPO"), spec)
    spec = ALGO_REGISTRY["GRPO"].model_validate({"group_size": 2, "use_liger_loss": True})
    with pytest.warns(UserWarning, match="use_liger_loss"):
        check_settings(algorithm_class("GRPO"), spec)


def test_cpu_fallbacks_are_one_line_notices(tiny_model: Path) -> None:
    from agilerl.llm.model import LLMFallbackWarning, generation_notice, load_causal_lm

    with pytest.warns(LLMFallbackWarning, match="quantization = 'nf4' needs a CUDA GPU"):
        model = load_causal_lm(str(tiny_model), quantization="nf4",
                               attn_implementation="sdpa")
    assert next(model.parameters()).dtype == torch.float32
    with pytest.warns(LLMFallbackWarning, match="attn_implementation = 'flex_attention'"):
        load_causal_lm(str(tiny_model), attn_implementation="flex_attention")
    with pytest.warns(LLMFallbackWarning, match="use_vllm = true") as record:
        generation_notice(True, "cpu")
    assert "\n" not in str(record[0].message)
    with pytest.raises(ValueError, match="quantization = 'int3'"):
        load_causal_lm(str(tiny_model), quantization="int3")


def test_completion_logprobs_match_a_full_forward_pass(tiny_model: Path) -> None:
    agent = _agent(tiny_model, temperature=0.5)
    rollout = agent.rollout_from_pairs([[5, 6, 7], [6, 7]], [[9, 10, 11], [9]])
    with agent.base.use(agent.adapter) as model:
        logits = model(input_ids=rollout.ids, attention_mask=rollout.attention_mask,
                       position_ids=(rollout.attention_mask.cumsum(1) - 1).clamp(min=0)).logits
    logp = torch.log_softmax(logits[:, 2:-1] / 0.5, dim=-1)
    expected = logp.gather(-1, rollout.ids[:, 3:].unsqueeze(-1)).squeeze(-1)
    mask = rollout.completion_mask.bool()
    assert torch.allclose(agent.logprobs(rollout)[mask], expected[mask], atol=1e-5)
