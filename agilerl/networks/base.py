"""Evolvable networks: named encoders (any evolvable encoder) feeding named MLP heads.

A network is described entirely by its ``architecture()`` dict, so it can be rebuilt from
a checkpoint (``from_architecture``) and compared cheaply. Encoders come from the encoder
factory (``agilerl.modules.encoders``) by their architecture's ``kind`` and implement
``agilerl.modules.encoder.EvolvableEncoder``; heads are ``EvolvableMLP``. Architecture
mutations are two-phase: ``draw_plan`` uses the caller's numpy generator to decide *what*
changes (a small JSON-able dict), ``mutated(plan)`` applies it deterministically and
returns a new network. Applying the same plan to a mirror (e.g. a DQN target network)
keeps the two architectures identical.

Plan targets: ``"encoder:<name>"`` (a plan of that encoder's own ``draw_plan``),
``"head:<name>"``, ``"latent:<encoder name>"`` (the encoder's output width = the input
width of every head reading from it) and ``"all"`` (activation change across every
encoder and head).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypedDict, TypeVar, cast, overload

import torch
from torch import nn

from agilerl.modules.encoder import EncoderArchitecture, EvolvableEncoder, MutationPlan, as_plan
from agilerl.modules.encoders import encoder_from_architecture
from agilerl.modules.mlp import EvolvableMLP, MLPArchitecture, draw_mlp_plan

if TYPE_CHECKING:
    import numpy as np

MLP_OPS = ("add_layer", "remove_layer", "add_nodes", "remove_nodes")
LATENT_STEPS = (8, 16, 32)

NetworkT = TypeVar("NetworkT", bound="EvolvableNetwork")


class LatentBounds(TypedDict):
    """Bounds of an encoder's latent width under mutation."""

    min: int
    max: int


class NetworkExtra(TypedDict, total=False):
    """Subclass data of a network architecture (each network sets its own fields)."""

    continuous: bool
    action_dim: int
    action_std_init: float
    squash_output: bool
    affine: bool
    agents: list[str]
    action_dims: list[int]
    num_actions: int
    num_atoms: int
    v_min: float
    v_max: float


class NetworkArchitecture(TypedDict, total=False):
    """What ``EvolvableNetwork.architecture()`` returns (see the class docstring)."""

    encoders: dict[str, EncoderArchitecture]
    heads: dict[str, MLPArchitecture]
    head_inputs: dict[str, str]
    latent: LatentBounds
    extra: NetworkExtra


class EvolvableNetwork(nn.Module):
    """Encoders (``encoders[name]``) feeding heads (``heads[name]``, input ``head_inputs``).

    ``arch`` keys: ``encoders`` (name -> encoder architecture, with its ``kind``),
    ``heads`` (name -> MLP architecture), ``head_inputs`` (head -> encoder), ``latent``
    (``min``/``max`` latent width), ``extra`` (subclass data).
    """

    def __init__(self, arch: Mapping[str, object], generator: torch.Generator | None = None):
        super().__init__()
        self.arch: NetworkArchitecture = cast(NetworkArchitecture, copy.deepcopy(dict(arch)))
        self.encoders = nn.ModuleDict(
            {n: encoder_from_architecture(a, generator) for n, a in self.arch["encoders"].items()}
        )
        self.heads = nn.ModuleDict(
            {n: EvolvableMLP(a, generator) for n, a in self.arch["heads"].items()}
        )

    @classmethod
    def from_architecture(
        cls: type[NetworkT], arch: Mapping[str, object], device: str | torch.device = "cpu"
    ) -> NetworkT:
        return cls(arch).to(device)

    def encoder(self, name: str) -> EvolvableEncoder:
        return cast(EvolvableEncoder, self.encoders[name])

    def head(self, name: str) -> EvolvableMLP:
        return cast(EvolvableMLP, self.heads[name])

    def encoder_modules(self) -> dict[str, EvolvableEncoder]:
        """Name -> encoder."""
        return {name: cast(EvolvableEncoder, m) for name, m in self.encoders.items()}

    @overload
    def mlps(self, kind: Literal["encoder"]) -> dict[str, EvolvableEncoder]: ...
    @overload
    def mlps(self, kind: Literal["head"]) -> dict[str, EvolvableMLP]: ...
    @overload
    def mlps(self, kind: str) -> dict[str, EvolvableEncoder] | dict[str, EvolvableMLP]: ...

    def mlps(self, kind: str) -> dict[str, EvolvableEncoder] | dict[str, EvolvableMLP]:
        """``kind`` = ``"encoder"`` (name -> encoder) or ``"head"`` (name -> MLP)."""
        if kind == "encoder":
            return dict(self.encoder_modules())
        return {name: cast(EvolvableMLP, m) for name, m in self.heads.items()}

    def architecture(self) -> NetworkArchitecture:
        arch = copy.deepcopy(self.arch)
        arch["encoders"] = {n: m.architecture() for n, m in self.encoder_modules().items()}
        arch["heads"] = {n: m.architecture() for n, m in self.mlps("head").items()}
        return arch

    # ------------------------------------------------------------------ mutation
    def draw_plan(
        self, op: str, rng: np.random.Generator, activations: list[str]
    ) -> MutationPlan | None:
        """Random details of mutation ``op`` (numpy Generator ``rng``); None if impossible."""
        if op == "activation":
            current = self._current_activation()
            choices = [a for a in activations if a != current]
            if not choices:
                return None
            return {
                "target": "all",
                "op": "activation",
                "activation": str(rng.choice(choices)),
                "seed": 0,
            }
        candidates: list[tuple[str, MutationPlan]] = []
        for name, encoder in self.encoder_modules().items():
            plan = encoder.draw_plan(op, rng, activations)
            if plan is not None:
                candidates.append((f"encoder:{name}", plan))
        for name, mlp in self.mlps("head").items():
            plan = draw_mlp_plan(mlp, op, rng, activations)
            if plan is not None:
                candidates.append((f"head:{name}", plan))
        if op in ("add_nodes", "remove_nodes"):
            for name in self.encoders:
                if self._latent_can(name, op):
                    step = int(rng.choice(LATENT_STEPS))
                    seed = int(rng.integers(0, 2**31 - 1))
                    candidates.append((f"latent:{name}", {"op": op, "nodes": step, "seed": seed}))
        if not candidates:
            return None
        target, plan = candidates[int(rng.integers(len(candidates)))]
        return {"target": target, **plan}

    def _current_activation(self) -> str:
        """The activation an ``activation`` mutation replaces: the first encoder's that
        has one, else the first head's."""
        for encoder in self.encoder_modules().values():
            if encoder.activation is not None:
                return encoder.activation
        return str(next(iter(self.mlps("head").values())).arch["activation"])

    def _latent_can(self, encoder: str, op: str) -> bool:
        width = self.encoder(encoder).out_dim
        bounds = self.arch["latent"]
        return width < bounds["max"] if op == "add_nodes" else width > bounds["min"]

    def mutated(self, plan: Mapping[str, object]) -> EvolvableNetwork:
        """A new network with ``plan`` applied (weights and extra parameters carried)."""
        p = as_plan(plan)
        new = copy.deepcopy(self)
        target = p["target"]
        if target == "all":
            for kind in ("encoder", "head"):
                modules = new.encoders if kind == "encoder" else new.heads
                for name, mlp in new.mlps(kind).items():
                    modules[name] = mlp.mutated(p)
        elif target.startswith("latent:"):
            new._resize_latent(target.split(":", 1)[1], p)
        else:
            kind, name = target.split(":", 1)
            modules = new.encoders if kind == "encoder" else new.heads
            modules[name] = new.mlps(kind)[name].mutated(p)
        new.arch = new.architecture()
        return new

    def preserves_function(self, plan: Mapping[str, object]) -> bool:
        """Whether ``self.mutated(plan)`` computes what this network computes (to
        rounding): the changed module's answer; a wider latent is read by the heads with
        zero weights (kept), a narrower one is not; an activation change is not."""
        target = as_plan(plan)["target"]
        if target == "all":
            return False
        if target.startswith("latent:"):
            return plan["op"] == "add_nodes"
        kind, name = target.split(":", 1)
        return bool(self.mlps(kind)[name].preserves_function(plan))

    def parameter_sources(self, plan: Mapping[str, object]) -> dict[str, str | None]:
        """Parameters of ``self.mutated(plan)`` that do not continue the parameter of the
        same name (``named_parameters``): new name -> old name, None for a new one. Every
        other parameter continues its namesake (resized ones in their overlapping slice)."""
        target = as_plan(plan)["target"]
        if target == "all" or target.startswith("latent:"):
            return {}
        kind, name = target.split(":", 1)
        module = self.mlps(kind)[name]
        sources = getattr(module, "parameter_sources", None)
        if sources is None:
            return {}
        prefix = next(path for path, m in self.named_modules() if m is module)
        return {f"{prefix}.{new}": None if old is None else f"{prefix}.{old}"
                for new, old in sources(plan).items()}

    def _resize_latent(self, encoder: str, plan: MutationPlan) -> None:
        width = self.encoder(encoder).out_dim
        delta = int(plan["nodes"]) if plan["op"] == "add_nodes" else -int(plan["nodes"])
        bounds = self.arch["latent"]
        new_width = max(bounds["min"], min(bounds["max"], width + delta))
        seed = int(plan["seed"])
        self.encoders[encoder] = self.encoder(encoder).resized(out_dim=new_width, seed=seed)
        for head, source in self.arch["head_inputs"].items():
            if source == encoder:
                self.heads[head] = self.head(head).resized(in_dim=new_width, seed=seed + 1)

    def extra_repr(self) -> str:
        enc = {n: m.kind for n, m in self.encoder_modules().items()}
        heads = {n: m.arch["hidden_size"] for n, m in self.mlps("head").items()}
        return f"encoders={enc}, heads={heads}"
