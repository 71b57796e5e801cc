"""A tiny causal LM, its tokenizer and small local tasks, built once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the hub


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of a tiny Llama-style model (2 layers, character vocabulary) + tokenizer."""
    from agilerl.llm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def token_task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Parquet ``question``/``answer`` rows and ``reward.py`` (``emit_token``, ``lowercase_share``)."""
    from agilerl.llm.tiny import write_token_task

    return write_token_task(tmp_path_factory.mktemp("token_task"))


@pytest.fixture(scope="session")
def countdown_task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Countdown-style Parquet ``nums``/``target`` rows and ``reward.py``
    (``combined_rewards``)."""
    from agilerl.llm.tiny import write_countdown_task

    return write_countdown_task(tmp_path_factory.mktemp("countdown"))


@pytest.fixture(autouse=True)
def _fresh_bases():
    """Each test loads its own base model (no adapters left over from another test)."""
    from agilerl.llm.adapters import forget_bases

    forget_bases()
    yield
    forget_bases()

