"""Let public classes subclass the generated models in another module.

The generated modules use postponed annotations (strings) and deferred building; a subclass
defined elsewhere would resolve the inherited annotations against its own module and fail.
:func:`public` points the subclass at the generated module's namespace instead.
"""

from __future__ import annotations

from typing import TypeVar

from agilerl.models._generated import models as _generated_models

T = TypeVar("T")

_NAMESPACE: dict[str, object] = dict(vars(_generated_models))


def public(cls: T) -> T:
    """Class decorator for a public subclass of a generated model."""
    cls.__pydantic_parent_namespace__ = _NAMESPACE  # type: ignore[attr-defined]
    return cls
