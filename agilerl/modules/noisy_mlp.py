"""An evolvable MLP of noisy linear layers (Fortunato et al. 2018, factorised Gaussian noise).

Each layer's weight is ``mu + sigma * (f(eps_out) outer f(eps_in))`` with
``f(x) = sign(x) sqrt(|x|)``; ``mu`` lives in the ``weight``/``bias`` of an ``nn.Linear``
(so every :class:`~agilerl.modules.mlp.EvolvableMLP` mutation and weight transfer applies
to it unchanged) and ``sigma``/``eps`` are added beside it. ``sigma`` starts at
``noise_std / sqrt(in_features)`` (weights) and ``noise_std / sqrt(out_features)``
(biases), a tenth of that on the output layer with ``output_vanish`` (whose means start
small too; as the reference); the noise samples ``eps_in``/``eps_out`` are buffers, so checkpoints and clones
keep the exact noise in use. Noise is drawn only by :meth:`NoisyMLP.reset_noise`, from the
generator the caller gives (the agent's), so runs repeat exactly.

Mutations keep ``sigma`` of the units that survive (matched by position, as the weights);
units whose ``mu`` starts at zero to keep the function (outgoing weights of added nodes,
an added identity layer) also get zero ``sigma``, so the function is kept with the noise
on as well.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from agilerl.modules.encoder import as_plan
from agilerl.modules.mlp import EvolvableMLP, MLPArchitecture


class NoisyLinear(nn.Linear):
    """``nn.Linear`` whose ``weight``/``bias`` are the noise means, plus noise scales."""

    eps_in: torch.Tensor
    eps_out: torch.Tensor

    def __init__(self, in_features: int, out_features: int, noise_std: float) -> None:
        super().__init__(in_features, out_features)
        self.noise_std = float(noise_std)
        self.weight_sigma = nn.Parameter(
            torch.full((out_features, in_features), self.noise_std / math.sqrt(max(1, in_features)))
        )
        self.bias_sigma = nn.Parameter(
            torch.full((out_features,), self.noise_std / math.sqrt(max(1, out_features)))
        )
        self.register_buffer("eps_in", torch.zeros(in_features))
        self.register_buffer("eps_out", torch.zeros(out_features))

    def reset_noise(self, generator: torch.Generator | None) -> None:
        """Draw new factorised noise from ``generator``."""
        device = self.weight.device
        with torch.no_grad():
            self.eps_in.copy_(scaled_noise(self.in_features, generator).to(device))
            self.eps_out.copy_(scaled_noise(self.out_features, generator).to(device))

    def noisy_parameters(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The weight and bias with the current noise applied (differentiable in mu, sigma)."""
        weight = torch.addcmul(self.weight, self.weight_sigma, torch.outer(self.eps_out, self.eps_in))
        return weight, torch.addcmul(self.bias, self.bias_sigma, self.eps_out)


def scaled_noise(size: int, generator: torch.Generator | None) -> torch.Tensor:
    """``size`` samples of ``f(x) = sign(x) sqrt(|x|)``, ``x`` standard normal."""
    x = torch.randn(size, generator=generator)
    return x.sign() * x.abs().sqrt()


class NoisyMLP(EvolvableMLP):
    """:class:`EvolvableMLP` whose linear layers are :class:`NoisyLinear`.

    ``arch`` has the MLP keys plus ``noise_std``. ``forward(x, noise=True)`` applies the
    current noise; ``noise=False`` uses the means (greedy evaluation).
    """

    def __init__(self, arch: MLPArchitecture, generator: torch.Generator | None = None):
        super().__init__(arch, generator)
        self.noise_std = float(arch["noise_std"])
        self.arch["noise_std"] = self.noise_std
        noisy = []
        for i in range(len(self.linears)):
            linear = self.linear(i)
            layer = NoisyLinear(linear.in_features, linear.out_features, self.noise_std)
            with torch.no_grad():
                layer.weight.copy_(linear.weight)
                layer.bias.copy_(linear.bias)
            noisy.append(layer)
        if self.arch["output_vanish"]:  # small initial outputs: their noise too
            with torch.no_grad():
                noisy[-1].weight_sigma.mul_(0.1)
                noisy[-1].bias_sigma.mul_(0.1)
        self.linears = nn.ModuleList(noisy)

    def noisy_layer(self, i: int) -> NoisyLinear:
        layer = self.linears[i]
        assert isinstance(layer, NoisyLinear)
        return layer

    def forward(self, x: torch.Tensor, noise: bool = True) -> torch.Tensor:  # type: ignore[override]
        if not noise:
            return super().forward(x)
        plan = self.__dict__.get("_plan") or self._make_plan()
        last = len(plan) - 1
        for i, (_, _, norm, act) in enumerate(plan):
            weight, bias = self.noisy_layer(i).noisy_parameters()
            x = F.linear(x, weight, bias)
            if norm is not None and i < last:
                x = F.layer_norm(x, norm[0], norm[1], norm[2], norm[3])
            x = act(x)
        return x

    def noisy_layers(self) -> list[NoisyLinear]:
        return [self.noisy_layer(i) for i in range(len(self.linears))]

    def reset_noise(self, generator: torch.Generator | None) -> None:
        for layer in self.noisy_layers():
            layer.reset_noise(generator)

    # ------------------------------------------------------------------ mutation
    def mutated(self, plan: Mapping[str, object]) -> NoisyMLP:
        p = as_plan(plan)
        mean = self._means().mutated(p)
        new = self._noisy_from(mean, int(p["seed"]))
        op = p["op"]
        with torch.no_grad():
            if op == "add_layer":
                new.noisy_layer(-2).weight_sigma.zero_()
                new.noisy_layer(-2).bias_sigma.zero_()
            elif op == "add_nodes":
                layer = int(p["layer"])
                n_old = self.linears[layer].out_features
                new.noisy_layer(layer + 1).weight_sigma[:, n_old:] = 0.0
        return new

    def resized(
        self, *, in_dim: int | None = None, out_dim: int | None = None, seed: int = 0
    ) -> NoisyMLP:
        mean = self._means().resized(in_dim=in_dim, out_dim=out_dim, seed=seed)
        new = self._noisy_from(mean, seed)
        if in_dim is not None and in_dim > self.arch["in_dim"]:
            with torch.no_grad():  # new inputs are ignored at first: no noise on them either
                new.noisy_layer(0).weight_sigma[:, self.arch["in_dim"] :] = 0.0
        return new

    def _means(self) -> EvolvableMLP:
        """A plain MLP holding this one's means (what the MLP mutations transform)."""
        plain = EvolvableMLP(self.arch, torch.Generator().manual_seed(0))
        plain = plain.to(self.linear(0).weight.device)
        plain.load_state_dict(self.state_dict(), strict=False)
        return plain

    def _noisy_from(self, mean: EvolvableMLP, seed: int) -> NoisyMLP:
        """A noisy MLP with ``mean``'s architecture and weights, this MLP's sigmas carried
        by position (as the weights are) and fresh noise drawn from ``seed``."""
        gen = torch.Generator().manual_seed(seed)
        new = NoisyMLP({**mean.architecture(), "noise_std": self.noise_std}, gen)
        new = new.to(self.linear(0).weight.device)
        new.load_state_dict(mean.state_dict(), strict=False)
        n_old, n_new = len(self.linears), len(new.linears)
        pairs = [(i, i) for i in range(min(n_old, n_new) - 1)] + [(n_new - 1, n_old - 1)]
        with torch.no_grad():
            for new_i, old_i in pairs:
                dst, src = new.noisy_layer(new_i), self.noisy_layer(old_i)
                _copy_overlap(dst.weight_sigma, src.weight_sigma)
                _copy_overlap(dst.bias_sigma, src.bias_sigma)
        new.reset_noise(gen)
        return new


def _copy_overlap(dst: torch.Tensor, src: torch.Tensor) -> None:
    index = tuple(slice(0, min(d, s)) for d, s in zip(dst.shape, src.shape, strict=False))
    dst[index] = src[index]
