"""Errors of LLM fine-tuning setups (the CLI reports them as messages, exit status 2)."""

from __future__ import annotations

from agilerl.core.errors import TrainingSetupError, UnsupportedSettingError


class LLMSettingError(UnsupportedSettingError, ValueError):
    """An LLM setting (LoRA config, quantisation, advantage normalisation...) this version
    cannot use as given; the message names the field (the CLI exits with status 1)."""


class ModelUnavailableError(TrainingSetupError, OSError):
    """A pretrained model (or tokenizer) could not be found locally nor downloaded."""


class RewardFunctionError(TrainingSetupError, ValueError):
    """The reward file or function named by the manifest cannot be loaded or called."""
