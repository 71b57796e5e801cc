"""Token batches of prompt + response pairs, and the SFT and DPO losses over them."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agilerl.llm.losses import (  # noqa: E402
    dpo_loss,
    response_log_probs,
    sft_loss,
    token_log_probs,
)
from agilerl.llm.text_batches import encode_prompt_responses  # noqa: E402
from tests.llm.pref_tokenizer import word_tokenizer  # noqa: E402


def _id(tok, word: str) -> int:
    return tok.convert_tokens_to_ids(word)


def test_rows_are_prompt_then_response_then_eos_with_the_response_masked() -> None:
    tok = word_tokenizer()
    batch = encode_prompt_responses(tok, ["say hello", "say"], ["world", "yes no"], 16)
    bos, eos, pad = 1, 2, 0
    assert batch.input_ids.tolist() == [
        [bos, _id(tok, "say"), _id(tok, "hello"), _id(tok, "world"), eos],
        [bos, _id(tok, "say"), _id(tok, "yes"), _id(tok, "no"), eos],
    ]
    assert batch.response_mask.tolist() == [[False, False, False, True, True],
                                            [False, False, True, True, True]]
    short = encode_prompt_responses(tok, ["say"], ["yes"], 16)
    assert short.input_ids.tolist() == [[bos, _id(tok, "say"), _id(tok, "yes"), eos]]
    padded = encode_prompt_responses(tok, ["say hello", "say"], ["world", "yes"], 16)
    assert padded.input_ids[1].tolist()[-1] == pad and padded.attention_mask[1].tolist() == \
        [1, 1, 1, 1, 0]


def test_long_rows_lose_the_prompt_start_first_then_the_response_end() -> None:
    tok = word_tokenizer(bos=False)
    batch = encode_prompt_responses(tok, ["p1 p2 p3 p4"], ["c1 c2"], 5)
    assert batch.input_ids.tolist() == [[_id(tok, "p3"), _id(tok, "p4"), _id(tok, "c1"),
                                         _id(tok, "c2"), 2]]
    cut = encode_prompt_responses(tok, ["p1 p2"], ["c1 c2 c3 c4 c5"], 4)
    assert cut.input_ids.tolist() == [[_id(tok, "p2"), _id(tok, "c1"), _id(tok, "c2"),
                                       _id(tok, "c3")]]
    assert cut.response_mask.tolist() == [[False, True, True, True]]


def _logits_favouring(input_ids: torch.Tensor, vocab: int, strength: float) -> torch.Tensor:
    """Logits whose position t puts ``strength`` on token t+1 (the actual next token)."""
    rows, length = input_ids.shape
    logits = torch.zeros(rows, length, vocab)
    logits[:, :-1].scatter_(2, input_ids[:, 1:].unsqueeze(-1), strength)
    return logits


def test_token_log_probs_pick_the_next_token() -> None:
    ids = torch.tensor([[3, 5, 7]])
    logits = _logits_favouring(ids, 10, 2.0)
    expected = 2.0 - math.log(math.exp(2.0) + 9)
    assert torch.allclose(token_log_probs(logits, ids), torch.full((1, 2), expected))


def test_sft_loss_scores_only_response_tokens() -> None:
    tok = word_tokenizer()
    batch = encode_prompt_responses(tok, ["say hello"], ["world"], 16)
    vocab = len(tok)
    logits = _logits_favouring(batch.input_ids, vocab, 5.0)
    # wreck the prediction of a prompt token: the loss must not move
    logits_bad_prompt = logits.clone()
    logits_bad_prompt[0, 0] = 0.0
    logits_bad_prompt[0, 0, 7] = 50.0
    loss = sft_loss(logits, batch.input_ids, batch.response_mask)
    assert torch.allclose(loss, sft_loss(logits_bad_prompt, batch.input_ids,
                                         batch.response_mask))
    expected = -(5.0 - math.log(math.exp(5.0) + vocab - 1))
    assert math.isclose(float(loss), expected, rel_tol=1e-5)
    flat = torch.zeros_like(logits)
    assert float(sft_loss(flat, batch.input_ids, batch.response_mask)) == pytest.approx(
        math.log(vocab), rel=1e-5)


def test_sft_loss_is_differentiable_and_refuses_empty_responses() -> None:
    ids = torch.tensor([[1, 4, 5]])
    logits = torch.zeros(1, 3, 8, requires_grad=True)
    sft_loss(logits, ids, torch.tensor([[False, False, True]])).backward()
    assert logits.grad is not None and logits.grad[0, 1].abs().sum() > 0
    assert logits.grad[0, 0].abs().sum() == 0  # the prompt position is not scored
    with pytest.raises(ValueError, match="no response tokens"):
        sft_loss(logits, ids, torch.zeros(1, 3, dtype=torch.bool))


def test_response_log_probs_sum_the_masked_tokens() -> None:
    ids = torch.tensor([[1, 4, 5, 0]])
    logits = _logits_favouring(ids, 8, 1.0)
    mask = torch.tensor([[False, False, True, False]])
    per_token = token_log_probs(logits, ids)
    assert torch.allclose(response_log_probs(logits, ids, mask), per_token[:, 1])


def test_dpo_loss_matches_its_formula_and_rewards() -> None:
    pc, pr = torch.tensor([-1.0, -2.0]), torch.tensor([-3.0, -1.0])
    rc, rr = torch.tensor([-2.0, -2.0]), torch.tensor([-2.0, -2.0])
    out = dpo_loss(pc, pr, rc, rr, beta=0.5)
    margins = 0.5 * ((pc - rc) - (pr - rr))
    assert torch.allclose(out.margins, margins)
    expected = -torch.nn.functional.logsigmoid(margins).mean()
    assert torch.allclose(out.loss, expected)
    assert out.accuracy == 0.5
    assert torch.allclose(out.chosen_rewards, 0.5 * (pc - rc))


def test_dpo_loss_is_log2_at_the_reference_and_falls_as_chosen_gains() -> None:
    ref = torch.tensor([-4.0, -5.0])
    start = dpo_loss(ref, ref, ref, ref, beta=0.1)
    assert math.isclose(float(start.loss), math.log(2), rel_tol=1e-6)
    policy_chosen = ref.clone().requires_grad_(True)
    out = dpo_loss(policy_chosen, ref, ref, ref, beta=0.1)
    out.loss.backward()
    assert policy_chosen.grad is not None and (policy_chosen.grad < 0).all()
    better = dpo_loss(ref + 1.0, ref, ref, ref, beta=0.1)
    assert float(better.loss) < float(start.loss) and better.accuracy == 1.0
