"""Errors of LLM fine-tuning setups (the CLI reports them as messages, exit status 2)."""

from __future__ import annotations

from agilerl.training.errors import TrainingSetupError


class ModelUnavailableError(TrainingSetupError, OSError):
    """A pretrained model (or tokenizer) could not be found locally nor downloaded."""


class DatasetUnavailableError(TrainingSetupError, OSError):
    """A dataset could not be found locally nor downloaded."""


class RewardFunctionError(TrainingSetupError, ValueError):
    """The reward file or function named by the manifest cannot be loaded or called."""
