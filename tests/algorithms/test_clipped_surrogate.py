"""The clipped-surrogate loss against its textbook formula, written out here term by term
(the closed form and the autograd path share one implementation, so the gradient tests
alone would not notice a wrong loss)."""

from __future__ import annotations

import pytest
import torch

from agilerl.algorithms.core.clipped_surrogate import clipped_surrogate_loss


class HP:
    clip_coef, vf_coef, ent_coef = 0.2, 0.5, 0.01


def _rows(gen: torch.Generator, rows: int) -> tuple[torch.Tensor, ...]:
    old = torch.randn(rows, generator=gen)
    log_prob = old + torch.randn(rows, generator=gen) * 0.4  # ratios inside and outside
    return (log_prob, torch.rand(rows, generator=gen), torch.randn(rows, generator=gen),
            old, torch.randn(rows, generator=gen) * 3 + 1, torch.randn(rows, generator=gen))


def _textbook(hp, log_prob, entropy, value, old, adv, returns) -> list[float]:
    """PPO's loss and diagnostics as the paper and CleanRL write them, one row at a time."""
    n = len(log_prob)
    mean = sum(adv.tolist()) / n
    std = (sum((a - mean) ** 2 for a in adv.tolist()) / (n - 1)) ** 0.5
    policy, squared, kl, clipped = 0.0, 0.0, 0.0, 0.0
    for lp, o, a, v, r in zip(log_prob.tolist(), old.tolist(), adv.tolist(), value.tolist(),
                              returns.tolist(), strict=True):
        ratio = torch.tensor(lp - o).exp().item()
        a = (a - mean) / (std + 1e-8)
        bounded = min(max(ratio, 1 - hp.clip_coef), 1 + hp.clip_coef)
        policy += max(-a * ratio, -a * bounded) / n
        squared += (v - r) ** 2 / n
        kl += ((ratio - 1) - (lp - o)) / n
        clipped += (abs(ratio - 1) > hp.clip_coef) / n
    value_loss = 0.5 * squared
    entropy_mean = sum(entropy.tolist()) / n
    loss = policy + hp.vf_coef * value_loss - hp.ent_coef * entropy_mean
    return [loss, policy, value_loss, entropy_mean, kl, clipped]


def test_the_loss_and_its_diagnostics_are_the_textbook_ones() -> None:
    log_prob, entropy, value, old, adv, returns = _rows(torch.Generator().manual_seed(5), 48)
    batch = {"log_probs": old, "advantages": adv, "returns": returns}
    terms = clipped_surrogate_loss(HP, log_prob, entropy, value, batch)
    want = _textbook(HP, log_prob, entropy, value, old, adv, returns)
    assert 0.1 < want[-1] < 0.9  # both sides of the clip range are exercised
    for name, got, expected in zip(terms._fields, terms.floats(), want, strict=True):
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-6), name


def test_stacked_members_each_get_their_own_coefficients() -> None:
    gen = torch.Generator().manual_seed(6)
    members = [_rows(gen, 32) for _ in range(3)]
    coefficients = [(0.1, 0.5, 0.0), (0.2, 1.0, 0.01), (0.3, 0.25, 0.05)]

    class Stacked:
        clip_coef, vf_coef, ent_coef = (torch.tensor([[c[k]] for c in coefficients])
                                        for k in range(3))

    log_prob, entropy, value, old, adv, returns = (torch.stack(field)
                                                   for field in zip(*members, strict=True))
    terms = clipped_surrogate_loss(Stacked, log_prob, entropy, value,
                                   {"log_probs": old, "advantages": adv, "returns": returns})
    for m, (rows, (clip, vf, ent)) in enumerate(zip(members, coefficients, strict=True)):
        class One:
            clip_coef, vf_coef, ent_coef = clip, vf, ent

        want = _textbook(One, *rows)
        for name, got, expected in zip(terms._fields, terms, want, strict=True):
            assert float(got[m]) == pytest.approx(expected, rel=1e-5, abs=1e-6), (m, name)
