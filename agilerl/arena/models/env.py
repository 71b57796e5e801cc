"""The Arena environment spec: a server-registered environment chosen by name."""

from agilerl.arena.models._generated import EnvSpec
from agilerl.models.env import LLMEnvType

__all__ = ["EnvSpec", "LLMEnvType"]
