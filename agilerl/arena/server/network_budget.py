"""How big the networks a manifest asks for can get: widths, depths and a parameter count.

Every mapping of the ``network`` section that describes layers (an MLP's or Simba's
``hidden_size``, a CNN's ``channel_size``, an LSTM's ``hidden_state_size``) is read at the
largest size architecture mutations may grow it to (``max_mlp_nodes``,
``max_hidden_layers``, ...; the schema defaults when unset). Its hidden weights are
estimated as ``depth x width^2``: a lower bound of its size (inputs, outputs, kernels and
gates add to it), enough to refuse a network no server slot could hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

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


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _widths(spec: Mapping[str, object], key: str) -> list[int]:
    value = spec.get(key)
    items = value if isinstance(value, list) else [value]
    return [w for w in map(_int, items) if w is not None]


def _layers(spec: Mapping[str, object], where: str) -> Layers | None:
    for key, (bound, default) in _WIDTHS.items():
        widths = _widths(spec, key)
        if not widths:
            continue
        width = max(*widths, _int(spec.get(bound)) or default)
        listed = spec[key]
        given = len(listed) if isinstance(listed, list) else 0
        counts = [_int(spec.get(k)) or 0 for k in _DEPTHS]
        bounded = any(k.startswith("max_") and k in spec for k in _DEPTHS)
        depth = max(given, *counts, 1 if bounded else _GROWTH_DEPTH)
        return Layers(f"{where}.{key}", width, depth)
    return None


def _mappings(node: object, where: str) -> Iterator[tuple[str, Mapping[str, object]]]:
    """Every mapping under ``node`` (itself included), with its dotted location."""
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            yield from _mappings(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _mappings(value, f"{where}[{i}]")


def layer_specs(network: object, where: str = "network") -> Iterator[Layers]:
    """Every layer description of a manifest's network section."""
    for here, spec in _mappings(network, where):
        found = _layers(spec, here)
        if found is not None:
            yield found


def width_fields(network: object, where: str = "network") -> Iterator[tuple[str, int]]:
    """Every layer width of a network section, with its location (``...hidden_size[0]``)."""
    for here, spec in _mappings(network, where):
        for key in _WIDTHS:
            listed = isinstance(spec.get(key), list)
            for i, width in enumerate(_widths(spec, key)):
                yield (f"{here}.{key}[{i}]" if listed else f"{here}.{key}"), width
        for key in _OTHER_WIDTHS:
            value = _int(spec.get(key))
            if value is not None:
                yield f"{here}.{key}", value


def depth_fields(network: object, where: str = "network") -> Iterator[tuple[str, int]]:
    """Every layer count of a network section (list lengths included), with its location."""
    for here, spec in _mappings(network, where):
        for key in _WIDTHS:
            listed = spec.get(key)
            if isinstance(listed, list):
                yield f"{here}.{key} (length)", len(listed)
        for key in _DEPTHS:
            value = _int(spec.get(key))
            if value is not None:
                yield f"{here}.{key}", value
