"""The class decorator that makes a public algorithm spec class known.

It copies the generated registry's facts onto the class (agent type, off-policy, default
``evo_steps``, and the public network and environment spec classes it is validated with)
and adds it to ``ALGO_REGISTRY``. It lives apart from :mod:`agilerl.models.algo` because
it needs the network and environment spec classes, which are built on the base spec
classes of ``algo``.
"""

from __future__ import annotations

from typing import TypeVar

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.algo import AgentType, AlgoSpec, register_algorithm
from agilerl.models.env import ENV_SPECS
from agilerl.models.networks import NETWORK_SPECS

SpecT = TypeVar("SpecT", bound=type[AlgoSpec])


def registered(spec_class: SpecT) -> SpecT:
    """Class decorator: copy the generated registry facts onto a public spec class and
    register it under its name (the class name without ``Spec``)."""
    public(spec_class)
    name = spec_class.__name__.removesuffix("Spec")
    entry = gen.REGISTRY[name]
    spec_class.algo_name = name
    spec_class.agent_type = AgentType(entry.agent_type)
    spec_class.off_policy = entry.off_policy
    spec_class.offline = entry.offline
    spec_class.bandit = entry.bandit
    spec_class.default_evo_steps = entry.default_evo_steps
    spec_class.env_kind = entry.environment
    spec_class.env_type = entry.env_type
    spec_class.training_loop = entry.training_loop
    spec_class.arena = entry.arena
    spec_class.replay_features = entry.replay_features
    spec_class.network_spec = NETWORK_SPECS[entry.network_spec.__name__]
    spec_class.env_spec = ENV_SPECS[entry.environment]
    register_algorithm(name, spec_class)
    return spec_class


__all__ = ["registered"]
