"""An evolvable multi-layer perceptron.

``EvolvableMLP`` is a plain MLP (``Linear -> [LayerNorm] -> activation`` per hidden layer,
then an output ``Linear`` and optional output activation) described by a small
architecture dict. Mutations never edit a module in place: ``mutated(plan)`` returns a new
module with the weights transferred, so the old one (and its optimizer) stay valid until
the caller swaps them.

Function preservation (outputs right after the mutation equal those before):

* ``add_nodes``: the new units' outgoing weights start at zero, so the next layer sees
  exactly what it saw before. With layer norm, the new units' incoming weights are the
  mean of the existing rows (their pre-norm value equals the layer mean, so the mean is
  unchanged) and the old units' norm gains are scaled by ``sqrt(n / (n + k))`` to undo
  the variance shrink; equal up to the norm's epsilon (allclose).
* ``add_layer``: the new last hidden layer starts as the identity map. This is exact
  when the activation is idempotent on the previous layer's outputs (``ReLU`` after
  ``ReLU``, ``Identity``) and there is no layer norm; otherwise it is the closest
  cheap start and the function changes.
* ``remove_layer`` / ``remove_nodes`` / ``activation`` cannot preserve the function.
* ``resize_input``/``resize_output`` (latent width changes): new input columns start at
  zero; new output units get fresh weights (a following layer's zero columns hide them).

``preserves_function(plan)`` states which case a plan is (every encoder answers it too);
mutation restarts targets and optimizers after the changes it says alter the function.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, ClassVar, TypeAlias, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import nn

from agilerl.modules.encoder import (
    EncoderConfig,
    EvolvableEncoder,
    MLPSettings,
    MutationPlan,
    as_plan,
)

if TYPE_CHECKING:
    import numpy as np

    from agilerl.core.value_types import Space

#: Activation names accepted in manifests (``activation`` / ``output_activation``).
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "ReLU": nn.ReLU,
    "Tanh": nn.Tanh,
    "GELU": nn.GELU,
    "ELU": nn.ELU,
    "LeakyReLU": nn.LeakyReLU,
    "Sigmoid": nn.Sigmoid,
    "Softplus": nn.Softplus,
    "Softmax": lambda: nn.Softmax(dim=-1),
    "PReLU": nn.PReLU,
    "Identity": nn.Identity,
}

#: Activations ``f`` with ``f(f(x)) == f(x)`` (None: the identity): a new identity layer
#: after one of them passes the values it receives through unchanged.
IDEMPOTENT_ACTIVATIONS = frozenset({"ReLU", "Identity", None})

class MLPLayout(MLPSettings, total=False):
    """An MLP's architecture: its sizes and settings (what mutations must respect)."""

    in_dim: int
    out_dim: int
    hidden_size: list[int]


class MLPArchitecture(MLPLayout, total=False):
    """What ``EvolvableMLP.architecture()`` returns (``ARCH_KEYS``; ``kind`` for an
    encoder, ``noise_std`` for a noisy MLP)."""

    kind: str
    noise_std: float


#: The fields of an MLP architecture dict: its sizes, then its settings.
ARCH_KEYS = (*(k for k in MLPLayout.__annotations__ if k not in MLPSettings.__annotations__),
             *MLPSettings.__annotations__)


#: A layer's activation as the forward pass calls it (a torch function or the module).
Activation: TypeAlias = Callable[[torch.Tensor], torch.Tensor]
#: ``F.layer_norm``'s arguments after the input: shape, weight, bias, eps.
NormArgs: TypeAlias = tuple[list[int], torch.Tensor, torch.Tensor, float]
#: Per layer: weight, bias, layer-norm arguments or None, activation.
LayerPlan: TypeAlias = tuple[torch.Tensor, torch.Tensor, "NormArgs | None", Activation]

MLPT = TypeVar("MLPT", bound="EvolvableMLP")


def make_activation(name: str | None) -> nn.Module:
    """Activation module from its manifest name (``None`` -> identity)."""
    if name is None:
        return nn.Identity()
    try:
        return ACTIVATIONS[name]()
    except KeyError:
        raise ValueError(
            f"unsupported activation {name!r}; expected one of {sorted(ACTIVATIONS)}"
        ) from None


class EvolvableMLP(nn.Module):
    """MLP built from an architecture dict (see ``ARCH_KEYS``)."""

    def __init__(self, arch: Mapping[str, object], generator: torch.Generator | None = None):
        super().__init__()
        self.arch: MLPArchitecture = cast(
            MLPArchitecture, {k: copy.deepcopy(arch[k]) for k in ARCH_KEYS})
        self.arch["hidden_size"] = [int(h) for h in self.arch["hidden_size"]]
        sizes = [self.arch["in_dim"], *self.arch["hidden_size"], self.arch["out_dim"]]
        self.linears = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=False)
        )
        self.norms = nn.ModuleList(
            nn.LayerNorm(h) if self.arch["layer_norm"] else nn.Identity()
            for h in self.arch["hidden_size"]
        )
        self.acts = nn.ModuleList(
            make_activation(self.arch["activation"]) for _ in self.arch["hidden_size"]
        )
        self.out_act = make_activation(self.arch["output_activation"])
        self._init_weights(generator)

    # ------------------------------------------------------------------ maths
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Functional calls over cached parameter references: the same maths as calling the
        # submodules, without per-module dispatch overhead (this runs on every env step).
        plan = self.__dict__.get("_plan") or self._make_plan()
        weight, bias, _, act = plan[-1]
        out = F.linear(self._hidden(plan, x), weight, bias)
        if self.measures_output and out.requires_grad:
            out.register_hook(partial(self.keep_gradient, len(plan) - 1))
        return act(out)

    def penultimate(self, x: torch.Tensor) -> torch.Tensor:
        """The input of the output layer: the last hidden activation (``x`` itself without
        hidden layers). Neural bandits read the output's gradient from it."""
        return self._hidden(self.__dict__.get("_plan") or self._make_plan(), x)

    def _hidden(self, plan: list[LayerPlan], x: torch.Tensor) -> torch.Tensor:
        for layer, (weight, bias, norm, act) in enumerate(plan[:-1]):
            x = F.linear(x, weight, bias)
            if norm is not None:
                x = F.layer_norm(x, norm[0], norm[1], norm[2], norm[3])
            if x.requires_grad:
                x.register_hook(partial(self.keep_gradient, layer))
            x = act(x)
        return x

    # ------------------------------------------------------------------ dormancy
    #: Whether the output layer's pre-activation is measured too (an encoder's latent).
    measures_output: ClassVar[bool] = False

    def keep_gradient(self, layer: int, gradient: torch.Tensor) -> None:
        """Remember ``gradient`` (w.r.t. layer ``layer``'s pre-activation: after its layer
        norm, before its activation) as that layer's latest; ReGraMa reads it
        (:mod:`agilerl.hpo.dormant`). Called by backward passes: autograd's, through
        tensor hooks the forward pass registers, and the closed-form one."""
        kept = self.__dict__.get("_latest_gradients")
        if kept is None or len(kept) != len(self.linears):
            kept = self.__dict__["_latest_gradients"] = [None] * len(self.linears)
        kept[layer] = gradient

    def latest_gradients(self) -> list[torch.Tensor | None]:
        """Per layer, the gradient :meth:`keep_gradient` kept last (None: none yet)."""
        kept = self.__dict__.get("_latest_gradients")
        return list(kept) if kept is not None else [None] * len(self.linears)

    def measured_layers(self) -> int:
        """How many layers, from the first, are measured: the hidden ones, and the output
        layer when :attr:`measures_output`."""
        return len(self.linears) - (0 if self.measures_output else 1)

    def _make_plan(self) -> list[LayerPlan]:
        """(weight, bias, layer-norm args or None, activation) per layer, cached.

        Parameters are updated in place by optimizers and ``load_state_dict``, and
        ``deepcopy`` maps the cached references to the copied parameters, so the cache
        stays valid; mutations build new modules (with their own cache).
        """
        plan: list[LayerPlan] = []
        for i in range(len(self.linears)):
            linear = self.linear(i)
            if i < len(self.norms):
                norm_mod = self.norms[i]
                norm = (
                    (list(norm_mod.normalized_shape), norm_mod.weight, norm_mod.bias, norm_mod.eps)
                    if isinstance(norm_mod, nn.LayerNorm)
                    else None
                )
                act = _functional(self.acts[i])
            else:
                norm, act = None, _functional(self.out_act)
            plan.append((linear.weight, linear.bias, norm, act))
        self.__dict__["_plan"] = plan
        return plan

    def linear(self, i: int) -> nn.Linear:
        """The ``i``-th linear layer (the last one is the output layer)."""
        return cast(nn.Linear, self.linears[i])

    def norm(self, i: int) -> nn.LayerNorm:
        """The layer norm after hidden layer ``i`` (only when ``layer_norm``)."""
        return cast(nn.LayerNorm, self.norms[i])

    def _init_weights(self, generator: torch.Generator | None) -> None:
        with torch.no_grad(), _one_thread():
            for i in range(len(self.linears)):
                linear = self.linear(i)
                _init_linear(linear, generator, orthogonal=self.arch["init_layers"])
                if i == len(self.linears) - 1 and self.arch["output_vanish"]:
                    # Small output layer: initial outputs near zero (common RL practice).
                    linear.weight.mul_(0.1)
                    linear.bias.zero_()

    # ------------------------------------------------------------------ mutation
    def architecture(self) -> MLPArchitecture:
        return copy.deepcopy(self.arch)

    def can(self, op: str) -> bool:
        """Whether ``op`` is allowed within the min/max bounds."""
        hidden, a = self.arch["hidden_size"], self.arch
        if op == "add_layer":
            return len(hidden) < a["max_hidden_layers"]
        if op == "remove_layer":
            return len(hidden) > a["min_hidden_layers"]
        if op == "add_nodes":
            return any(h < a["max_mlp_nodes"] for h in hidden)
        if op == "remove_nodes":
            return any(h > a["min_mlp_nodes"] for h in hidden)
        return op == "activation"

    def mutated(self: MLPT, plan: Mapping[str, object]) -> MLPT:
        """A new MLP with mutation ``plan`` applied and weights transferred.

        ``plan``: ``{"op": ..., "seed": int, ...}`` with ``layer``/``nodes`` for node
        changes and ``activation`` for activation changes (see ``draw_mlp_plan``).
        """
        p = as_plan(plan)
        op = p["op"]
        gen = torch.Generator().manual_seed(int(p["seed"]))
        arch = self.architecture()
        hidden = arch["hidden_size"]
        if op == "add_layer":
            hidden.append(hidden[-1])
        elif op == "remove_layer":
            hidden.pop()
        elif op in ("add_nodes", "remove_nodes"):
            layer = int(p["layer"])
            delta = int(p["nodes"]) if op == "add_nodes" else -int(p["nodes"])
            hidden[layer] = _clip(
                hidden[layer] + delta, arch["min_mlp_nodes"], arch["max_mlp_nodes"]
            )
        elif op == "activation":
            arch["activation"] = p["activation"]
        else:
            raise ValueError(f"unknown MLP mutation {op!r}")
        new = type(self)(arch, gen).to(self.linear(0).weight.device)
        with torch.no_grad():
            if op == "add_layer":
                _transfer_add_layer(self, new)
            elif op == "add_nodes":
                _transfer_add_nodes(self, new, int(p["layer"]), gen)
            else:
                _transfer_overlap(self, new)
        return new

    def preserves_function(self, plan: Mapping[str, object]) -> bool:
        """Whether ``self.mutated(plan)`` computes what this MLP computes (to rounding; with
        layer norm, to the norm's epsilon): new units do (their outgoing weights start at
        zero), and so does a new identity layer when neither a layer norm nor the
        activation changes the values it passes on. Every other change does not."""
        if plan["op"] == "add_nodes":
            return True
        if plan["op"] == "add_layer":
            return (not self.arch["layer_norm"]
                    and self.arch["activation"] in IDEMPOTENT_ACTIVATIONS)
        return False

    def parameter_sources(self, plan: Mapping[str, object]) -> dict[str, str | None]:
        """Parameters of ``self.mutated(plan)`` that do not continue the parameter of the
        same name: new name -> old name (None: a new parameter).

        Adding or removing a hidden layer moves the output layer to another index of
        ``linears``; its weights move with it (``_transfer_overlap``), and so must whatever
        is kept per parameter (optimizer moments). A layer added before it starts new.
        """
        op = plan["op"]
        if op not in ("add_layer", "remove_layer"):
            return {}
        last = len(self.linears) - 1
        moved_to = last + 1 if op == "add_layer" else last - 1
        names = [name for name, _ in self.linears[last].named_parameters()]
        sources: dict[str, str | None] = {
            f"linears.{moved_to}.{n}": f"linears.{last}.{n}" for n in names
        }
        if op == "add_layer":
            sources.update({f"linears.{last}.{n}": None for n in names})
        return sources

    def resized(
        self: MLPT, *, in_dim: int | None = None, out_dim: int | None = None, seed: int = 0
    ) -> MLPT:
        """A new MLP with a different input or output width, weights transferred.

        New input columns are zero (the extra inputs are ignored at first); new output
        units get fresh weights.
        """
        arch = self.architecture()
        if in_dim is not None:
            arch["in_dim"] = int(in_dim)
        if out_dim is not None:
            arch["out_dim"] = int(out_dim)
        gen = torch.Generator().manual_seed(int(seed))
        new = type(self)(arch, gen).to(self.linear(0).weight.device)
        with torch.no_grad():
            _transfer_overlap(self, new, zero_new_inputs=True)
        return new


class MLPEncoder(EvolvableMLP, EvolvableEncoder):
    """``EvolvableMLP`` as a network encoder (``arch: mlp``) over flat vector observations.

    Its parameters are named as the MLP's, and its architecture is the MLP's plus
    ``kind``. The latent's activation is the encoder's ``output_activation`` if set, else
    its hidden ``activation`` (so encoder + head behave as one deeper MLP).
    """

    kind = "mlp"
    measures_output = True
    arch: MLPArchitecture

    @classmethod
    def architecture_from_config(
        cls, encoder_config: EncoderConfig, observation_space: Space | int, latent_dim: int
    ) -> MLPArchitecture:
        from agilerl.core.spaces import (
            IncompatibleSpaceError,
            composite_parts,
            flat_dim,
            is_image_space,
        )

        if is_image_space(observation_space) or composite_parts(observation_space) is not None:
            kind = "cnn" if is_image_space(observation_space) else "multiinput"
            raise IncompatibleSpaceError(
                f"the mlp encoder takes flat vector observations, not {observation_space}; "
                f"use encoder arch {kind!r} (or leave the network's arch out to infer it)"
            )
        output = encoder_config.get("output_activation") or encoder_config["activation"]
        return {
            "kind": cls.kind,
            **mlp_architecture(encoder_config, flat_dim(observation_space), latent_dim, output),
        }

    @property
    def out_dim(self) -> int:
        return int(self.arch["out_dim"])

    def architecture(self) -> MLPArchitecture:
        return {"kind": self.kind, **super().architecture()}

    def draw_plan(
        self, op: str, rng: np.random.Generator, activations: list[str]
    ) -> MutationPlan | None:
        return draw_mlp_plan(self, op, rng, activations)

    def resized(  # type: ignore[override]
        self, *, in_dim: int | None = None, out_dim: int | None = None, seed: int = 0
    ) -> MLPEncoder:
        return cast(MLPEncoder, super().resized(in_dim=in_dim, out_dim=out_dim, seed=seed))


def mlp_architecture(
    mlp_spec: EncoderConfig, in_dim: int, out_dim: int, output_activation: str | None = None
) -> MLPArchitecture:
    """Architecture dict for ``EvolvableMLP`` from an ``MlpSpec``-shaped mapping."""
    hidden = mlp_spec["hidden_size"]
    assert not isinstance(hidden, int), "an MLP spec lists its hidden layer widths"
    return {
        "in_dim": int(in_dim),
        "out_dim": int(out_dim),
        "hidden_size": [int(h) for h in hidden],
        "activation": mlp_spec["activation"],
        "output_activation": output_activation,
        "layer_norm": bool(mlp_spec["layer_norm"]),
        "init_layers": bool(mlp_spec["init_layers"]),
        "output_vanish": bool(mlp_spec["output_vanish"]),
        "min_hidden_layers": int(mlp_spec["min_hidden_layers"]),
        "max_hidden_layers": int(mlp_spec["max_hidden_layers"]),
        "min_mlp_nodes": int(mlp_spec["min_mlp_nodes"]),
        "max_mlp_nodes": int(mlp_spec["max_mlp_nodes"]),
    }


def draw_mlp_plan(
    mlp: EvolvableMLP, op: str, rng: np.random.Generator, activations: list[str]
) -> MutationPlan | None:
    """Draw the random details of an ``op`` on ``mlp`` (numpy Generator); None if impossible."""
    if not mlp.can(op):
        return None
    plan: MutationPlan = {"op": op, "seed": int(rng.integers(0, 2**31 - 1))}
    hidden, a = mlp.arch["hidden_size"], mlp.arch
    if op == "add_nodes":
        layers = [i for i, h in enumerate(hidden) if h < a["max_mlp_nodes"]]
        plan["layer"] = int(rng.choice(layers))
        plan["nodes"] = int(rng.choice([16, 32, 64]))
    elif op == "remove_nodes":
        layers = [i for i, h in enumerate(hidden) if h > a["min_mlp_nodes"]]
        plan["layer"] = int(rng.choice(layers))
        plan["nodes"] = int(rng.choice([16, 32, 64]))
    elif op == "activation":
        choices = [x for x in activations if x != a["activation"]]
        if not choices:
            return None
        plan["activation"] = str(rng.choice(choices))
    return plan


# ---------------------------------------------------------------------- helpers
def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


_PARAMETER_FREE: dict[type[nn.Module], Activation] = {
    nn.ReLU: torch.relu,
    nn.Tanh: torch.tanh,
    nn.Sigmoid: torch.sigmoid,
    nn.Identity: _identity,
}


def _functional(module: nn.Module) -> Activation:
    """A cheap callable equal to ``module`` (the module itself when it has state)."""
    return _PARAMETER_FREE.get(type(module), module)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run torch ops on one intra-op thread for the duration.

    Orthogonal init is a QR decomposition: with several threads its first few calls in
    a process take ~80 ms each on a 2-core machine (under 1 ms on one thread), which was
    most of the start-up before the first training step; and its result depends on the
    thread count, so one thread also makes initial weights the same on every machine.
    """
    previous = torch.get_num_threads()
    if previous == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _clip(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def _init_linear(linear: nn.Linear, generator: torch.Generator | None, *, orthogonal: bool) -> None:
    if orthogonal:
        nn.init.orthogonal_(linear.weight, gain=math.sqrt(2), generator=generator)
        linear.bias.zero_()
    else:
        # torch's default Linear init, drawn from our generator for reproducibility
        nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=generator)
        bound = 1 / math.sqrt(linear.in_features) if linear.in_features > 0 else 0
        nn.init.uniform_(linear.bias, -bound, bound, generator=generator)


def _copy_overlap(dst: torch.Tensor, src: torch.Tensor) -> None:
    index = tuple(slice(0, min(d, s)) for d, s in zip(dst.shape, src.shape, strict=False))
    dst[index] = src[index]


def _copy_module_overlap(dst: nn.Module, src: nn.Module) -> None:
    src_params = dict(src.named_parameters())
    for name, param in dst.named_parameters():
        if name in src_params:
            _copy_overlap(param.data, src_params[name].data)


def _transfer_overlap(
    old: EvolvableMLP, new: EvolvableMLP, *, zero_new_inputs: bool = False
) -> None:
    """Copy every weight into the overlapping slice of its counterpart by position.

    Hidden layers are matched by index; the output layer maps to the output layer.
    """
    n_old, n_new = len(old.linears), len(new.linears)
    pairs = [(i, i) for i in range(min(n_old, n_new) - 1)] + [(n_new - 1, n_old - 1)]
    for new_i, old_i in pairs:
        dst, src = new.linear(new_i), old.linear(old_i)
        if zero_new_inputs and new_i == 0 and dst.in_features > src.in_features:
            dst.weight[:, src.in_features :] = 0.0
        _copy_overlap(dst.weight.data, src.weight.data)
        _copy_overlap(dst.bias.data, src.bias.data)
    for i in range(min(len(old.norms), len(new.norms))):
        _copy_module_overlap(new.norm(i), old.norm(i))
        _copy_module_overlap(new.acts[i], old.acts[i])
    _copy_module_overlap(new.out_act, old.out_act)


def _transfer_add_layer(old: EvolvableMLP, new: EvolvableMLP) -> None:
    """New last hidden layer = identity; the old output layer moves after it unchanged."""
    _transfer_overlap(old, new)
    inserted = new.linear(-2)
    inserted.weight.copy_(torch.eye(inserted.out_features, inserted.in_features))
    inserted.bias.zero_()
    new.linear(-1).load_state_dict(old.linear(-1).state_dict())


def _transfer_add_nodes(
    old: EvolvableMLP, new: EvolvableMLP, layer: int, gen: torch.Generator
) -> None:
    """Grow hidden layer ``layer``: new units have zero outgoing weights (function kept)."""
    n_old = old.linear(layer).out_features
    n_new = new.linear(layer).out_features
    grown_in, grown_out = new.linear(layer), new.linear(layer + 1)
    fresh_w, fresh_b = grown_in.weight[n_old:].clone(), grown_in.bias[n_old:].clone()
    _transfer_overlap(old, new)
    grown_out.weight[:, n_old:] = 0.0
    if not new.arch["layer_norm"]:
        grown_in.weight[n_old:] = fresh_w
        grown_in.bias[n_old:] = fresh_b
        return
    # Layer norm: the new pre-norm values equal the layer mean (linear in the input), so
    # the mean is unchanged and the variance shrinks by n_old / n_new; rescale the gains.
    src = old.linear(layer)
    grown_in.weight[n_old:] = src.weight.mean(dim=0, keepdim=True)
    grown_in.bias[n_old:] = src.bias.mean()
    norm = new.norm(layer)
    norm.weight[:n_old] = old.norm(layer).weight * math.sqrt(n_old / n_new)
    norm.weight[n_old:] = 1.0
    # A positive offset keeps the new units alive (they would otherwise output act(0)).
    norm.bias[n_old:] = torch.empty(n_new - n_old).uniform_(0.1, 1.0, generator=gen)


def measured_slots(mlps: Sequence[EvolvableMLP]) -> list[tuple[EvolvableMLP, int] | None]:
    """Per layer of ``mlps`` run one after another: (its MLP, its index there) when the
    gradient w.r.t. its pre-activation is kept for ReGraMa (``keep_gradient``), else None."""
    return [(mlp, i) if i < mlp.measured_layers() else None
            for mlp in mlps for i in range(len(mlp.linears))]
