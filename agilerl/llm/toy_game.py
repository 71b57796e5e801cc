"""A small multi-turn text game that runs offline: guess a hidden letter.

It needs nothing beyond the standard library, so a ``multiturn`` manifest can train on it
with the tiny local model (``agilerl llm tiny-model``) where GEM (``gem-llm``) is not
installed: ``environment.entrypoint: "agilerl.llm.toy_game:make_guess_letter"``.

The game follows the Gymnasium text API of :mod:`agilerl.llm.multiturn`. The secret is one
of the first ``letters`` lowercase letters, drawn from the episode's seed; each turn the
first of those letters in the reply is the guess. A right guess ends the episode with
reward 1; a wrong one earns 0 and a hint (before or after in the alphabet), a reply with no
candidate letter ``invalid_reward``. After ``max_turns`` guesses the episode is truncated.
"""

from __future__ import annotations

import random
import string
from typing import Any

__all__ = ["GuessLetter", "make_guess_letter"]


class GuessLetter:
    """Guess the hidden letter in at most ``max_turns`` replies (see module docstring)."""

    def __init__(self, letters: int = 4, max_turns: int = 3,
                 invalid_reward: float = -0.1) -> None:
        if not 2 <= int(letters) <= 26:
            raise ValueError(f"env_config.letters must be between 2 and 26, got {letters!r}")
        if int(max_turns) < 1:
            raise ValueError(f"env_config.max_turns must be at least 1, got {max_turns!r}")
        self.alphabet = string.ascii_lowercase[:int(letters)]
        self.max_turns = int(max_turns)
        self.invalid_reward = float(invalid_reward)
        self.secret = self.alphabet[0]
        self.turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, object]]:
        """A new secret drawn from ``seed``; the opening message."""
        self.secret = random.Random(seed).choice(self.alphabet)
        self.turn = 0
        choices = ", ".join(self.alphabet)
        return f"Guess my letter: one of {choices}. Reply with the letter.", {}

    def step(self, text: str) -> tuple[str, float, bool, bool, dict[str, object]]:
        """Score one reply: ``(observation, reward, terminated, truncated, info)``."""
        self.turn += 1
        guess = next((ch for ch in text.lower() if ch in self.alphabet), None)
        truncated = self.turn >= self.max_turns
        if guess is None:
            return (f"Reply with one of {', '.join(self.alphabet)}.", self.invalid_reward,
                    False, truncated, {})
        if guess == self.secret:
            return "Right!", 1.0, True, False, {}
        where = "after" if self.secret > guess else "before"
        return f"No, it comes {where} {guess}.", 0.0, False, truncated, {}


def make_guess_letter(**config: Any) -> GuessLetter:
    """The manifest entrypoint: a :class:`GuessLetter` built from ``environment.env_config``."""
    return GuessLetter(**config)
