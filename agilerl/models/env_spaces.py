"""The spaces of a registered Gymnasium environment, and whether an algorithm can act in them.

Reading the spaces means making the environment once (importing Gymnasium), so it happens
only when a check needs them, and the answer is cached on disk beside the registry cache
(keyed by the installed Gymnasium and the id).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agilerl.models.env_checks import (
    Finding,
    cache_file,
    gymnasium_stamp,
    installed_gymnasium_ids,
    write_cache,
)


@dataclass(frozen=True)
class Spaces:
    """What validation needs to know about a Gymnasium environment's spaces."""

    action: str
    """Action space class: ``Discrete``, ``Box``, ``MultiDiscrete``, ``MultiBinary``, ..."""
    action_text: str
    obs_values: int | None
    """Numbers in one observation (None when the space is not a flat array)."""
    obs_itemsize: int | None
    obs_dtype: str | None
    action_values: int | None


def _space_facts(action_space: object, obs_space: object) -> Spaces:
    def values(space: object) -> int | None:
        shape = getattr(space, "shape", None)
        if type(space).__name__ == "Discrete":
            return 1
        if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
            count = 1
            for n in shape:
                count *= n
            return count
        return None

    dtype = getattr(obs_space, "dtype", None)
    return Spaces(type(action_space).__name__, str(action_space), values(obs_space),
                  int(dtype.itemsize) if dtype is not None else None,
                  str(dtype) if dtype is not None else None, values(action_space))


def gym_spaces(env_id: str) -> Spaces | None:
    """The spaces of registered Gymnasium id ``env_id`` (made once, then cached on disk);
    None when it cannot be made here."""
    stamp = gymnasium_stamp()
    installed = installed_gymnasium_ids() or {}
    cache = cache_file("spaces", stamp, env_id) if stamp and env_id in installed else None
    if cache is not None:
        try:
            return Spaces(**json.loads(cache.read_text()))
        except (OSError, ValueError, TypeError):
            pass
    try:
        import warnings

        import gymnasium

        from agilerl.env_registry import register_shipped_envs

        register_shipped_envs()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = gymnasium.make(env_id)
        try:
            facts = _space_facts(env.action_space, env.observation_space)
        finally:
            env.close()
    except Exception:  # a missing optional dependency is reported by check_gym_id
        return None
    if cache is not None:
        write_cache(cache, facts.__dict__)
    return facts


#: Network family of an algorithm → the action spaces it can act in (a Q-network has one
#: output per discrete action; a deterministic actor outputs a continuous action).
ANY_ACTION_SPACE = ("Discrete", "Box", "MultiDiscrete", "MultiBinary")
ACTION_SPACES = {
    "QNetworkSpec": ("Discrete",),
    "RainbowQNetworkSpec": ("Discrete",),
    "DeterministicActorSpec": ("Box",),
    "StochasticActorSpec": ANY_ACTION_SPACE,
}


def check_action_space(algorithm: str, network: str, env_id: str, spaces: Spaces,
                       alternatives: list[str]) -> Finding | None:
    """An error when ``algorithm`` (whose network family is ``network``) cannot act in the
    environment's action space."""
    supported = ACTION_SPACES.get(network)
    if supported is None or spaces.action in supported:
        return None
    kind = {"Box": "continuous", "Discrete": "discrete"}.get(spaces.action, spaces.action)
    others = f"; algorithms that can: {', '.join(alternatives)}" if alternatives else ""
    return Finding("error", f"{algorithm} needs a {' or '.join(supported)} action space, but "
                   f"'{env_id}' has {kind} actions ({spaces.action_text}){others}")
