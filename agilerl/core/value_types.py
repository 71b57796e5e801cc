"""Names for the values that cross package seams, so signatures say what they carry.

``Any`` tells neither a reader nor mypy what a value is. These aliases cover what is left
once the concrete classes and the protocols of :mod:`agilerl.core.member_training` are used:

* ``JsonValue``/``JsonObject``: data parsed from (or written to) JSON or YAML: a manifest
  before validation, an HTTP body, a checkpoint's metadata. Read it with ``isinstance``
  narrowing or validate it into a model; write it as plain Python values.
* ``Space``: any gymnasium space; a function that needs a particular kind narrows it.
* ``Observation``: what an environment hands back from ``reset``/``step``: an array, or a
  dict/tuple of arrays for composite spaces, batched by a vector env.
* ``Options``: keyword arguments chosen by the user and passed on untouched (an
  environment's ``env_kwargs``, a wrapper's options); the receiver checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # the light Arena wheel ships this module without gymnasium or numpy
    import gymnasium as gym
    import numpy as np

JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]

Space: TypeAlias = "gym.Space[object]"
Observation: TypeAlias = "np.ndarray | dict[str, np.ndarray] | tuple[np.ndarray, ...]"
Options: TypeAlias = Mapping[str, object]

__all__ = ["JsonObject", "JsonScalar", "JsonValue", "Observation", "Options", "Space"]
