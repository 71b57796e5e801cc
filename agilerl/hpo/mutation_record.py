"""What one mutation did to one member, in the words of the run's event log.

:class:`~agilerl.hpo.mutation.Mutations` snapshots a member before and after it mutates it
and keeps one record per member (``Mutations.records``); the training session writes them
to ``events.jsonl`` (see ``docs/run-events.md``). A record is a plain dict, so it travels
with the operator wherever members live (a Ray actor mutates with a copy of the operator
and sends the copy back). Snapshots only read the member: they draw no random numbers and
change nothing, so a run mutates exactly as it would without them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict


class Change(TypedDict):
    """One leaf that a mutation changed: its dotted name, old and new value."""

    name: str
    old: object
    new: object


class MutationRecord(TypedDict):
    """One member's mutation, as the event log's ``mutation`` event carries it."""

    kind: str
    changes: list[Change]
    description: str


class Snapshot(TypedDict):
    """What :func:`snapshot` reads of a member: each mutable network's ``architecture()``
    and the hyperparameters."""

    architecture: dict[str, object]
    hyperparameters: dict[str, object]

#: The event log's mutation kinds (``mutation`` events' ``kind``).
MUTATION_KINDS = ("none", "architecture", "new_layer", "parameters", "activation", "rl_hp")

#: ``Mutations`` labels (``agent.mut``) that are not a hyperparameter name -> kind.
_KIND_OF_LABEL = {
    "None": "none",
    "add_layer": "new_layer",
    "remove_layer": "new_layer",
    "add_nodes": "architecture",
    "remove_nodes": "architecture",
    "param": "parameters",
    "act": "activation",
}
#: The kind the operator drew (``mutation.KINDS``) -> its words, for "drawn but not possible".
_DRAWN = {"arch": "an architecture", "act": "an activation", "rl_hp": "a hyperparameter"}


def snapshot(agent: object) -> Snapshot:
    """The parts of ``agent`` a mutation may change, other than weights: the architecture of
    each mutable network and the hyperparameters."""
    networks = getattr(agent, "networks", {})
    names = agent.mutable_networks() if hasattr(agent, "mutable_networks") else []
    return {
        "architecture": {name: networks[name].architecture() for name in names},
        "hyperparameters": dict(getattr(agent, "hyperparameters", {}) or {}),
    }


def record(label: str, drawn: str, network: str | None, before: Mapping[str, object],
           after: Mapping[str, object], *, elite_kept: bool = False) -> MutationRecord:
    """The record of one member's mutation: ``kind``, ``changes`` (name, old, new) and a
    one-line ``description``. ``label`` is what the operator stored in ``agent.mut``,
    ``drawn`` the kind it drew, ``network`` the network it picked (if any)."""
    kind = _KIND_OF_LABEL.get(label, "rl_hp")
    changes = _diff("", before["architecture"], after["architecture"])
    changes += _diff("", before["hyperparameters"], after["hyperparameters"])
    return {"kind": kind, "changes": changes,
            "description": _describe(kind, label, drawn, network, changes, elite_kept)}


def _describe(kind: str, label: str, drawn: str, network: str | None,
              changes: list[Change], elite_kept: bool) -> str:
    where = f" of {network}" if network else ""
    if kind == "none":
        if elite_kept:
            return "elite kept unchanged (mutate_elite is off)"
        if drawn in _DRAWN:
            return f"{_DRAWN[drawn]} mutation was drawn but none was possible"
        return "no mutation"
    if kind == "parameters":
        return f"weights{where} perturbed"
    if kind in ("new_layer", "architecture"):
        what = label.replace("_", " ").replace("nodes", "units")
        return f"{what}{where}: " + _changes_text(changes)
    if kind == "activation":
        return f"activation{where}: " + _changes_text(changes)
    return _changes_text(changes) or f"{label} unchanged (at its bound)"


def _changes_text(changes: list[Change]) -> str:
    return "; ".join(f"{c['name']} {c['old']} -> {c['new']}" for c in changes)


def _diff(prefix: str, old: object, new: object) -> list[Change]:
    """The leaves that differ between two nested mappings (lists are leaves), named by
    their dotted path."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[Change] = []
        for key in list(old) + [k for k in new if k not in old]:
            name = f"{prefix}.{key}" if prefix else str(key)
            out += _diff(name, old.get(key), new.get(key))
        return out
    return [] if old == new else [{"name": prefix, "old": old, "new": new}]


def architecture_summary(agent: object) -> str:
    """One line per member's architecture: each mutable network's modules with their hidden
    sizes, activation and output width (``actor: encoder [64, 64] ReLU -> 32, q [64] ReLU
    -> 2``); empty for a member without mutable networks (LLM adapters)."""
    parts = []
    for name, arch in snapshot(agent)["architecture"].items():
        modules = [_module_text(path, module) for path, module in _modules("", arch)]
        parts.append(f"{name}: " + ", ".join(modules) if modules else name)
    return "; ".join(parts)


def _modules(path: str, arch: object) -> list[tuple[str, Mapping[str, object]]]:
    """The nested mappings of ``arch`` that describe one module (they have layer sizes)."""
    if not isinstance(arch, Mapping):
        return []
    if "hidden_size" in arch or "channel_size" in arch:
        return [(path, arch)]
    found: list[tuple[str, Mapping[str, object]]] = []
    for key, value in arch.items():
        found += _modules(str(key), value)
    return found


def _module_text(name: str, module: Mapping[str, object]) -> str:
    sizes = module.get("hidden_size", module.get("channel_size"))
    text = f"{name} {list(sizes) if isinstance(sizes, list | tuple) else sizes}"
    if module.get("activation"):
        text += f" {module['activation']}"
    if module.get("out_dim") is not None:
        text += f" -> {module['out_dim']}"
    return text
