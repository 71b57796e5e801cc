"""LLM fine-tuning: datasets, model loading, LoRA adapter populations, environments, loops.

Everything here needs the ``[llm]`` extra (transformers, peft, datasets, accelerate);
importing this package does not import them, so ``agilerl`` stays importable without it.
:func:`require_llm_extra` raises :class:`~agilerl.core.errors.MissingExtraError` naming
``pip install 'agilerl[llm]'`` when one of them is missing.
"""

from __future__ import annotations

import importlib.util

from agilerl.core.errors import MissingExtraError

#: Packages of the ``[llm]`` extra.
LLM_PACKAGES = ("transformers", "peft", "datasets", "accelerate")


def require_llm_extra(what: str = "LLM fine-tuning") -> None:
    """Raise :class:`MissingExtraError` when a package of the ``[llm]`` extra is missing."""
    missing = [name for name in LLM_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"{what} needs the Python package(s) {', '.join(map(repr, missing))}, which are "
            "not installed. Install them with: pip install 'agilerl[llm]'"
        )


__all__ = ["LLM_PACKAGES", "require_llm_extra"]
