""""Did you mean ...?" for misspelt keys, algorithm names and environment ids."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, candidates: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The candidate ``word`` most likely meant, or None.

    A case-insensitive or separator-insensitive exact match wins (``dqn`` → ``DQN``,
    ``rainbow_dqn`` → ``RainbowDQN``); otherwise the closest spelling above ``cutoff``.
    """
    options = [c for c in candidates if isinstance(c, str)]
    if not isinstance(word, str) or not options:
        return None
    folded = _fold(word)
    for option in options:
        if _fold(option) == folded and option != word:
            return option
    by_fold = {_fold(option): option for option in options}
    match = difflib.get_close_matches(folded, list(by_fold), n=1, cutoff=cutoff)
    return by_fold[match[0]] if match else None


def _fold(text: str) -> str:
    return text.lower().replace("_", "").replace("-", "").replace(" ", "")
