"""How big the networks a manifest asks for can get: widths, depths and a parameter count.

Every mapping of the ``network`` section that describes layers (an MLP's or Simba's
``hidden_size``, a CNN's ``channel_size``, an LSTM's ``hidden_state_size``) is read at the
largest size architecture mutations may grow it to (``max_mlp_nodes``,
``max_hidden_layers``, ...; the schema defaults when unset). Its hidden weights are
estimated as ``depth x width^2``: a lower bound of its size (inputs, outputs, kernels and
gates add to it), enough to refuse a network no server slot could hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: fields whose value (or each item of the list) is a layer width, and the field
#: bounding what mutation may grow it to (with its schema default).
_WIDTHS = {"hidden_size": ("max_mlp_nodes", 256), "channel_size": ("max_channel_size", 256),
           "hidden_state_size": ("max_hidden_state_size", 256)}
#: other width fields, checked against the width cap on their own.
_OTHER_WIDTHS = ("latent_dim", "max_latent_dim", "max_mlp_nodes", "max_channel_size",
                 "max_hidden_state_size")
#: fields that count layers (besides the length of a width list).
_DEPTHS = ("max_hidden_layers", "num_layers", "max_layers", "num_blocks", "max_blocks")
#: the most layers mutation may grow a description to when it sets no ``max_*`` bound
#: (the schemas' largest default).
_GROWTH_DEPTH = 6


@dataclass(frozen=True)
class Layers:
    """One layer description of the network section, at its largest."""

    where: str
    width: int
    depth: int

    @property
    def params(self) -> int:
        return self.depth * self.width * self.width


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _widths(spec: dict[str, Any], key: str) -> list[int]:
    value = spec.get(key)
    items = value if isinstance(value, list) else [value]
    return [w for w in map(_int, items) if w is not None]


def _layers(spec: dict[str, Any], where: str) -> Layers | None:
    for key, (bound, default) in _WIDTHS.items():
        widths = _widths(spec, key)
        if not widths:
            continue
        width = max(*widths, _int(spec.get(bound)) or default)
        given = len(spec[key]) if isinstance(spec[key], list) else 0
        counts = [_int(spec.get(k)) or 0 for k in _DEPTHS]
        bounded = any(k.startswith("max_") and k in spec for k in _DEPTHS)
        depth = max(given, *counts, 1 if bounded else _GROWTH_DEPTH)
        return Layers(f"{where}.{key}", width, depth)
    return None


def layer_specs(node: Any, where: str = "network") -> Iterator[Layers]:
    """Every layer description under ``node`` (a manifest's network section)."""
    if isinstance(node, dict):
        found = _layers(node, where)
        if found is not None:
            yield found
        for key, value in node.items():
            if isinstance(value, dict | list):
                yield from layer_specs(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            if isinstance(value, dict):
                yield from layer_specs(value, f"{where}[{i}]")


def width_fields(node: Any, where: str = "network") -> Iterator[tuple[str, int]]:
    """Every width-like value under ``node``, with its dotted location."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}.{key}"
            if key in _WIDTHS:
                for i, width in enumerate(_widths(node, key)):
                    yield (f"{here}[{i}]" if isinstance(value, list) else here), width
            elif key in _OTHER_WIDTHS and _int(value) is not None:
                yield here, int(value)
            elif isinstance(value, dict | list):
                yield from width_fields(value, here)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from width_fields(value, f"{where}[{i}]")


def depth_fields(node: Any, where: str = "network") -> Iterator[tuple[str, int]]:
    """Every layer count under ``node`` (list lengths included), with its location."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}.{key}"
            if key in _WIDTHS and isinstance(value, list):
                yield f"{here} (length)", len(value)
            elif key in _DEPTHS and _int(value) is not None:
                yield here, int(value)
            elif isinstance(value, dict | list):
                yield from depth_fields(value, here)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from depth_fields(value, f"{where}[{i}]")
