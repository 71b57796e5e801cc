"""An evolvable LSTM encoder: stacked LSTM layers, then a linear map to the latent width.

``LSTMEncoder`` is described by a small architecture dict (``ARCH_KEYS``) like
``EvolvableMLP`` and mutates the same way: ``mutated(plan)`` returns a new module with the
weights transferred. Mutations stay inside the manifest's ``LstmSpec`` bounds
(``min_hidden_state_size``/``max_hidden_state_size``, ``min_layers``/``max_layers``).

The recurrent state of a batch is one tensor per encoder, batch first:
``(batch, 2 * num_layers, hidden_state_size)`` holding ``h`` then ``c`` of every layer, so
selecting or zeroing the rows of some sub-envs is plain indexing.

Function preservation:

* ``add_nodes``: new hidden units get zero input, recurrent and bias weights (and zero
  columns wherever they feed another layer or the output map). Their gates are then 0.5,
  their cell input ``tanh(0) = 0``, so from a zero state their cell and hidden values stay
  exactly 0 and the outputs equal those before the mutation.
* ``add_layer``: a new top layer with fresh weights (no LSTM layer is an identity map);
  ``remove_layer`` / ``remove_nodes`` cannot preserve the function.
* ``activation``: an LSTM has no hidden activation; the plan returns an unchanged copy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict, cast

import torch
from torch import nn

from agilerl.modules.encoder import EncoderConfig, EvolvableEncoder, MutationPlan, as_plan
from agilerl.modules.mlp import _init_linear, _one_thread, make_activation

if TYPE_CHECKING:
    import numpy as np

    from agilerl.core.value_types import Space

#: Architecture fields of an LSTM encoder.
ARCH_KEYS = (
    "kind",
    "in_dim",
    "out_dim",
    "hidden_state_size",
    "num_layers",
    "dropout",
    "output_activation",
    "min_hidden_state_size",
    "max_hidden_state_size",
    "min_layers",
    "max_layers",
)
#: Hidden-state width changes mutation may draw.
NODE_STEPS = (8, 16, 32)
#: Activation of the latent (the LSTM's own outputs are already tanh-bounded).
LATENT_ACTIVATION = "Tanh"


class LSTMArchitecture(TypedDict, total=False):
    """What ``LSTMEncoder.architecture()`` returns (``ARCH_KEYS``)."""

    kind: str
    in_dim: int
    out_dim: int
    hidden_state_size: int
    num_layers: int
    dropout: float
    output_activation: str | None
    min_hidden_state_size: int
    max_hidden_state_size: int
    min_layers: int
    max_layers: int


class LSTMEncoder(EvolvableEncoder):
    """``nn.LSTM`` over the observation, then ``Linear(hidden, out_dim)`` + activation."""

    kind = "lstm"
    #: The encoder carries a state across steps (only recurrent algorithms can use it).
    recurrent = True

    def __init__(self, arch: Mapping[str, object], generator: torch.Generator | None = None):
        super().__init__()
        self.arch: LSTMArchitecture = cast(
            LSTMArchitecture, {k: copy.deepcopy(arch[k]) for k in ARCH_KEYS}
        )
        self.arch["kind"] = self.kind
        a = self.arch
        self.lstm = nn.LSTM(
            int(a["in_dim"]),
            int(a["hidden_state_size"]),
            num_layers=int(a["num_layers"]),
            dropout=float(a["dropout"]) if int(a["num_layers"]) > 1 else 0.0,
        )
        self.out = nn.Linear(int(a["hidden_state_size"]), int(a["out_dim"]))
        self.out_act = make_activation(a["output_activation"])
        self._init_weights(generator)

    def _init_weights(self, generator: torch.Generator | None) -> None:
        bound = 1.0 / float(self.arch["hidden_state_size"]) ** 0.5
        with torch.no_grad(), _one_thread():
            for param in self.lstm.parameters():  # torch's default LSTM init, our generator
                param.uniform_(-bound, bound, generator=generator)
            _init_linear(self.out, generator, orthogonal=False)

    @classmethod
    def architecture_from_config(
        cls, encoder_config: EncoderConfig, observation_space: Space | int, latent_dim: int
    ) -> LSTMArchitecture:
        """Architecture for an ``LstmSpec``-shaped ``encoder_config`` over a flat vector
        observation (a Gymnasium space, or an int: the vector's width)."""
        from agilerl.core.spaces import vector_width

        in_dim = vector_width(observation_space, "lstm")
        return lstm_arch(encoder_config, in_dim, latent_dim, LATENT_ACTIVATION)

    @property
    def out_dim(self) -> int:
        return int(self.arch["out_dim"])

    @property
    def activation(self) -> str | None:
        """None: an LSTM has no hidden activation to mutate."""
        return None

    # ------------------------------------------------------------------ state
    @property
    def state_shape(self) -> tuple[int, int]:
        """Per-row recurrent state shape: ``(2 * num_layers, hidden_state_size)``."""
        return 2 * int(self.arch["num_layers"]), int(self.arch["hidden_state_size"])

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """Zero state for ``batch`` rows (the state at every episode start)."""
        return torch.zeros((batch, *self.state_shape), device=device)

    def _split(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        layers = int(self.arch["num_layers"])
        packed = state.transpose(0, 1)
        return packed[:layers].contiguous(), packed[layers:].contiguous()

    @staticmethod
    def _join(h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return torch.cat((h, c), dim=0).transpose(0, 1)

    # ------------------------------------------------------------------ maths
    def forward(  # type: ignore[override]  # a recurrent encoder also takes its state
        self, x: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step for a batch: ``x`` ``(B, in_dim)``, ``state`` ``(B, 2L, H)`` ->
        ``(latent (B, out_dim), next state)``."""
        out, (h, c) = self.lstm(x.unsqueeze(0), self._split(state))
        return self.out_act(self.out(out.squeeze(0))), self._join(h, c)

    def sequence(
        self, x: torch.Tensor, state: torch.Tensor, starts: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Latents of sequences: ``x`` ``(T, B, in_dim)`` from ``state`` ``(B, 2L, H)``.

        ``starts`` ``(T, B)`` (bool): rows whose episode starts at that step get a zero
        state there (step 0 uses ``state`` as given). Runs of steps without a start go
        through the LSTM in one call.
        """
        h, c = self._split(state)
        steps = x.shape[0]
        cuts = [0]
        if starts is not None and steps > 1:
            cuts += [int(t) for t in torch.nonzero(starts[1:].any(dim=1)).flatten() + 1]
        cuts.append(steps)
        outputs = []
        for begin, end in zip(cuts[:-1], cuts[1:], strict=False):
            if begin > 0 and starts is not None:
                keep = (~starts[begin]).to(h.dtype).view(1, -1, 1)
                h, c = h * keep, c * keep
            out, (h, c) = self.lstm(x[begin:end], (h, c))
            outputs.append(out)
        hidden = torch.cat(outputs, dim=0) if len(outputs) > 1 else outputs[0]
        return self.out_act(self.out(hidden))

    # ------------------------------------------------------------------ mutation
    def architecture(self) -> LSTMArchitecture:
        return copy.deepcopy(self.arch)

    def can(self, op: str) -> bool:
        """Whether ``op`` is allowed within the architecture's bounds."""
        a = self.arch
        if op == "add_layer":
            return a["num_layers"] < a["max_layers"]
        if op == "remove_layer":
            return a["num_layers"] > max(1, a["min_layers"])
        if op == "add_nodes":
            return a["hidden_state_size"] < a["max_hidden_state_size"]
        if op == "remove_nodes":
            return a["hidden_state_size"] > a["min_hidden_state_size"]
        return False

    def draw_plan(
        self, op: str, rng: np.random.Generator, activations: list[str]
    ) -> MutationPlan | None:
        """Random details of ``op`` (numpy Generator ``rng``); None if not possible."""
        if not self.can(op):
            return None
        plan: MutationPlan = {"op": op, "seed": int(rng.integers(0, 2**31 - 1))}
        if op in ("add_nodes", "remove_nodes"):
            plan["nodes"] = int(rng.choice(NODE_STEPS))
        return plan

    def mutated(self, plan: Mapping[str, object]) -> LSTMEncoder:
        """A new encoder with ``plan`` applied and the weights transferred."""
        p = as_plan(plan)
        op = p["op"]
        arch = self.architecture()
        if op == "add_layer":
            arch["num_layers"] += 1
        elif op == "remove_layer":
            arch["num_layers"] -= 1
        elif op in ("add_nodes", "remove_nodes"):
            delta = int(p["nodes"]) if op == "add_nodes" else -int(p["nodes"])
            arch["hidden_state_size"] = max(
                arch["min_hidden_state_size"],
                min(arch["max_hidden_state_size"], arch["hidden_state_size"] + delta),
            )
        elif op == "activation":
            return copy.deepcopy(self)
        else:
            raise ValueError(f"unknown LSTM mutation {op!r}")
        return self._rebuilt(arch, int(p.get("seed", 0)))

    def preserves_function(self, plan: Mapping[str, object]) -> bool:
        """New hidden units (zero weights, so they stay 0) keep the function, and so does
        an activation change (an LSTM has none); a new layer starts fresh."""
        return plan["op"] in ("add_nodes", "activation")

    def resized(self, *, out_dim: int, seed: int = 0) -> LSTMEncoder:
        """A new encoder with another latent width (new latent units: fresh weights)."""
        arch = self.architecture()
        arch["out_dim"] = int(out_dim)
        return self._rebuilt(arch, seed)

    def _rebuilt(self, arch: LSTMArchitecture, seed: int) -> LSTMEncoder:
        gen = torch.Generator().manual_seed(seed)
        new = LSTMEncoder(arch, gen).to(self.out.weight.device)
        with torch.no_grad():
            _transfer(self, new)
        return new


def _transfer(old: LSTMEncoder, new: LSTMEncoder) -> None:
    """Copy overlapping weights gate by gate; zero what connects to new hidden units."""
    h_old, h_new = old.arch["hidden_state_size"], new.arch["hidden_state_size"]
    h = min(h_old, h_new)
    grown = h_new > h_old
    for layer in range(min(old.arch["num_layers"], new.arch["num_layers"])):
        for kind in ("ih", "hh"):
            w_old = getattr(old.lstm, f"weight_{kind}_l{layer}")
            w_new = getattr(new.lstm, f"weight_{kind}_l{layer}")
            b_old = getattr(old.lstm, f"bias_{kind}_l{layer}")
            b_new = getattr(new.lstm, f"bias_{kind}_l{layer}")
            cols = min(w_old.shape[1], w_new.shape[1])
            for gate in range(4):  # input, forget, cell, output gates, stacked
                rows_new = slice(gate * h_new, gate * h_new + h)
                rows_old = slice(gate * h_old, gate * h_old + h)
                if grown:  # new units: no input, no bias -> they stay at zero
                    w_new[gate * h_new + h_old : (gate + 1) * h_new] = 0.0
                    b_new[gate * h_new + h_old : (gate + 1) * h_new] = 0.0
                w_new[rows_new, :cols] = w_old[rows_old, :cols]
                b_new[rows_new] = b_old[rows_old]
            if w_new.shape[1] > w_old.shape[1]:  # new inputs (wider input or hidden)
                w_new[:, w_old.shape[1] :] = 0.0
    cols = min(h_old, h_new)
    rows = min(old.out.out_features, new.out.out_features)
    new.out.weight[:rows, :cols] = old.out.weight[:rows, :cols]
    if grown:
        new.out.weight[:, h_old:] = 0.0
    new.out.bias[:rows] = old.out.bias[:rows]


def lstm_arch(
    lstm_spec: EncoderConfig, in_dim: int, out_dim: int, output_activation: str | None
) -> LSTMArchitecture:
    """Architecture dict for ``LSTMEncoder`` from an ``LstmSpec``-shaped mapping."""
    return {
        "kind": LSTMEncoder.kind,
        "in_dim": int(in_dim),
        "out_dim": int(out_dim),
        "hidden_state_size": int(lstm_spec["hidden_state_size"]),
        "num_layers": int(lstm_spec["num_layers"]),
        "dropout": float(lstm_spec["dropout"]),
        "output_activation": output_activation,
        "min_hidden_state_size": int(lstm_spec["min_hidden_state_size"]),
        "max_hidden_state_size": int(lstm_spec["max_hidden_state_size"]),
        "min_layers": int(lstm_spec["min_layers"]),
        "max_layers": int(lstm_spec["max_layers"]),
    }
