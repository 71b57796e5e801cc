"""Multi-input encoder (``arch: multiinput``) for Tuple and Dict observations.

Each part of the observation gets its own encoder, in the space's part order:

* an image (3-D Box): a CNN (``cnn_config``) with ``latent_dim`` outputs;
* a Discrete part: one-hot encoding (no parameters);
* a vector (Box, MultiBinary): flattened as is, or, with ``vector_space_mlp``, an MLP
  (``mlp_config``) with ``latent_dim`` outputs.

The part outputs are concatenated and an MLP (``mlp_config``) maps them to the network's
latent width. The input is the dict of part batches ``ObsEncoder`` makes (part name ->
tensor; Discrete parts as integer indices).

Mutations: any part encoder's own (``{"module": "part:<name>", ...}``), the final MLP's
(``{"module": "mlp", ...}``), and a part encoder's output width within
``[min_latent_dim, max_latent_dim]`` (``{"module": "latent:<name>", ...}``); the final
MLP's input columns follow, new ones starting at zero, so the function is kept.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict, cast

import torch
import torch.nn.functional as F
from torch import nn

from agilerl.modules.encoder import (
    EncoderArchitecture,
    EncoderConfig,
    EvolvableEncoder,
    MutationPlan,
    as_plan,
)
from agilerl.modules.mlp import EvolvableMLP, MLPArchitecture, draw_mlp_plan, mlp_architecture

if TYPE_CHECKING:
    import numpy as np

    from agilerl.core.value_types import Space
    from agilerl.modules.cnn import EvolvableCNN
    from agilerl.modules.mlp import MLPEncoder

#: Steps of a part encoder's output-width change.
PART_LATENT_STEPS = (8, 16, 32)
#: Part kinds without parameters: their output width is fixed by the space.
FIXED_PARTS = ("onehot", "flat")


class PartArchitecture(EncoderArchitecture, total=False):
    """A part's encoder architecture: a CNN's or an MLP's, or a parameter-free part's
    (``onehot``, ``flat``: its kind and width)."""

    out_dim: int


class MultiInputArchitecture(TypedDict, total=False):
    """What ``MultiInputEncoder.architecture()`` returns."""

    kind: str
    parts: dict[str, PartArchitecture]
    """Part name -> its encoder's architecture (``onehot``/``flat``: kind and width)."""
    min_latent_dim: int
    max_latent_dim: int
    mlp: MLPArchitecture


def _default_cnn_config() -> EncoderConfig:
    from agilerl.models.networks import DEFERRED_ENCODER_SEEDS, CnnSpec

    return cast(EncoderConfig, CnnSpec.model_validate(
        dict(DEFERRED_ENCODER_SEEDS["cnn"])).model_dump(mode="json"))


def _mlp_config(config: Mapping[str, object]) -> EncoderConfig:
    from agilerl.models.networks import MlpSpec

    return cast(EncoderConfig, MlpSpec.model_validate(dict(config)).model_dump(mode="json"))


def _part_architecture(
    space: Space, encoder_config: EncoderConfig, latent_dim: int
) -> PartArchitecture:
    from gymnasium import spaces

    from agilerl.core.spaces import flat_dim, is_image_space
    from agilerl.modules.encoders import encoder_class

    if is_image_space(space):
        cnn = encoder_config.get("cnn_config") or _default_cnn_config()
        cnn_class = cast("type[EvolvableCNN]", encoder_class("cnn"))
        return cnn_class.architecture_from_config(cnn, space, latent_dim)
    if isinstance(space, spaces.Discrete):
        return {"kind": "onehot", "out_dim": int(space.n)}
    if encoder_config.get("vector_space_mlp"):
        mlp = _mlp_config(encoder_config["mlp_config"])
        part: MLPArchitecture = {"kind": "mlp", **mlp_architecture(
            mlp, flat_dim(space), latent_dim, mlp.get("output_activation"))}
        return part
    return {"kind": "flat", "out_dim": flat_dim(space)}


class MultiInputEncoder(EvolvableEncoder):
    """One encoder per observation part, concatenated, then an MLP (module docstring)."""

    kind = "multiinput"

    def __init__(self, arch: Mapping[str, object], generator: torch.Generator | None = None):
        super().__init__()
        from agilerl.modules.encoders import encoder_from_architecture

        self.arch: MultiInputArchitecture = cast(MultiInputArchitecture, copy.deepcopy(dict(arch)))
        self.part_encoders = nn.ModuleDict(
            {
                name: encoder_from_architecture(part, generator)
                for name, part in self.arch["parts"].items()
                if part["kind"] not in FIXED_PARTS
            }
        )
        self.mlp = EvolvableMLP(self.arch["mlp"], generator)

    @classmethod
    def architecture_from_config(
        cls, encoder_config: EncoderConfig, observation_space: Space | int, latent_dim: int
    ) -> MultiInputArchitecture:
        from agilerl.core.spaces import IncompatibleSpaceError, composite_parts

        parts = composite_parts(observation_space)
        if parts is None:
            raise IncompatibleSpaceError(
                f"the multiinput encoder takes Tuple or Dict observations, not {observation_space}"
            )
        part_latent = int(encoder_config.get("latent_dim") or 32)
        arch_parts = {
            str(key): _part_architecture(space, encoder_config, part_latent) for key, space in parts
        }
        for name in arch_parts:
            if "." in name or not name:
                raise IncompatibleSpaceError(f"observation part name {name!r} cannot name a module")
        mlp = _mlp_config(encoder_config["mlp_config"])
        width = sum(_width(p) for p in arch_parts.values())
        output = mlp.get("output_activation") or mlp["activation"]
        return {
            "kind": cls.kind,
            "parts": arch_parts,
            "min_latent_dim": int(encoder_config.get("min_latent_dim") or 8),
            "max_latent_dim": int(encoder_config.get("max_latent_dim") or 128),
            "mlp": mlp_architecture(mlp, width, latent_dim, output),
        }

    # ------------------------------------------------------------------ maths
    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        features = []
        for name, part in self.arch["parts"].items():
            x = obs[name]
            if part["kind"] == "onehot":
                features.append(F.one_hot(x.long(), part["out_dim"]).to(torch.float32))
            elif part["kind"] == "flat":
                features.append(x.to(torch.float32).reshape(len(x), -1))
            else:
                features.append(self.part_encoders[name](x))
        return self.mlp.forward(torch.cat(features, dim=-1))

    # ------------------------------------------------------------------ description
    @property
    def out_dim(self) -> int:
        return int(self.mlp.arch["out_dim"])

    @property
    def activation(self) -> str | None:
        return cast(str, self.mlp.arch["activation"])

    def architecture(self) -> MultiInputArchitecture:
        arch = copy.deepcopy(self.arch)
        for name, encoder in self._encoders().items():
            arch["parts"][name] = encoder.architecture()
        arch["mlp"] = self.mlp.architecture()
        return arch

    def _encoders(self) -> dict[str, EvolvableCNN | MLPEncoder]:
        return {n: cast("EvolvableCNN | MLPEncoder", m) for n, m in self.part_encoders.items()}

    # ------------------------------------------------------------------ mutation
    def draw_plan(
        self, op: str, rng: np.random.Generator, activations: list[str]
    ) -> MutationPlan | None:
        candidates: list[MutationPlan] = []
        for name, encoder in self._encoders().items():
            plan = encoder.draw_plan(op, rng, activations)
            if plan is not None:
                candidates.append({"module": f"part:{name}", **plan})
        plan = draw_mlp_plan(self.mlp, op, rng, activations)
        if plan is not None:
            candidates.append({"module": "mlp", **plan})
        if op in ("add_nodes", "remove_nodes"):
            low, high = self.arch["min_latent_dim"], self.arch["max_latent_dim"]
            for name, encoder in self._encoders().items():
                width = encoder.out_dim
                if (width < high) if op == "add_nodes" else (width > low):
                    step = int(rng.choice(PART_LATENT_STEPS))
                    seed = int(rng.integers(0, 2**31 - 1))
                    candidates.append(
                        {"module": f"latent:{name}", "op": op, "nodes": step, "seed": seed}
                    )
        if not candidates:
            return None
        return candidates[int(rng.integers(len(candidates)))]

    def mutated(self, plan: Mapping[str, object]) -> MultiInputEncoder:
        p = as_plan(plan)
        new = copy.deepcopy(self)
        module = p.get("module")
        if p["op"] == "activation" and module is None:
            for name, encoder in new._encoders().items():
                new.part_encoders[name] = encoder.mutated(p)
            new.mlp = new.mlp.mutated(p)
        elif module == "mlp":
            new.mlp = new.mlp.mutated(p)
        elif module is not None and module.startswith("part:"):
            name = module.split(":", 1)[1]
            new.part_encoders[name] = new._encoders()[name].mutated(p)
        elif module is not None and module.startswith("latent:"):
            new._resize_part(module.split(":", 1)[1], p)
        else:
            raise ValueError(f"unknown multi-input mutation plan {dict(plan)!r}")
        new.arch = new.architecture()
        return new

    def preserves_function(self, plan: Mapping[str, object]) -> bool:
        """A part's or the MLP's own answer for a change of that module; a part's wider
        latent is read with zero weights (kept), a narrower one is not; an activation
        change of every module at once is not."""
        module = as_plan(plan).get("module")
        if module == "mlp":
            return self.mlp.preserves_function(plan)
        if module is not None and module.startswith("part:"):
            return self._encoders()[module.split(":", 1)[1]].preserves_function(plan)
        if module is not None and module.startswith("latent:"):
            return plan["op"] == "add_nodes"
        return False

    def _resize_part(self, name: str, plan: MutationPlan) -> None:
        encoder = self._encoders()[name]
        delta = int(plan["nodes"]) if plan["op"] == "add_nodes" else -int(plan["nodes"])
        low, high = self.arch["min_latent_dim"], self.arch["max_latent_dim"]
        width = max(low, min(high, encoder.out_dim + delta))
        old_slices = self._slices()
        self.part_encoders[name] = encoder.resized(out_dim=width, seed=int(plan["seed"]))
        self.arch["parts"][name] = self._encoders()[name].architecture()
        new_slices = self._slices()
        mlp_arch = self.mlp.architecture()
        mlp_arch["in_dim"] = sum(stop - start for start, stop in new_slices.values())
        new_mlp = EvolvableMLP(mlp_arch, torch.Generator().manual_seed(int(plan["seed"]) + 1))
        new_mlp = new_mlp.to(self.mlp.linear(0).weight.device)
        with torch.no_grad():
            old_first, new_first = self.mlp.linear(0), new_mlp.linear(0)
            new_mlp.load_state_dict(
                {k: v for k, v in self.mlp.state_dict().items() if not k.startswith("linears.0.")},
                strict=False,
            )
            new_first.bias.copy_(old_first.bias)
            new_first.weight.zero_()
            for part, (start, stop) in new_slices.items():
                old_start, old_stop = old_slices[part]
                keep = min(stop - start, old_stop - old_start)
                new_first.weight[:, start : start + keep] = old_first.weight[
                    :, old_start : old_start + keep
                ]
        self.mlp = new_mlp

    def _slices(self) -> dict[str, tuple[int, int]]:
        """Part name -> its columns in the concatenated features."""
        out, start = {}, 0
        for name, part in self.arch["parts"].items():
            width = _width(part)
            out[name] = (start, start + width)
            start += width
        return out

    def resized(self, *, out_dim: int, seed: int = 0) -> MultiInputEncoder:
        new = copy.deepcopy(self)
        new.mlp = self.mlp.resized(out_dim=out_dim, seed=seed)
        new.arch = new.architecture()
        return new


def _width(part: PartArchitecture) -> int:
    return int(part["out_dim"])
