"""Each LLM fine-tuning algorithm's defining feature, checked by hand on tiny inputs.

GRPO's KL penalty to the base model and its clipped surrogate, group-relative advantages;
GSPO's completion-level clipping; CISPO's clipped, stop-gradient importance weight; LLMPPO's
critic (GAE from its values, the clipped value loss); LLMREINFORCE's batch-normalised,
discounted returns; SFT's loss on response tokens only. Each test fails when the feature it
names is removed (``tools/mutants/llm.yaml``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from llm_helpers import algorithm_settings

from agilerl.algorithms.core.llm_base import Rollout
from agilerl.algorithms.core.llm_policy import Experience, UpdateBatch

LORA = {"lora_r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0}
#: Four completions of two prompts (two rows each), prompts of one length (no left padding).
PROMPTS = [[5, 6, 7], [5, 6, 7], [8, 9, 10], [8, 9, 10]]
COMPLETIONS = [[9, 10, 11], [10, 9], [11], [9, 12, 13]]


def _agent(tiny_model: Path, name: str, **extra: Any) -> Any:
    from agilerl.algorithms import algorithm_class

    settings = algorithm_settings(name, pretrained_model_name_or_path=str(tiny_model),
                                  max_model_len=64, lora_config=LORA, **extra)
    settings.pop("name")
    return algorithm_class(name)(**settings)


def _perturb_adapter(agent: Any, scale: float = 0.5) -> None:
    """Move the member's adapter away from zero, so its policy differs from the base."""
    generator = torch.Generator().manual_seed(0)
    state = agent.base.adapter_state(agent.adapter)
    moved = {k: v + scale * torch.randn(v.shape, generator=generator) if "lora_B" in k else v
             for k, v in state.items()}
    agent.base.load_adapter_state(agent.adapter, moved)


def _base_logprobs(tiny_model: Path, rollout: Rollout) -> torch.Tensor:
    """Completion-token log-probabilities under a fresh copy of the base model."""
    from agilerl.llm.model import load_causal_lm

    model = load_causal_lm(str(tiny_model))
    with torch.no_grad():
        logits = model(input_ids=rollout.ids, attention_mask=rollout.attention_mask).logits
    logp = torch.log_softmax(logits[:, rollout.prompt_len - 1:-1].float(), dim=-1)
    return logp.gather(-1, rollout.completion_ids.unsqueeze(-1)).squeeze(-1)


def _row_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum(dim=1) / mask.sum(dim=1)


def _batch(mask: torch.Tensor, rollout: Rollout | None = None) -> UpdateBatch:
    return UpdateBatch(cast(Rollout, rollout), torch.empty(0), None, None, mask)


# ---------------------------------------------------------------------------- GRPO


def test_grpo_kl_penalty_is_beta_times_k3_kl_to_the_base_model(tiny_model: Path) -> None:
    """GRPO's KL penalty: ``beta`` times the k3 estimate ``exp(ref - logp) - (ref - logp) - 1``
    of KL(policy || reference), the reference being the base model without the adapter.

    Equal rewards in each group give zero advantages, so the loss is the penalty alone."""
    beta = 0.1
    agent = _agent(tiny_model, "GRPO", beta=beta)
    _perturb_adapter(agent)
    rollout = agent.rollout_from_pairs(PROMPTS, COMPLETIONS)
    mask = rollout.completion_mask.float()
    policy = agent.logprobs(rollout)
    delta = _base_logprobs(tiny_model, rollout) - policy
    expected_kl = float(_row_mean(torch.exp(delta) - delta - 1.0, mask).mean())
    assert expected_kl > 1e-3  # the perturbed member is away from the base

    metrics = agent.learn(Experience(rollout, np.array([1.0, 1.0, 0.0, 0.0]), group_size=2))
    assert metrics["kl"] == pytest.approx(expected_kl, rel=1e-3)
    assert metrics["loss"] == pytest.approx(beta * expected_kl, rel=1e-3)


def test_grpo_surrogate_is_the_pessimistic_clipped_objective(tiny_model: Path) -> None:
    """GRPO's per-token loss ``-min(r A, clip(r, 1 - c, 1 + c) A)``: a token whose ratio left
    the trust region in the direction its advantage favours gets no gradient, one that left it
    the other way keeps the unclipped term."""
    agent = _agent(tiny_model, "GRPO", clip_coef=0.2)
    #            above, A>0   above, A<0   below, A<0   below, A>0   inside
    diffs = torch.tensor([[0.5, 0.5, -0.5, -0.5, 0.1]])
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0, 2.0]])
    old = torch.full_like(diffs, -2.0)
    logp = (old + diffs).requires_grad_(True)
    loss = agent.policy_loss(logp, old, adv, torch.ones_like(adv))
    loss.sum().backward()
    r = torch.exp(diffs)
    expected = -torch.minimum(r * adv, torch.clamp(r, 0.8, 1.2) * adv)
    assert torch.allclose(loss.detach(), expected, atol=1e-6)
    e = math.exp(0.5)
    expected_grad = [0.0, e, 0.0, -1 / e, -2.0 * math.exp(0.1)]
    assert logp.grad is not None
    assert logp.grad[0].tolist() == pytest.approx(expected_grad, abs=1e-6)


def test_grpo_ratio_is_taken_against_the_policy_before_the_update(tiny_model: Path) -> None:
    """GRPO's importance ratio ``pi / pi_old``: over several epochs on one batch the policy
    moves away from the one that sampled it, so some tokens' ratios leave the clip range."""
    agent = _agent(tiny_model, "GRPO", beta=0.0, clip_coef=0.001, update_epochs=3, lr=0.05)
    rollout = agent.rollout_from_pairs(PROMPTS, COMPLETIONS)
    torch.manual_seed(0)
    metrics = agent.learn(Experience(rollout, np.array([1.0, 0.0, 0.0, 1.0]), group_size=2))
    assert metrics["clip_fraction"] > 0.1


def test_grpo_token_advantages_are_relative_to_the_group(tiny_model: Path) -> None:
    """GRPO's advantage: each completion's reward standardised within its prompt's group
    (``adv_norm`` ``mean_std``), or centred on the group mean (``mean_only``), on every token."""
    experience = Experience(cast(Rollout, None), np.array([1.0, 0.0, 3.0, 3.0]), group_size=2)
    mask = torch.ones(4, 3)
    std = math.sqrt(0.5)  # the sample deviation of {1, 0}
    standardised = _agent(tiny_model, "GRPO").token_advantages(experience, _batch(mask))
    expected = torch.tensor([0.5, -0.5, 0.0, 0.0]) / (std + 1e-4)
    assert torch.allclose(standardised, expected.unsqueeze(1).expand(4, 3), atol=1e-6)
    centred = _agent(tiny_model, "GRPO", adv_norm="mean_only").token_advantages(
        experience, _batch(mask))
    assert centred[:, 0].tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0])


# ---------------------------------------------------------------------------- GSPO


def test_gspo_clips_each_completion_as_a_whole(tiny_model: Path) -> None:
    """GSPO's clip acts on the completion's length-normalised ratio ``exp(mean log r)``: when
    it leaves the range every token loses its gradient, whatever its own ratio; when it stays
    inside, no token is clipped, even one whose own ratio is far out."""
    agent = _agent(tiny_model, "GSPO", clip_coef=0.2)
    mask, adv = torch.ones(2, 2), torch.ones(2, 2)
    logp = torch.full((2, 2), -1.0, requires_grad=True)
    # row 0: token ratios e^0.1 (inside), e^1 (out); whole completion exp(0.55) > 1.2
    # row 1: token ratios e^-0.5, e^0.4 (both out); whole completion exp(-0.05) inside
    old = torch.tensor([[-1.1, -2.0], [-0.5, -1.4]])
    loss = agent.policy_loss(logp, old, adv, mask)
    loss.sum().backward()
    inside = math.exp(-0.05)
    assert loss.detach().flatten().tolist() == pytest.approx([-1.2, -1.2, -inside, -inside],
                                                             abs=1e-6)
    assert logp.grad is not None
    assert logp.grad.flatten().tolist() == pytest.approx([0.0, 0.0, -inside, -inside], abs=1e-6)


# ---------------------------------------------------------------------------- CISPO


def test_cispo_weight_is_clipped_and_carries_no_gradient(tiny_model: Path) -> None:
    """CISPO's loss ``-sg(clip(r)) A log pi``: the gradient is the clipped weight times the
    advantage times the gradient of ``log pi``, never through the weight itself."""
    agent = _agent(tiny_model, "CISPO", clip_coef=0.2)
    logp = torch.tensor([[-1.0, -1.0]], requires_grad=True)
    old = torch.tensor([[-1.1, -2.0]])  # ratios e^0.1 (inside) and e (clipped to 1.2)
    adv = torch.tensor([[2.0, 2.0]])
    loss = agent.policy_loss(logp, old, adv, torch.ones(1, 2))
    loss.sum().backward()
    weights = [math.exp(0.1), 1.2]
    assert loss.detach()[0].tolist() == pytest.approx([2.0 * w for w in weights], abs=1e-6)
    assert logp.grad is not None
    assert logp.grad[0].tolist() == pytest.approx([-2.0 * w for w in weights], abs=1e-6)


# ---------------------------------------------------------------------------- LLMPPO


def test_llmppo_value_loss_is_the_clipped_pessimistic_one(tiny_model: Path) -> None:
    """LLMPPO's critic loss ``0.5 vf_coef max((V - R)^2, (V_old + clip(V - V_old, +-c) - R)^2)``
    averaged over each completion's tokens, then over completions."""
    agent = _agent(tiny_model, "LLMPPO", clip_coef=0.2, vf_coef=0.5)
    batch = _batch(torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    batch.old_values = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    batch.returns = torch.tensor([[1.0, -1.0, 0.0], [0.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, -0.1, 3.0], [2.0, 5.0, 5.0]])
    # row 0: max(0.25, (0.2 - 1)^2) and max(0.81, 0.81); row 1: max(4, 1.2^2)
    expected = 0.5 * 0.5 * (((0.64 + 0.81) / 2 + 4.0) / 2)
    loss = agent.value_loss(batch, torch.arange(2), values)
    assert float(loss) == pytest.approx(expected, rel=1e-6)


def test_llmppo_advantages_are_gae_of_its_critic(tiny_model: Path) -> None:
    """LLMPPO's advantages come from its value head: with ``gamma = lambda = 1`` and a critic
    valuing every token at 0.5, each token's advantage is ``R - 0.5`` and its return ``R``."""
    agent = _agent(tiny_model, "LLMPPO", gamma=1.0, gae_lambda=1.0, whiten_advantages=False)
    with torch.no_grad():
        agent.extra_modules["value_head"].bias.fill_(0.5)
    rollout = agent.rollout_from_pairs(PROMPTS, COMPLETIONS)
    mask = rollout.completion_mask.float()
    batch = _batch(mask, rollout)
    rewards = np.array([1.0, 0.0, -1.0, 2.0])
    adv = agent.token_advantages(Experience(rollout, rewards), batch)
    on = mask.bool()
    per_token = torch.tensor(rewards, dtype=torch.float32).unsqueeze(1).expand_as(mask)
    assert torch.allclose(adv[on], per_token[on] - 0.5, atol=1e-5)
    assert batch.returns is not None and batch.old_values is not None
    assert torch.allclose(batch.returns[on], per_token[on], atol=1e-5)
    assert torch.allclose(batch.old_values[on], torch.full_like(per_token[on], 0.5))


def test_llmppo_update_trains_its_critic(tiny_model: Path) -> None:
    """LLMPPO's update includes the value loss: one learn step moves the value head."""
    agent = _agent(tiny_model, "LLMPPO")
    head = agent.extra_modules["value_head"]
    before = [p.detach().clone() for p in head.parameters()]
    rollout = agent.rollout_from_pairs(PROMPTS, COMPLETIONS)
    agent.learn(Experience(rollout, np.array([1.0, 0.0, 0.0, 1.0])))
    assert any(not torch.equal(b, p) for b, p in zip(before, head.parameters(), strict=True))


# ---------------------------------------------------------------------------- LLMREINFORCE


def test_llmreinforce_advantages_are_batch_normalised_returns(tiny_model: Path) -> None:
    """LLMREINFORCE's advantage ``(R - mean R) / std R`` over the batch (the mean is the
    baseline), on every token of the completion."""
    agent = _agent(tiny_model, "LLMREINFORCE")
    rewards = np.array([1.0, 0.0, 0.0, 3.0])
    mask = torch.ones(4, 2)
    adv = agent.token_advantages(Experience(cast(Rollout, None), rewards), _batch(mask))
    expected = (torch.tensor(rewards, dtype=torch.float32) - 1.0) / (math.sqrt(2.0) + 1e-4)
    assert torch.allclose(adv, expected.unsqueeze(1).expand(4, 2), atol=1e-6)


def test_llmreinforce_turns_are_credited_with_their_discounted_return_to_go(
        tiny_model: Path) -> None:
    """LLMREINFORCE in a multi-turn episode: each turn's return is the rewards from it on,
    discounted by ``gamma``."""
    from agilerl.llm.multiturn import Episode
    from agilerl.training.llm_multiturn import MultiTurnMemberTrainer

    agent = _agent(tiny_model, "LLMREINFORCE", gamma=0.5)
    episode = Episode(group=0, prompts=[[5], [5, 6], [5, 6, 7]], completions=[[7], [8], [9]],
                      rewards=[0.2, -0.1, 1.0])
    experience = MultiTurnMemberTrainer(cast(Any, None)).experience(agent, [episode])
    assert experience.rewards.tolist() == pytest.approx(
        [0.2 + 0.5 * (-0.1 + 0.5 * 1.0), -0.1 + 0.5 * 1.0, 1.0])


# ---------------------------------------------------------------------------- SFT


def _response_nll(tiny_model: Path, batches: list[Any]) -> float:
    """Mean negative log-likelihood of the response tokens under a fresh base model."""
    from agilerl.llm.model import load_causal_lm

    model = load_causal_lm(str(tiny_model))
    total, tokens = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
            logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
            token = logp.gather(-1, batch.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            scored = batch.response_mask[:, 1:]
            total -= float(token[scored].sum())
            tokens += int(scored.sum())
    return total / tokens


def _sft_agent_and_env(tiny_model: Path, folder: Path) -> tuple[Any, Any]:
    from agilerl.algorithms.sft import SFT
    from agilerl.llm.dataset_envs import make_dataset_env
    from agilerl.llm.tiny import write_sft_set
    from agilerl.models import LLMEnvSpec

    agent = SFT(index=0, device="cpu", seed=0, pretrained_model_name_or_path=str(tiny_model),
                batch_size=8, lr=5e-3, lora_config=LORA, max_model_len=64)
    spec = LLMEnvSpec(env_type="sft", dataset=str(write_sft_set(folder)), train_test_split=0.75)
    return agent, make_dataset_env(spec, agent.tokenizer, max_context_length=64, seed=0)


def test_sft_update_scores_only_the_response_tokens(tiny_model: Path, tmp_path: Path) -> None:
    """SFT's training loss is the mean NLL of the response tokens; the prompt is masked.

    Before the first step the member equals the base model, so its reported loss is the
    base model's response NLL on the batch."""
    agent, env = _sft_agent_and_env(tiny_model, tmp_path)
    batch = env.train_batch(0, 8)
    assert (batch.attention_mask.bool() & ~batch.response_mask).any()  # prompts to mask
    metrics = agent.learn(batch)
    assert metrics["loss"] == pytest.approx(_response_nll(tiny_model, [batch]), rel=1e-5)


def test_sft_held_out_loss_scores_only_the_response_tokens(tiny_model: Path,
                                                           tmp_path: Path) -> None:
    """SFT's fitness is minus the held-out NLL of the response tokens (prompt masked)."""
    agent, env = _sft_agent_and_env(tiny_model, tmp_path)
    expected = _response_nll(tiny_model, list(env.eval_batches(8)))
    assert agent.held_out_loss(env) == pytest.approx(expected, rel=1e-5)
