"""SimBa residual encoder (``arch: simba``; Lee et al. 2024, "SimBa: Simplicity Bias for
Scaling Up Parameters in Deep RL").

``obs -> Linear(in, h) -> num_blocks x [x + W2 relu(W1 LayerNorm(x))] -> LayerNorm ->
Linear(h, out) -> output activation``, with ``W1: h -> scale_factor * h`` and
``W2: scale_factor * h -> h``. The residual stream keeps a linear path from input to
output, which is what lets SimBa grow in size without losing its simplicity bias.

Architecture mutations (within the spec's bounds):

* ``add_layer``: a new last residual block whose output projection starts at zero, so
  the block adds nothing and the encoder's function is preserved exactly;
* ``remove_layer``: drops the last block;
* ``add_nodes`` / ``remove_nodes``: changes the residual width ``hidden_size`` by 16, 32
  or 64; overlapping weights are kept (layer norms over the stream change the function);
* ``resized``: the latent width (output projection), for the network's latent mutations.

SimBa has no hidden activation to mutate (``activation`` is None).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict, cast

import torch
import torch.nn.functional as F
from torch import nn

from agilerl.modules.encoder import EncoderConfig, EvolvableEncoder, MutationPlan, as_plan
from agilerl.modules.mlp import make_activation

if TYPE_CHECKING:
    import numpy as np

    from agilerl.core.value_types import Space

NODE_STEPS = (16, 32, 64)


class SimbaArchitecture(TypedDict, total=False):
    """What ``SimbaEncoder.architecture()`` returns."""

    kind: str
    in_dim: int
    out_dim: int
    hidden_size: int
    num_blocks: int
    scale_factor: int
    output_activation: str | None
    min_blocks: int
    max_blocks: int
    min_mlp_nodes: int
    max_mlp_nodes: int


class SimbaEncoder(EvolvableEncoder):
    """Evolvable SimBa encoder over flat vector observations."""

    kind = "simba"

    def __init__(self, arch: Mapping[str, object], generator: torch.Generator | None = None):
        super().__init__()
        self.arch: SimbaArchitecture = cast(
            SimbaArchitecture, {k: v for k, v in dict(arch).items() if k != "kind"})
        a = self.arch
        width, inner = int(a["hidden_size"]), int(a["hidden_size"]) * int(a["scale_factor"])
        self.input = nn.Linear(int(a["in_dim"]), width)
        self.block_norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(a["num_blocks"]))
        self.block_in = nn.ModuleList(nn.Linear(width, inner) for _ in range(a["num_blocks"]))
        self.block_out = nn.ModuleList(nn.Linear(inner, width) for _ in range(a["num_blocks"]))
        self.out_norm = nn.LayerNorm(width)
        self.output = nn.Linear(width, int(a["out_dim"]))
        self.out_act = make_activation(a.get("output_activation"))
        with torch.no_grad():
            for linear in (self.input, *self.block_in, *self.block_out, self.output):
                _init_linear(linear, generator)

    @classmethod
    def architecture_from_config(
        cls, encoder_config: EncoderConfig, observation_space: Space | int, latent_dim: int
    ) -> SimbaArchitecture:
        from agilerl.core.spaces import vector_width

        in_dim = vector_width(observation_space, "simba")
        c = encoder_config
        hidden = c["hidden_size"]
        if isinstance(hidden, (list, tuple)):  # ``simba: true`` over an MLP-shaped config
            hidden = max(int(h) for h in hidden)
        num_blocks = int(c.get("num_blocks") or 2)
        bounds: SimbaArchitecture = {
            "min_blocks": int(c.get("min_blocks") or 1),
            "max_blocks": int(c.get("max_blocks") or 4),
            "min_mlp_nodes": int(c.get("min_mlp_nodes") or 8),
            "max_mlp_nodes": int(c.get("max_mlp_nodes") or 256),
        }
        if not bounds["min_blocks"] <= num_blocks <= bounds["max_blocks"]:
            raise ValueError(
                f"network.encoder_config.num_blocks {num_blocks} is outside "
                f"[min_blocks, max_blocks] = [{bounds['min_blocks']}, {bounds['max_blocks']}]"
            )
        return {
            "kind": cls.kind,
            "in_dim": in_dim,
            "out_dim": int(latent_dim),
            "hidden_size": int(hidden),
            "num_blocks": num_blocks,
            "scale_factor": int(c.get("scale_factor") or 4),
            "output_activation": c.get("output_activation"),
            **bounds,
        }

    @property
    def out_dim(self) -> int:
        return int(self.arch["out_dim"])

    @property
    def activation(self) -> str | None:
        return None

    def architecture(self) -> SimbaArchitecture:
        return {"kind": self.kind, **self.arch}

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.input(obs)
        for norm, inner, outer in zip(self.block_norms, self.block_in, self.block_out,
                                      strict=True):
            x = x + outer(F.relu(inner(norm(x))))
        return self.out_act(self.output(self.out_norm(x)))

    # ------------------------------------------------------------------ mutation
    def draw_plan(
        self, op: str, rng: np.random.Generator, activations: list[str]
    ) -> MutationPlan | None:
        a = self.arch
        seed = int(rng.integers(0, 2**31 - 1))
        if op == "add_layer" and a["num_blocks"] < a["max_blocks"]:
            return {"op": op, "seed": seed}
        if op == "remove_layer" and a["num_blocks"] > a["min_blocks"]:
            return {"op": op, "seed": seed}
        if op == "add_nodes" and a["hidden_size"] < a["max_mlp_nodes"]:
            return {"op": op, "nodes": int(rng.choice(NODE_STEPS)), "seed": seed}
        if op == "remove_nodes" and a["hidden_size"] > a["min_mlp_nodes"]:
            return {"op": op, "nodes": int(rng.choice(NODE_STEPS)), "seed": seed}
        return None

    def mutated(self, plan: Mapping[str, object]) -> SimbaEncoder:
        p = as_plan(plan)
        op = p["op"]
        arch = self.architecture()
        if op == "add_layer":
            arch["num_blocks"] = min(arch["num_blocks"] + 1, arch["max_blocks"])
        elif op == "remove_layer":
            arch["num_blocks"] = max(arch["num_blocks"] - 1, arch["min_blocks"])
        elif op in ("add_nodes", "remove_nodes"):
            delta = int(p["nodes"]) if op == "add_nodes" else -int(p["nodes"])
            arch["hidden_size"] = max(arch["min_mlp_nodes"],
                                      min(arch["max_mlp_nodes"], arch["hidden_size"] + delta))
        elif op != "activation":  # no hidden activation: an activation change is a copy
            raise ValueError(f"unknown SimBa mutation {op!r}")
        return self._rebuilt(arch, int(p.get("seed", 0)), new_block=op == "add_layer")

    def preserves_function(self, plan: Mapping[str, object]) -> bool:
        """A new block (zero output projection) keeps the function, and so does an
        activation change (SimBa has none); a width change moves the layer norms."""
        return plan["op"] in ("add_layer", "activation")

    def resized(self, *, out_dim: int, seed: int = 0) -> SimbaEncoder:
        arch = self.architecture()
        arch["out_dim"] = int(out_dim)
        return self._rebuilt(arch, seed)

    def _rebuilt(self, arch: SimbaArchitecture, seed: int, new_block: bool = False) -> SimbaEncoder:
        """A new encoder of ``arch`` with this one's weights copied where they overlap."""
        gen = torch.Generator().manual_seed(seed)
        new = SimbaEncoder(arch, gen).to(self.input.weight.device)
        with torch.no_grad():
            if new_block:  # the added block starts as the identity
                last = cast(nn.Linear, new.block_out[-1])
                last.weight.zero_()
                last.bias.zero_()
            old = dict(self.named_parameters())
            for name, param in new.named_parameters():
                if name in old:
                    src = old[name]
                    index = tuple(slice(0, min(d, s)) for d, s in zip(param.shape, src.shape,
                                                                       strict=True))
                    param[index] = src[index]
        return new


def _init_linear(linear: nn.Linear, generator: torch.Generator | None) -> None:
    """torch's default Linear init, drawn from ``generator`` for reproducibility."""
    nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=generator)
    bound = 1 / math.sqrt(linear.in_features) if linear.in_features > 0 else 0
    nn.init.uniform_(linear.bias, -bound, bound, generator=generator)
