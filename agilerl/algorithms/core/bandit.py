"""What the neural contextual bandits (NeuralUCB, NeuralTS) share.

A context is an ``(arms, context_dim)`` matrix, one row per arm
(:mod:`agilerl.envs.bandit`); one network scores a row: ``f(x) = w . h(x) + b``, ``h`` the
last hidden activation. The exploration of both algorithms (Zhou et al. 2020, Zhang et al.
2021) uses the gradient of ``f`` with respect to the output layer, ``g(x) = [h(x), 1]``,
which is read from the forward pass, not computed by backpropagation, and the design
matrix ``Z = lamb * I + sum_t g_t g_t^T`` of the arms pulled. ``g`` is not divided by
``sqrt(m)`` (``m``: the width of ``h``) as in the papers: the reference divides by the
square root of the output layer's output count, 1 here, and dividing by ``sqrt(m)``
amounts to a ``lamb`` ``m`` times larger (an exploration bonus ``sqrt(m)`` times smaller
at the start), which on the iris bandits explored less and learned less. ``Z^-1`` is
kept up to date by the Sherman-Morrison rank-one update, and ``sum_t g_t g_t^T`` is kept
too, so a mutated ``lamb`` gives the exact ``Z^-1`` of the same history.
An architecture change restarts both (the gradient features change), as in the reference.

Learning regresses ``f(x)`` on the observed rewards with ``reg * ||theta - theta_0||^2``
on the output layer's parameters (``theta_0``: their value when exploration last
restarted). Regret counts ``1 - reward`` per pull (best reward 1, as the bandit env's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, TypedDict, cast

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from gymnasium import spaces

from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.core.spaces import IncompatibleSpaceError
from agilerl.core.value_types import JsonValue
from agilerl.models._generated.hyperparameter_attributes import (
    NeuralBanditHyperparameterAttributes,
)
from agilerl.networks.config import NetworkConfig
from agilerl.networks.mlp_gradient import MLPChain, Tape, cached_chain
from agilerl.networks.optim import make_optimizer
from agilerl.networks.q_network import QNetwork

#: Evaluation pulls when ``training.eval_steps`` is unset (the reference's default).
DEFAULT_EVAL_STEPS = 100


class ContextualBanditEnv(Protocol):
    """What bandit evaluation uses of a bandit env (:class:`~agilerl.envs.bandit.BanditEnv`):
    the arms' contexts, and the reward of a pull."""

    def reset(self, seed: int | None = None) -> np.ndarray: ...

    def step(self, action: int, /) -> tuple[np.ndarray, float]: ...


class BanditExtraState(TypedDict):
    """A bandit's exploration state in its ``get_state`` (``extra``)."""

    gram: np.ndarray
    design_inv: np.ndarray
    theta_0: list[torch.Tensor]
    regret: list[float]


class NeuralBandit(NeuralBanditHyperparameterAttributes, RLAlgorithm):
    """Base of NeuralUCB and NeuralTS; subclasses implement :meth:`exploration_scores`."""

    #: Whether the network starts from the papers' Gaussian initialisation (see
    #: :meth:`_gaussian_init`) instead of the library's orthogonal one; chosen per
    #: algorithm by measurement (``docs/training.md``, "Contextual bandits").
    gaussian_init: ClassVar[bool] = False

    def _build(self, net_config: NetworkConfig) -> None:
        if not isinstance(self.action_space, spaces.Discrete):
            raise IncompatibleSpaceError(
                f"{self.algo} pulls one of a Discrete set of arms, got {self.action_space}")
        self.arms = int(self.action_space.n)
        generator = self.network_generator()
        self.actor = QNetwork.build(self.observation_space, 1, net_config,
                                    generator).to(self.device)
        if self.gaussian_init:
            self._gaussian_init(generator)
        self.networks = {"actor": self.actor}
        self.optimizer_networks = {"optimizer": ("actor",)}
        self.optimizers = {"optimizer": make_optimizer([self.actor], self.lr)}
        self.regret: list[float] = [0.0]
        self._restart_exploration()

    @torch.no_grad()
    def _gaussian_init(self, generator: torch.Generator) -> None:
        """Every dense weight drawn from ``N(0, (4 / fan_in)^2)``, the output layer's from
        ``N(0, (2 / fan_in)^2)``, biases zero: the reference's reading of the papers'
        initialisation (which states variances ``4/m`` and ``2/m``)."""
        output = self._output_layer()
        for layer in self.actor.modules():
            if isinstance(layer, torch.nn.Linear):
                coeff = 2.0 if layer is output else 4.0
                weight = torch.empty(layer.weight.shape).normal_(
                    0.0, coeff / layer.in_features, generator=generator)
                layer.weight.copy_(weight)
                layer.bias.zero_()

    # ------------------------------------------------------------------ exploration state
    def _output_layer(self) -> torch.nn.Linear:
        """The network's output layer (cached until the network is replaced)."""
        cached = self.__dict__.get("_output_cache")
        if cached is not None and cached[0] is self.actor:
            return cast(torch.nn.Linear, cached[1])
        head = self.actor.head("q")
        if head.arch["output_activation"] not in (None, "Identity"):
            raise ValueError(
                f"{self.algo} reads its confidence from a linear output layer: "
                f"network.head_config.output_activation must be unset, got "
                f"{head.arch['output_activation']!r}")
        layer = head.linear(len(head.linears) - 1)
        self.__dict__["_output_cache"] = (self.actor, layer)
        return layer

    def _restart_exploration(self) -> None:
        """``Z = lamb * I`` and ``theta_0`` = the current output layer."""
        layer = self._output_layer()
        width = int(layer.in_features) + 1
        self.gram = np.zeros((width, width), dtype=np.float64)
        self.design_inv = np.eye(width, dtype=np.float64) / float(self.lamb)
        self.theta_0 = [p.detach().clone() for p in (layer.weight, layer.bias)]

    def set_hyperparameter(self, name: str, value: float) -> None:
        super().set_hyperparameter(name, value)
        if name == "lamb":  # the same pulls, regularised by the new lamb
            width = len(self.gram)
            self.design_inv = np.asarray(np.linalg.inv(self.lamb * np.eye(width) + self.gram),
                                         dtype=np.float64)

    def apply_architecture_mutation(self, network_name: str,
                                    plan: Mapping[str, JsonValue]) -> None:
        super().apply_architecture_mutation(network_name, plan)
        self._restart_exploration()

    # ------------------------------------------------------------------ scoring
    def _context(self, context: npt.ArrayLike) -> torch.Tensor:
        array = np.asarray(context, dtype=np.float32).reshape(self.arms, -1)
        return torch.as_tensor(array, device=self.device)

    @torch.inference_mode()
    def scores_and_features(self, context: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Predicted reward of every arm and its gradient features ``g`` (arms x width)."""
        hidden = self.actor.head("q").penultimate(
            self.actor.encoder("encoder").forward(self._context(context)))
        layer = self._output_layer()
        mean = F.linear(hidden, layer.weight, layer.bias).reshape(-1)
        h = hidden.double().cpu().numpy()
        features = np.concatenate([h, np.ones((len(h), 1))], axis=1)
        return mean.double().cpu().numpy(), features

    def confidence_widths(self, features: np.ndarray) -> np.ndarray:
        """``sqrt(g^T Z^-1 g)`` of every row of ``features``."""
        quad = ((features @ self.design_inv) * features).sum(axis=1)
        return np.sqrt(np.maximum(quad, 0.0))

    def exploration_scores(self, mean: np.ndarray, width: np.ndarray) -> np.ndarray:
        """The score whose argmax is pulled (UCB bound, Thompson sample)."""
        raise NotImplementedError

    def get_action(self, context: npt.ArrayLike, action_mask: npt.ArrayLike | None = None
                   ) -> int:
        """The arm to pull for ``context`` (exploring); its features join the design."""
        mean, features = self.scores_and_features(context)
        scores = self.exploration_scores(mean, self.confidence_widths(features))
        if action_mask is not None:
            scores = np.where(np.asarray(action_mask, dtype=bool).reshape(-1), scores, -np.inf)
        arm = int(np.argmax(scores))
        self._add_to_design(features[arm])
        return arm

    def _add_to_design(self, g: np.ndarray) -> None:
        """Sherman-Morrison: ``(Z + g g^T)^-1`` from ``Z^-1``, both rank-one updates done
        in place (on tensor views of the arrays)."""
        g_t = torch.from_numpy(np.ascontiguousarray(g))
        inverse = torch.from_numpy(self.design_inv)
        zg = inverse @ g_t
        inverse.addr_(zg, zg, alpha=-1.0 / (1.0 + float(g_t @ zg)))
        torch.from_numpy(self.gram).addr_(g_t, g_t)

    def greedy_action(self, context: Any) -> Any:
        """The arm with the highest predicted reward (no exploration, design unchanged)."""
        mean, _ = self.scores_and_features(context)
        return int(np.argmax(mean))

    def record_regret(self, regret: float) -> None:
        """Add one pull's regret to the cumulative curve (``regret[-1]``: the total)."""
        self.regret.append(self.regret[-1] + float(regret))

    # ------------------------------------------------------------------ learning
    def learn(self, experiences: Mapping[str, np.ndarray]) -> dict[str, float]:
        """One gradient step on ``{obs: (batch, context_dim), reward: (batch,)}``."""
        obs = torch.as_tensor(np.asarray(experiences["obs"], dtype=np.float32),
                              device=self.device)
        reward = torch.as_tensor(np.asarray(experiences["reward"], dtype=np.float32),
                                 device=self.device).reshape(-1)
        optimizer = self.optimizers["optimizer"]
        optimizer.zero_grad(set_to_none=True)
        chain = cached_chain(self, self.actor)
        if chain is None:
            predicted = self.actor(obs).reshape(-1)
            layer = self._output_layer()
            drift = sum(((p - p0) ** 2).sum()
                        for p, p0 in zip((layer.weight, layer.bias), self.theta_0, strict=True))
            loss = F.mse_loss(predicted, reward) + self.reg * drift
            loss.backward()
        else:
            loss = self._closed_form_gradients(chain, obs, reward)
        optimizer.step()
        return {"loss": loss.item()}

    @torch.no_grad()
    def _closed_form_gradients(self, chain: MLPChain, obs: torch.Tensor,
                               reward: torch.Tensor) -> torch.Tensor:
        """The loss, with the gradients set in closed form: ``2 (f(x) - r) / N`` at the
        output, carried back by :class:`MLPChain`, plus ``2 reg (theta - theta_0)`` on the
        output layer."""
        tape: Tape = []
        error = chain.forward(obs, tape).reshape(-1) - reward
        layer = self._output_layer()
        offsets = torch._foreach_sub([layer.weight, layer.bias], self.theta_0)
        drift = torch.stack(torch._foreach_norm(offsets)).square().sum()
        loss = error.square().mean() + self.reg * drift
        chain.backward(tape, (error * (2.0 / len(error))).unsqueeze(1))
        grads = [p.grad for p in (layer.weight, layer.bias) if p.grad is not None]
        torch._foreach_add_(grads, offsets, alpha=2.0 * self.reg)
        return loss

    # ------------------------------------------------------------------ evaluation
    def test(self, env: ContextualBanditEnv, max_steps: int | None = None, loop: int = 1,
             seed: int | None = None) -> float:
        """Greedy pulls: ``loop`` rounds of ``max_steps`` (default 100) pulls, each round
        from a reset (the first with ``seed``); returns (and appends to ``fitness``) the
        mean total reward of a round. The design matrix is not changed."""
        steps = int(max_steps) if max_steps else DEFAULT_EVAL_STEPS
        totals = []
        for round_ in range(int(loop)):
            context = env.reset(seed=seed) if round_ == 0 and seed is not None else env.reset()
            total = 0.0
            for _ in range(steps):
                context, reward = env.step(self.greedy_action(context))
                total += float(reward)
            totals.append(total)
        fitness = float(np.mean(totals))
        self.fitness.append(fitness)
        return fitness

    # ------------------------------------------------------------------ state
    def _extra_state(self) -> dict[str, object]:
        return {"gram": self.gram.copy(), "design_inv": self.design_inv.copy(),
                "theta_0": [t.detach().cpu().clone() for t in self.theta_0],
                "regret": list(self.regret)}

    def _load_extra_state(self, extra: Mapping[str, object]) -> None:
        if not extra:
            return
        extra = cast(BanditExtraState, extra)  # what _extra_state wrote (or its torch.load)
        self.gram = np.array(extra["gram"], dtype=np.float64)
        self.design_inv = np.array(extra["design_inv"], dtype=np.float64)
        self.theta_0 = [torch.as_tensor(t).to(self.device).clone() for t in extra["theta_0"]]
        self.regret = list(extra["regret"])
