"""What every floor reads from an algorithm spec: its registered name and registry facts."""

from __future__ import annotations

#: Spec fields that hold Python objects (custom networks, a hyperparameter config, a
#: network spec object): set from Python, never written to a manifest.
CUSTOM_NETWORK_FIELDS = ("actor_network", "actor_networks", "critic_network", "critic_networks")
RUNTIME_ONLY_FIELDS = frozenset({"hp_config", "net_config", *CUSTOM_NETWORK_FIELDS})


def algo_meta(spec: object, name: str, default: object = None) -> object:
    """Per-algorithm registry metadata (``off_policy``, ``default_evo_steps``, ...)."""
    for source in (spec, type(spec)):
        value = getattr(source, name, None)
        if value is not None and not callable(value):
            return value
    return default


def algo_name(spec: object) -> str:
    """Registered name of an algorithm spec (``"DQN"``)."""
    return str(getattr(spec, "algo_name", None) or getattr(spec, "name", type(spec).__name__))
