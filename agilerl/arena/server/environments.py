"""The environments this server can run without uploads: installed Gymnasium ids.

Lookups never import a package a request names: importing runs its code (``this.x`` would
import ``this``), so modules are looked up on disk only
(:func:`agilerl.models.env_checks.check_module_path`), and Gymnasium ids are read from the
registry without ``gymnasium.spec``/``make``, which import the module of a ``module:`` id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

_GYM_ID = re.compile(r"^[A-Za-z][\w.-]*-v\d+$")
BUILTIN_VERSION = "builtin"


@lru_cache(maxsize=1)
def gym_ids() -> dict[str, str]:
    """Registered Gymnasium ids and their entry points (imported on first use)."""
    import gymnasium

    return {name: str(spec.entry_point) for name, spec in gymnasium.registry.items()}


def _module_exists(name: str) -> bool:
    """Whether the dotted module ``name`` is installed, found without importing any part."""
    from agilerl.models.env_checks import check_module_path

    return check_module_path(name) is None


def exists(name: str) -> bool:
    """A registered Gymnasium id, or an installed module (PettingZoo style, dotted)."""
    return name in gym_ids() or ("." in name and ":" not in name and _module_exists(name))


def catalogue(name: str | None) -> dict[str, dict[str, dict[str, bool]]]:
    """``{env: {version: {"validated", "profiled"}}}`` for the built-in ids."""
    return {
        env: {BUILTIN_VERSION: {"validated": True, "profiled": False}}
        for env in sorted(gym_ids())
        if not name or name.lower() in env.lower()
    }


def missing_from_manifest(manifest: Mapping[str, object]) -> str | None:
    """The environment name a plain Gymnasium manifest asks for but this machine lacks.

    Only ids of the ``Name-vN`` form without a custom entrypoint are checked; anything
    else (PettingZoo modules, datasets, labels of custom envs) is left to the trainer.
    """
    env = manifest.get("environment")
    if not isinstance(env, dict) or env.get("entrypoint"):
        return None
    name = env.get("name")
    if not isinstance(name, str) or "/" in name or ":" in name or not _GYM_ID.match(name):
        return None
    return None if name in gym_ids() else name
