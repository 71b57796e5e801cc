"""Arena algorithm spec classes, one module per algorithm (``agilerl.arena.models.algorithms.dqn``
holds ``DQNSpec``), as in ``agilerl.models.algorithms``.

The per-algorithm modules are made from the generated Arena registry when this package is
imported (they are registered in ``sys.modules``, so ``from
agilerl.arena.models.algorithms.dqn import DQNSpec`` works), so an algorithm added to
``schemas/`` appears here with no list to keep by hand.
"""

from __future__ import annotations

import sys
import types

from agilerl.arena.models._generated import REGISTRY, SpecModel
from agilerl.models.algo import spec_module


def _spec_module(name: str, spec_class: type[SpecModel]) -> types.ModuleType:
    full = f"{__name__}.{spec_module(name).rsplit('.', 1)[1]}"
    module = sys.modules.get(full)
    if module is None:
        module = types.ModuleType(full, f"``{spec_class.__name__}``: the Arena {name} spec.")
        setattr(module, spec_class.__name__, spec_class)
        module.__all__ = [spec_class.__name__]  # type: ignore[attr-defined]
        sys.modules[full] = module
    return module


for _entry in REGISTRY.values():
    _module = _spec_module(_entry.name, _entry.spec_class)
    globals()[_module.__name__.rsplit(".", 1)[1]] = _module
    globals()[_entry.spec_class.__name__] = _entry.spec_class

__all__ = sorted(entry.spec_class.__name__ for entry in REGISTRY.values())
