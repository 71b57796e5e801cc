"""ReGraMa: re-initialising a member's dormant neurons at a parameter mutation.

A neuron is *dormant* when the loss barely depends on it. Its GraMa score is the mean
absolute gradient of the last learning step's loss with respect to its pre-activation (the
input of its activation, after any layer norm), over that step's batch. Divided by the mean
score of its layer, a score at or below ``dormant_threshold`` marks it dormant; a layer
whose scores are all zero (no live unit left) is dormant as a whole. This is the reference
library's ReGraMa, run before the Gaussian weight noise of every ``params_mut``.

What is measured: every hidden layer of an :class:`~agilerl.modules.mlp.EvolvableMLP` (an
MLP encoder or a head) and an MLP encoder's output (the latent), in every network a
member trains. Each MLP keeps a reference to the latest such gradient per layer
(``EvolvableMLP.keep_gradient``, called through hooks its forward pass registers under
autograd, and by the closed-form backward of :mod:`agilerl.networks.mlp_gradient`); it is reduced to scores only when read,
so measuring costs a learning step nothing but the reference. The scores travel with the
member's state (``get_state``), so clones, worker processes and resumed runs see them.

A dormant neuron is revived as the reference revives it: Xavier-uniform incoming weights,
zero bias, a neutral layer-norm entry, and outgoing weights in a random direction whose
norm is ``REVIVED_OUT_SCALE`` times the median outgoing norm of the layer's live neurons,
so the network's function barely moves. A latent neuron is revived only when every head
reading it takes the latent alone (a continuous-action critic also reads the action, and
its latent columns are left as they are). Convolutional, recurrent and other encoders are
not measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from agilerl.modules.mlp import EvolvableMLP

#: Norm of a revived neuron's outgoing weights, as a fraction of the live neurons' median.
REVIVED_OUT_SCALE = 0.02
#: Bound on a revived weight's magnitude (as the Gaussian weight mutation's).
WEIGHT_LIMIT = 1e6

Scores = list[torch.Tensor | None]


def layer_scores(mlp: EvolvableMLP) -> Scores:
    """The GraMa score of every neuron of each measured layer (None: not measured yet)."""
    kept = mlp.latest_gradients()
    scores: Scores = []
    for layer in range(mlp.measured_layers()):
        gradient = kept[layer]
        if gradient is not None and gradient.dim() > 1:
            gradient = gradient.detach().abs().reshape(-1, gradient.shape[-1]).mean(0)
        scores.append(None if gradient is None else gradient.detach().float().cpu())
    return scores


def _mlps(network: nn.Module) -> dict[str, EvolvableMLP]:
    return {name: module for name, module in network.named_modules()
            if isinstance(module, EvolvableMLP)}


def network_scores(networks: Mapping[str, nn.Module]) -> dict[str, dict[str, Scores]]:
    """Network name -> MLP path -> its scores, for the member's state."""
    return {name: {path: layer_scores(mlp) for path, mlp in _mlps(net).items()}
            for name, net in networks.items()}


def load_network_scores(networks: Mapping[str, nn.Module],
                        scores: Mapping[str, Mapping[str, Scores]] | None) -> None:
    """Give each MLP the scores ``network_scores`` saved for it (none where absent or where
    the layer's width no longer matches)."""
    for name, net in networks.items():
        saved = (scores or {}).get(name, {})
        for path, mlp in _mlps(net).items():
            mlp.__dict__.pop("_latest_gradients", None)
            for layer, score in enumerate(saved.get(path, [])[: mlp.measured_layers()]):
                if score is not None and score.numel() == mlp.linear(layer).out_features:
                    mlp.keep_gradient(layer, score.clone())


def dormant_neurons(scores: torch.Tensor, threshold: float) -> list[int]:
    """Indices of the dormant neurons of a layer with these scores (see module docstring)."""
    scores = torch.nan_to_num(scores, nan=0.0, posinf=0.0, neginf=0.0)
    mean = float(scores.mean())
    if mean <= 0.0:
        return list(range(scores.numel()))
    return torch.nonzero(scores / mean <= threshold).flatten().tolist()


def revive_dormant_neurons(network: nn.Module, threshold: float,
                           rng: np.random.Generator) -> int:
    """Re-initialise the dormant neurons of every measured layer of ``network`` in place
    (randomness from ``rng``); returns how many were revived."""
    revived = 0
    heads = getattr(network, "heads", {})
    head_inputs = getattr(network, "arch", {}).get("head_inputs", {})
    encoders = dict(getattr(network, "encoders", {}))
    for mlp in _mlps(network).values():
        scores = layer_scores(mlp)
        for layer, score in enumerate(scores):
            if score is None or score.numel() != mlp.linear(layer).out_features:
                continue
            consumers = _consumers(mlp, layer, encoders, heads, head_inputs)
            if consumers is None:
                continue
            indices = dormant_neurons(score, threshold)
            if indices:
                _revive(mlp, layer, consumers, indices, rng)
                revived += len(indices)
    return revived


def _consumers(mlp: EvolvableMLP, layer: int, encoders: Mapping[str, nn.Module],
               heads: Mapping[str, nn.Module], head_inputs: Mapping[str, str]
               ) -> list[torch.Tensor] | None:
    """The weight matrices reading layer ``layer``'s neurons (one column each), or None
    when some reader also takes other inputs."""
    if layer + 1 < len(mlp.linears):
        return [mlp.linear(layer + 1).weight.data]
    name = next((n for n, m in encoders.items() if m is mlp), None)
    readers = [heads[h] for h, source in head_inputs.items() if source == name]
    width = mlp.linear(layer).out_features
    weights = [head.linear(0).weight.data for head in readers if isinstance(head, EvolvableMLP)]
    if not weights or len(weights) != len(readers) or any(w.shape[1] != width for w in weights):
        return None
    return weights


@torch.no_grad()
def _revive(mlp: EvolvableMLP, layer: int, consumers: list[torch.Tensor],
            indices: list[int], rng: np.random.Generator) -> None:
    linear = mlp.linear(layer)
    weight = linear.weight.data
    neurons, fan_in = weight.shape
    bound = math.sqrt(6.0 / (fan_in + neurons))
    revived = set(indices)
    live = [n for n in range(neurons) if n not in revived]
    scales = [REVIVED_OUT_SCALE * _live_column_norm(consumer, live) for consumer in consumers]
    linear.bias.data[indices] = 0.0
    if layer < len(mlp.norms) and isinstance(mlp.norms[layer], nn.LayerNorm):
        norm = mlp.norm(layer)
        norm.weight.data[indices] = 1.0
        norm.bias.data[indices] = 0.0
    for index in indices:
        weight[index] = torch.as_tensor(rng.uniform(-bound, bound, size=fan_in),
                                        dtype=weight.dtype, device=weight.device)
        for consumer, scale in zip(consumers, scales, strict=True):
            column = torch.as_tensor(rng.standard_normal(consumer.shape[0]),
                                     dtype=consumer.dtype, device=consumer.device)
            consumer[:, index] = column * (scale / max(float(column.norm()), 1e-12))
    for tensor in (weight, linear.bias.data, *consumers):
        tensor.clamp_(-WEIGHT_LIMIT, WEIGHT_LIMIT).nan_to_num_()


def _live_column_norm(weight: torch.Tensor, live: list[int]) -> float:
    """The median norm of ``weight``'s columns ``live`` (all columns if none is live or
    their median is 0), else the Xavier-uniform expectation for the matrix."""
    for columns in (weight[:, live], weight):
        norms = columns.norm(dim=0)
        norms = norms[norms.isfinite()]
        if norms.numel() and (median := float(norms.median())) > 0.0:
            return median
    rows, cols = weight.shape
    return math.sqrt(6.0 / (rows + cols)) / math.sqrt(3.0) * math.sqrt(rows)
