"""Rows holding the same prompt run it once (agilerl.llm.prefix): the same log-probabilities,
gradients and samples as running every row whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from llm_helpers import algorithm_settings

LORA = {"lora_r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0}


@pytest.fixture(autouse=True)
def _always_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test model is too small for sharing to pay (MIN_SAVED_MACS): share anyway."""
    monkeypatch.setattr("agilerl.llm.prefix.MIN_SAVED_MACS", 0.0)


def _agent(tiny_model: Path, name: str = "GRPO", **extra: Any) -> Any:
    from agilerl.algorithms import algorithm_class

    settings = algorithm_settings(name, pretrained_model_name_or_path=str(tiny_model),
                                  max_model_len=64, lora_config=LORA, **extra)
    settings.pop("name")
    agent = algorithm_class(name)(**settings)
    torch.manual_seed(1)
    for param in agent.base.parameters(agent.adapter):  # an adapter that changes the model
        param.data.normal_(0.0, 0.3)
    return agent


def _record_inputs(model: Any) -> tuple[list[tuple[int, ...]], Any]:
    seen: list[tuple[int, ...]] = []
    hook = model.get_input_embeddings().register_forward_hook(
        lambda _m, inputs, _o: seen.append(tuple(inputs[0].shape)))
    return seen, hook


def _logprobs_and_grads(agent: Any, model: Any, rollout: Any, rows: list[list[int]]
                        ) -> tuple[torch.Tensor, torch.Tensor | None, list[torch.Tensor]]:
    params = agent.base.parameters(agent.adapter)
    for param in params:
        param.grad = None
    parts, states = [], []
    for part in rows:
        logp, hidden = agent.forward_logprobs(
            model, rollout.ids[part], rollout.attention_mask[part], rollout.prompt_len,
            hidden=True)
        mask = rollout.completion_mask[part].float()
        ((logp * mask).sum() + (hidden * mask.unsqueeze(-1)).sum()).backward()
        parts.append(logp.detach())
        states.append(hidden.detach())
    return torch.cat(parts), torch.cat(states), [p.grad.clone() for p in params]


@pytest.mark.parametrize("positions", [False, True])
def test_shared_prompt_forward_matches_the_row_by_row_forward(tiny_model: Path,
                                                              positions: bool) -> None:
    agent = _agent(tiny_model, calc_position_embeddings=positions)
    prompts = [[5, 6, 7, 8], [5, 6, 7, 8], [9, 10], [9, 10], [11, 12, 13]]
    completions = [[20, 21, 22], [23], [20, 24], [25, 26, 27], [28, 29]]
    rollout = agent.rollout_from_pairs(prompts, completions)
    mask = rollout.completion_mask.bool()
    with agent.base.use(agent.adapter) as model:
        model.train()
        seen, hook = _record_inputs(model)
        shared = _logprobs_and_grads(agent, model, rollout, [list(range(5))])
        hook.remove()
        alone = _logprobs_and_grads(agent, model, rollout, [[r] for r in range(5)])
    # the three distinct prompts (all but their last token) ran once, then each row's rest
    assert seen == [(3, rollout.prompt_len - 1), (5, mask.shape[1] + 1)]
    assert torch.allclose(shared[0][mask], alone[0][mask], atol=1e-5)
    assert torch.allclose(shared[1][mask], alone[1][mask], atol=1e-5)
    # gradients of order 10-100, equal to float rounding
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-4)
               for a, b in zip(shared[2], alone[2], strict=True))
    assert any(g.abs().sum() > 0 for g in shared[2])


def test_sampling_prefills_each_prompt_once(tiny_model: Path) -> None:
    agent = _agent(tiny_model)
    prompts = [[5, 6, 7], [8, 9]]
    ids, mask = agent.encode_prompts([p for p in prompts for _ in range(3)])
    with agent.base.use(agent.adapter) as model:
        model.eval()
        with torch.no_grad():
            whole = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                   max_new_tokens=6, pad_token_id=agent.tokenizer.pad_token_id,
                                   eos_token_id=agent.tokenizer.eos_token_id)
        seen, hook = _record_inputs(model)
        rollout = agent.generate(prompts, group_size=3, greedy=True, max_new_tokens=6)
        hook.remove()
    assert seen[0] == (2, ids.shape[1] - 1)  # two distinct prompts prefilled once each
    assert seen[1] == (6, 1)  # then every row goes on from the last prompt token
    assert torch.equal(rollout.ids, whole)


def test_distinct_prompts_run_whole(tiny_model: Path) -> None:
    from agilerl.llm.prefix import distinct_prefixes

    ids = torch.tensor([[0, 5, 6], [7, 5, 6], [0, 5, 6]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [1, 1, 1]])  # row 2's first 0 is a real token
    assert distinct_prefixes(ids, mask, 3) is None
    first, inverse = distinct_prefixes(ids[[0, 1, 0]], mask[[0, 1, 0]], 3)
    assert first.tolist() == [0, 1] and inverse.tolist() == [0, 1, 0]
    agent = _agent(tiny_model, gradient_checkpointing=True)
    assert not agent.shares_prompts


def test_sharing_that_saves_too_little_is_skipped(tiny_model: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from agilerl.llm.prefix import shared_prefix_cache

    agent = _agent(tiny_model)
    ids, mask = agent.encode_prompts([[5, 6, 7]] * 4)
    with agent.base.use(agent.adapter) as model:
        assert shared_prefix_cache(model, ids, mask, 2, macs_per_token=1.0) is not None
        monkeypatch.setattr("agilerl.llm.prefix.MIN_SAVED_MACS", 7.0)  # 3 rows x 2 tokens saved
        assert shared_prefix_cache(model, ids, mask, 2, macs_per_token=1.0) is None
        assert shared_prefix_cache(model, ids, mask, 2, macs_per_token=2.0) is not None
