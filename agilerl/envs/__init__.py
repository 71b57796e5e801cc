"""Environments: Gymnasium and PettingZoo vector envs, bandit envs, user entrypoints.

Every vector env built here uses Gymnasium's ``NEXT_STEP`` autoreset mode
(:data:`AUTORESET_MODE`); see :mod:`agilerl.envs.gym_env` for the construction and
vectorisation rules.
"""

from __future__ import annotations

from agilerl.env_registry import register_shipped_envs
from agilerl.envs.bandit import BanditEnv, load_table, make_bandit_env
from agilerl.envs.chunked_async import ChunkedAsyncVectorEnv, EnvWorkerError
from agilerl.envs.entrypoint import load_module, resolve_entrypoint
from agilerl.envs.gym_env import (
    AUTORESET_MODE,
    BOX2D_INSTALL_HINT,
    NATIVE_MIN_ENVS,
    make_env_factory,
    make_single_env,
    make_vector_env,
    vector_mode,
)
from agilerl.envs.memory import make_memory_vector_env
from agilerl.envs.pettingzoo_env import (
    PettingZooVectorEnv,
    make_pz_env_factory,
    make_pz_single_env,
    make_pz_vector_env,
)
from agilerl.envs.wrappers import apply_wrappers, resolve_wrapper, resolve_wrappers

register_shipped_envs()

__all__ = [
    "AUTORESET_MODE",
    "BanditEnv",
    "BOX2D_INSTALL_HINT",
    "NATIVE_MIN_ENVS",
    "ChunkedAsyncVectorEnv",
    "EnvWorkerError",
    "PettingZooVectorEnv",
    "apply_wrappers",
    "load_module",
    "load_table",
    "make_bandit_env",
    "make_env_factory",
    "make_memory_vector_env",
    "make_pz_env_factory",
    "make_pz_single_env",
    "make_pz_vector_env",
    "make_single_env",
    "make_vector_env",
    "resolve_entrypoint",
    "resolve_wrapper",
    "resolve_wrappers",
    "vector_mode",
]
