"""Evolvable convolutional encoder (``arch: cnn``) for image observations.

``Conv2d -> [GroupNorm(1)] -> activation`` per layer (``channel_size``, ``kernel_size``,
``stride_size``; padding 0 for the layers a manifest describes), then the flattened
feature map through a ``Linear`` to the latent width, followed by the activation (so the
encoder and the head behave as one deeper network, as the MLP encoder does).

Input: a batch of images, channels first ``(N, C, H, W)`` or channels last
``(N, H, W, C)``, as the observation space says: the space is channels last when its last
axis is smaller than its first and is either at most 4 wide or the first two axes are
equal (``(84, 84, 4)``, ``(210, 160, 3)``), else channels first (``(4, 84, 84)``).
Integer (uint8) images are scaled to ``[0, 1]`` here, once, on the network's device: the
buffers keep them uint8.

Mutations, all within the spec's bounds (``min/max_hidden_layers`` convolution layers,
``min/max_channel_size`` channels) and only to shapes that leave every feature map at
least one pixel wide:

* ``add_layer``: a new last layer, kernel 3 (1 on small maps), stride 1, "same" padding,
  initialised as the identity (a Dirac kernel, zero bias): the function is kept when the
  activation is idempotent on its own outputs (ReLU) and there is no norm;
* ``remove_layer``: the last layer goes (function not kept);
* ``add_nodes``: a layer gets 8/16/32 more channels; the next layer (or the output
  ``Linear``) reads them with zero weights, so the function is kept without norm; or,
  half the time, a layer's kernel size changes by one (function not kept);
* ``remove_nodes``: a layer loses channels, or a kernel shrinks (function not kept).

Weights of the layers that stay are copied into the overlapping slice of their new shape.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypedDict, cast

import torch
from torch import nn

from agilerl.modules.encoder import EncoderConfig, EvolvableEncoder, MutationPlan, as_plan
from agilerl.modules.mlp import IDEMPOTENT_ACTIVATIONS, make_activation

if TYPE_CHECKING:
    import numpy as np

    from agilerl.core.value_types import Space

#: Channel steps of ``add_nodes`` / ``remove_nodes``.
CHANNEL_STEPS = (8, 16, 32)
#: Layer lists of the architecture: one entry per convolution.
LAYER_KEYS: tuple[Literal["channel_size", "kernel_size", "stride_size", "padding"], ...] = (
    "channel_size", "kernel_size", "stride_size", "padding")


class CNNArchitecture(TypedDict, total=False):
    """What ``EvolvableCNN.architecture()`` returns."""

    kind: str
    in_channels: int
    height: int
    width: int
    channels_last: bool
    scale: float
    channel_size: list[int]
    kernel_size: list[int]
    stride_size: list[int]
    padding: list[int]
    activation: str | None
    layer_norm: bool
    init_layers: bool
    min_hidden_layers: int
    max_hidden_layers: int
    min_channel_size: int
    max_channel_size: int
    out_dim: int


def channels_last(shape: tuple[int, ...]) -> bool:
    """Whether an image space of ``shape`` keeps its channels on the last axis."""
    first, last = int(shape[0]), int(shape[-1])
    return last < first and (last <= 4 or shape[0] == shape[1])


def feature_sizes(arch: CNNArchitecture) -> list[tuple[int, int]]:
    """Spatial size ``(h, w)`` after each convolution (may be < 1: invalid)."""
    h, w = int(arch["height"]), int(arch["width"])
    sizes = []
    for k, s, p in zip(arch["kernel_size"], arch["stride_size"], arch["padding"], strict=True):
        h = (h + 2 * p - k) // s + 1
        w = (w + 2 * p - k) // s + 1
        sizes.append((h, w))
    return sizes


def valid_architecture(arch: CNNArchitecture) -> bool:
    """Every feature map at least one pixel; layer counts and channels within bounds."""
    layers = len(arch["channel_size"])
    if not arch["min_hidden_layers"] <= layers <= arch["max_hidden_layers"]:
        return False
    low, high = arch["min_channel_size"], arch["max_channel_size"]
    if any(not low <= c <= high for c in arch["channel_size"]):
        return False
    return all(h >= 1 and w >= 1 for h, w in feature_sizes(arch))


class EvolvableCNN(EvolvableEncoder):
    """Convolutions + a linear projection to the latent width (module docstring)."""

    kind = "cnn"

    def __init__(self, arch: Mapping[str, object], generator: torch.Generator | None = None):
        super().__init__()
        self.arch: CNNArchitecture = cast(CNNArchitecture, copy.deepcopy(dict(arch)))
        a = self.arch
        inputs = [int(a["in_channels"]), *a["channel_size"][:-1]]
        self.convs = nn.ModuleList(
            nn.Conv2d(c_in, c_out, k, s, p)
            for c_in, c_out, k, s, p in zip(
                inputs, a["channel_size"], a["kernel_size"], a["stride_size"], a["padding"],
                strict=True,
            )
        )
        self.norms = nn.ModuleList(
            nn.GroupNorm(1, c) if a["layer_norm"] else nn.Identity() for c in a["channel_size"]
        )
        self.acts = nn.ModuleList(make_activation(a["activation"]) for _ in a["channel_size"])
        h, w = feature_sizes(a)[-1]
        self.output = nn.Linear(int(a["channel_size"][-1]) * h * w, int(a["out_dim"]))
        self.out_act = make_activation(a["activation"])
        self._init_weights(generator)

    @classmethod
    def architecture_from_config(
        cls, encoder_config: EncoderConfig, observation_space: Space | int, latent_dim: int
    ) -> CNNArchitecture:
        from gymnasium import spaces

        from agilerl.core.spaces import IncompatibleSpaceError, is_image_space

        if not is_image_space(observation_space):
            raise IncompatibleSpaceError(
                "the cnn encoder takes image observations (a 3-D Box, channels first or "
                f"last), not {observation_space}"
            )
        assert isinstance(observation_space, spaces.Box)  # an image space is a 3-D Box
        shape = tuple(int(d) for d in observation_space.shape)
        last = channels_last(shape)
        c, h, w = (shape[2], shape[0], shape[1]) if last else shape
        cfg = encoder_config
        layers = len(cfg["channel_size"])
        if not len(cfg["kernel_size"]) == len(cfg["stride_size"]) == layers:
            raise ValueError(
                "network.encoder_config: channel_size, kernel_size and stride_size need one "
                f"entry per layer (got {layers}, {len(cfg['kernel_size'])} and "
                f"{len(cfg['stride_size'])})"
            )
        integer = observation_space.dtype is not None and observation_space.dtype.kind in "ui"
        arch: CNNArchitecture = {
            "kind": cls.kind,
            "in_channels": int(c), "height": int(h), "width": int(w), "channels_last": last,
            "scale": 1.0 / 255.0 if integer else 1.0,
            "channel_size": [int(x) for x in cfg["channel_size"]],
            "kernel_size": [int(x) for x in cfg["kernel_size"]],
            "stride_size": [int(x) for x in cfg["stride_size"]],
            "padding": [0] * layers,
            "activation": cfg.get("activation") or "ReLU",
            "layer_norm": bool(cfg.get("layer_norm", False)),
            "init_layers": bool(cfg.get("init_layers", True)),
            "min_hidden_layers": int(cfg.get("min_hidden_layers", 1)),
            "max_hidden_layers": int(cfg.get("max_hidden_layers", 6)),
            "min_channel_size": int(cfg.get("min_channel_size", 8)),
            "max_channel_size": int(cfg.get("max_channel_size", 256)),
            "out_dim": int(latent_dim),
        }  # fmt: skip
        sizes = feature_sizes(arch)
        if any(hh < 1 or ww < 1 for hh, ww in sizes):
            raise ValueError(
                f"network.encoder_config: the convolutions shrink the {h}x{w} image of "
                f"{observation_space} to nothing (feature maps {sizes}); use smaller "
                "kernel_size / stride_size or fewer layers"
            )
        return arch

    # ------------------------------------------------------------------ maths
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs
        if not torch.is_floating_point(x):
            x = x.to(torch.float32)
        if self.arch["scale"] != 1.0:
            x = x * self.arch["scale"]
        if self.arch["channels_last"]:
            x = x.permute(0, 3, 1, 2)
        for conv, norm, act in zip(self.convs, self.norms, self.acts, strict=True):
            x = act(norm(conv(x)))
        return self.out_act(self.output(x.flatten(1)))

    def _init_weights(self, generator: torch.Generator | None) -> None:
        with torch.no_grad():
            for layer in [*self.convs, self.output]:
                layer = cast(nn.Conv2d | nn.Linear, layer)
                if self.arch["init_layers"]:
                    nn.init.orthogonal_(layer.weight, gain=math.sqrt(2), generator=generator)
                    nn.init.zeros_(_bias(layer))
                else:
                    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
                    fan_in = layer.weight[0].numel()
                    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
                    nn.init.uniform_(_bias(layer), -bound, bound, generator=generator)

    # ------------------------------------------------------------------ description
    @property
    def out_dim(self) -> int:
        return int(self.arch["out_dim"])

    def architecture(self) -> CNNArchitecture:
        return copy.deepcopy(self.arch)

    # ------------------------------------------------------------------ mutation
    def draw_plan(
        self, op: str, rng: np.random.Generator, activations: list[str]
    ) -> MutationPlan | None:
        seed = int(rng.integers(0, 2**31 - 1))
        layers = len(self.arch["channel_size"])
        if op in ("add_layer", "remove_layer"):
            plan: MutationPlan = {"op": op, "seed": seed}
            return plan if valid_architecture(_planned(self.arch, plan)) else None
        if op not in ("add_nodes", "remove_nodes"):
            return None
        sign = 1 if op == "add_nodes" else -1
        candidates: list[MutationPlan] = []
        for layer in range(layers):
            step = int(rng.choice(CHANNEL_STEPS))
            candidates.append({"op": op, "layer": layer, "channels": sign * step, "seed": seed})
            candidates.append({"op": op, "layer": layer, "kernel": sign, "seed": seed})
        candidates = [c for c in candidates if _changes(self.arch, c)]
        if not candidates:
            return None
        return candidates[int(rng.integers(len(candidates)))]

    def mutated(self, plan: Mapping[str, object]) -> EvolvableCNN:
        p = as_plan(plan)
        arch = _planned(self.arch, p)
        gen = torch.Generator().manual_seed(int(p.get("seed", 0)))
        new = EvolvableCNN(arch, gen).to(self.output.weight.device)
        with torch.no_grad():
            _transfer(self, new, p)
        return new

    def preserves_function(self, plan: Mapping[str, object]) -> bool:
        """New channels (read with zero weights) and a new identity layer after an
        idempotent activation keep the function, without a norm; nothing else does."""
        if self.arch["layer_norm"]:
            return False
        if plan["op"] == "add_layer":
            return self.arch["activation"] in IDEMPOTENT_ACTIVATIONS
        return plan["op"] == "add_nodes" and "channels" in plan

    def resized(self, *, out_dim: int, seed: int = 0) -> EvolvableCNN:
        arch = self.architecture()
        arch["out_dim"] = int(out_dim)
        new = EvolvableCNN(arch, torch.Generator().manual_seed(int(seed)))
        new = new.to(self.output.weight.device)
        with torch.no_grad():
            _transfer(self, new, {"op": "resize"})
        return new


# ---------------------------------------------------------------------- plans
def _planned(arch: CNNArchitecture, plan: MutationPlan) -> CNNArchitecture:
    """The architecture after ``plan`` (not checked against the bounds)."""
    new = cast(CNNArchitecture, copy.deepcopy(dict(arch)))
    op = plan["op"]
    if op == "add_layer":
        h, w = feature_sizes(new)[-1]
        kernel = 3 if min(h, w) >= 3 else 1
        for key, value in zip(LAYER_KEYS, (new["channel_size"][-1], kernel, 1, kernel // 2),
                              strict=True):
            new[key].append(value)
    elif op == "remove_layer":
        for key in LAYER_KEYS:
            new[key].pop()
    elif op in ("add_nodes", "remove_nodes") and "channels" in plan:
        layer = int(plan["layer"])
        low, high = new["min_channel_size"], new["max_channel_size"]
        new["channel_size"][layer] = max(low, min(high, new["channel_size"][layer]
                                                  + int(plan["channels"])))
    elif op in ("add_nodes", "remove_nodes") and "kernel" in plan:
        layer = int(plan["layer"])
        new["kernel_size"][layer] = max(1, new["kernel_size"][layer] + int(plan["kernel"]))
    elif op == "activation":
        new["activation"] = plan["activation"]
    else:
        raise ValueError(f"unknown CNN mutation plan {dict(plan)!r}")
    return new


def _changes(arch: CNNArchitecture, plan: MutationPlan) -> bool:
    """Whether ``plan`` changes ``arch`` into a valid architecture."""
    new = _planned(arch, plan)
    return new != arch and valid_architecture(new)


def _bias(layer: nn.Module) -> torch.Tensor:
    return cast(torch.Tensor, layer.bias)


def _copy_overlap(dst: torch.Tensor, src: torch.Tensor) -> None:
    index = tuple(slice(0, min(d, s)) for d, s in zip(dst.shape, src.shape, strict=True))
    dst[index] = src[index]


def _transfer(old: EvolvableCNN, new: EvolvableCNN, plan: MutationPlan) -> None:
    """Copy weights by layer position into the overlapping slices (module docstring)."""
    kept = min(len(old.convs), len(new.convs))
    for i in range(kept):
        dst, src = cast(nn.Conv2d, new.convs[i]), cast(nn.Conv2d, old.convs[i])
        if dst.weight.shape[1] > src.weight.shape[1]:
            dst.weight[:, src.weight.shape[1]:] = 0.0  # new input channels are read as zero
        if dst.kernel_size == src.kernel_size:
            _copy_overlap(dst.weight, src.weight)
        _copy_overlap(_bias(dst), _bias(src))
        for dst_p, src_p in zip(new.norms[i].parameters(), old.norms[i].parameters(),
                                strict=True):
            _copy_overlap(dst_p, src_p)
        for dst_p, src_p in zip(new.acts[i].parameters(), old.acts[i].parameters(),
                                strict=True):
            _copy_overlap(dst_p, src_p)
    if plan["op"] == "add_layer":
        added = cast(nn.Conv2d, new.convs[-1])
        nn.init.dirac_(added.weight)
        _bias(added).zero_()
    old_w, new_w = old.output.weight, new.output.weight
    if old_w.shape[1] == new_w.shape[1] or plan["op"] == "add_layer":
        _copy_overlap(new_w, old_w)
    elif "channels" in plan:
        # Last-layer channels flatten channel-major: the kept ones come first; added ones
        # are read with zero weights.
        new_w[:, old_w.shape[1]:] = 0.0
        _copy_overlap(new_w, old_w)
    _copy_overlap(new.output.bias, old.output.bias)
