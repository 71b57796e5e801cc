"""The interface every single-agent RL algorithm shares, and the plumbing behind it.

An algorithm subclass holds only its maths (networks it needs, ``get_action``, ``learn``,
greedy action for evaluation). Everything the training loops, the population seam,
mutation, selection and checkpoints rely on lives here:

* construction from spaces + hyperparameters validated by the algorithm's generated spec
  class (``agilerl.models``), so every default and bound has one home (``schemas/``);
* counters: ``steps`` (``steps[-1]`` = env steps trained so far), ``scores`` (mean
  training episode returns), ``fitness`` (one entry per evaluation), ``mut`` (last
  mutation applied);
* ``test`` (greedy evaluation on a Gymnasium >= 1.0 vector env);
* ``clone``, ``get_state``/``set_state``/``from_state``, ``save_checkpoint``/``load``;
* hyperparameter mutation (``set_hyperparameter``: learning rates update the optimizer).
"""

from __future__ import annotations

import copy
import os
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, cast

import numpy as np
import numpy.typing as npt
import torch

from agilerl.algorithms.core.evaluation import evaluate_greedy
from agilerl.algorithms.core.exploration import EpsilonSchedule
from agilerl.algorithms.core.member_state import MemberState, MemberStateFields, cpu_copy
from agilerl.algorithms.core.registry import algorithm_class
from agilerl.core.spaces import ObsEncoder
from agilerl.core.value_types import JsonValue, Space
from agilerl.hpo.dormant import Scores, load_network_scores, network_scores
from agilerl.hpo.ranges import plain_hp_config
from agilerl.models._generated.hyperparameter_attributes import RLAlgorithmHyperparameterAttributes
from agilerl.networks.base import EvolvableNetwork
from agilerl.networks.config import NetworkConfig, normalise_net_config
from agilerl.networks.optim import (
    Adam,
    AdamStateDict,
    carry_learning_rates,
    carry_state,
    make_optimizer,
    network_parameter_sources,
    optimizer_sources,
    state_by_name,
)

if TYPE_CHECKING:
    from agilerl.models.algo import AlgoSpec
    from agilerl.models.training import TrainingSpec

#: What acting methods take: a batch of observations (one row per sub-env; an env's
#: :data:`~agilerl.core.value_types.Observation`), or one observation
#: (:func:`~agilerl.algorithms.core.single_obs.acts_on_single`): array-like, or key -> part
#: for a Dict space.
ObsLike: TypeAlias = npt.ArrayLike | Mapping[str, npt.ArrayLike]
#: A network's input batch (:meth:`RLAlgorithm.to_tensor`): a tensor, or part name -> tensor
#: for a Tuple or Dict observation space.
NetworkInput: TypeAlias = torch.Tensor | dict[str, torch.Tensor]


class RLStateFields(MemberStateFields):
    """What :meth:`RLAlgorithm.get_state` writes (subclasses may add fields)."""

    observation_space: Space
    action_space: Space
    seed: int | None
    spec: dict[str, JsonValue]
    net_config: NetworkConfig
    architectures: dict[str, dict[str, object]]
    weights: dict[str, dict[str, torch.Tensor]]
    optimizers: dict[str, AdamStateDict]
    np_rng: dict[str, object]
    torch_rng: torch.Tensor
    dormancy: dict[str, dict[str, Scores]]
    extra: dict[str, object]


class RLAlgorithm(RLAlgorithmHyperparameterAttributes, MemberState):
    """Base class of single-agent RL algorithms (DQN, PPO, ...).

    Subclasses set ``algo`` (the registry name, e.g. ``"DQN"``), ``lr_names`` (the
    hyperparameters that are optimizer learning rates), and implement
    ``_build(net_config)``, ``get_action``, ``greedy_action`` and ``learn``; the spec
    fields the maths reads (``hyperparameter_names``, held as attributes) are listed in the
    algorithm's schema and copied on by :func:`~agilerl.algorithms.core.registry.registered`.

    Networks and optimizers are registered in ``self.networks`` / ``self.optimizers``
    (name -> object) so cloning, checkpoints and mutation need no per-algorithm code.
    ``self.optimizer_networks`` maps an optimizer name to the network names it trains.
    """

    #: Networks that mirror another network's architecture (e.g. a DQN target network):
    #: name -> source name. Architecture mutations are applied to both identically.
    mirrored_networks: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        observation_space: Space,
        action_space: Space,
        *,
        index: int = 0,
        net_config: object = None,
        hp_config: Mapping[str, object] | None = None,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        spec: AlgoSpec | None = None,
        **hyperparameters: object,
    ) -> None:
        if observation_space is None or action_space is None:
            raise ValueError(
                f"{type(self).__name__} requires an observation_space and an action_space."
            )
        # Adam moments of parameters whose gradients vanish (dead units, unused inputs)
        # decay into the denormal range, where CPU float maths is several times slower:
        # flush denormals to zero (a CPU-thread setting; no effect on learning quality).
        torch.set_flush_denormal(True)
        self.observation_space = observation_space
        self.action_space = action_space
        self.index = int(index)
        self.device = torch.device(device)
        self.seed = seed
        self.spec = self.spec_from(spec, hyperparameters)
        for name in self.hyperparameter_names:
            setattr(self, name, getattr(self.spec, name))
        self.hp_config: dict[str, dict[str, float]] = plain_hp_config(hp_config)
        self._check_hp_config()
        self.net_config: NetworkConfig = self._normalise_net_config(net_config)

        self.steps: list[int] = [0]
        self.scores: list[float] = []
        self.fitness: list[float] = []
        self.mut: str = "None"

        # The agent's own randomness: numpy for exploration, torch for sampling and init.
        self.np_rng = np.random.default_rng(seed)
        self.torch_rng = torch.Generator(device="cpu")
        self.torch_rng.manual_seed(int(self.np_rng.integers(0, 2**62)))

        self.obs_encoder = self._make_obs_encoder(observation_space)
        self.networks: dict[str, EvolvableNetwork] = {}
        self.optimizers: dict[str, Adam] = {}
        self.optimizer_networks: dict[str, tuple[str, ...]] = {}
        self._build(self.net_config)
        self._check_recurrent_encoders()

    # ------------------------------------------------------------------ spec plumbing
    @classmethod
    def network_spec_name(cls) -> str:
        """Name of the network spec class that fills ``net_config`` defaults: the spec
        class's ``network_spec`` (from the generated registry), else ``NetworkSpec``."""
        network_spec = getattr(cls.spec_class(), "network_spec", None)
        return network_spec.__name__ if network_spec is not None else "NetworkSpec"

    def _normalise_net_config(self, net_config: object) -> NetworkConfig:
        """The complete network section ``_build`` reads (multi-agent: per agent group)."""
        return normalise_net_config(net_config, self.network_spec_name())

    def _make_obs_encoder(self, observation_space: Space) -> ObsEncoder | None:
        """What ``to_tensor`` uses (multi-agent algorithms keep one per network unit)."""
        return ObsEncoder(observation_space)

    def _optimizers_for_lr(self, lr_name: str) -> list[str]:
        """Optimizers driven by the learning rate ``lr_name`` (single optimizer: all)."""
        return list(self.optimizers)

    def _lr_param_groups(self, lr_name: str) -> Iterator[dict[str, object]]:
        for name in self._optimizers_for_lr(lr_name):
            yield from self.optimizers[name].param_groups

    # ------------------------------------------------------------------ maths hooks
    @abstractmethod
    def _build(self, net_config: NetworkConfig) -> None:
        """Create networks and optimizers and register them in ``networks``/``optimizers``."""

    @abstractmethod
    def get_action(self, obs: Any, *args: Any, **kwargs: Any) -> object:
        """Training-time action selection, batched over the sub-envs of a vector env."""

    @abstractmethod
    def greedy_action(self, obs: ObsLike) -> np.ndarray:
        """Deterministic action for evaluation, batched, ready for ``env.step``."""

    @abstractmethod
    def learn(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """One learning update; returns scalar metrics (e.g. ``{"loss": ...}``)."""

    # ------------------------------------------------------------------ exploration hooks
    # The off-policy experience loop drives exploration only through these three
    # (``agilerl.algorithms.core.exploration``).
    @classmethod
    def exploration_settings(cls, training: TrainingSpec | None) -> EpsilonSchedule | None:
        """What this algorithm reads from the run's ``training`` section to explore (the
        DQN family: its epsilon schedule). Default: nothing."""
        return None

    def explore_action(self, obs: ObsLike, vector_step: int,
                       settings: EpsilonSchedule | None = None) -> np.ndarray:
        """Exploring actions for a batch of observations (one per sub-env), ready for
        ``env.step``. ``vector_step``: the member's own vector-step count (for schedules);
        ``settings``: :meth:`exploration_settings` of the run (None outside a run)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement explore_action, which off-policy "
            "training needs"
        )

    def on_episode_end(self, ended: np.ndarray) -> None:
        """Sub-envs whose episode just ended (bool mask, one per sub-env): reset any
        per-episode exploration state (e.g. correlated action noise). Default: nothing."""
        return None

    # ------------------------------------------------------------------ recurrent state
    # Loops carry a recurrent policy's state without knowing the algorithm: they ask for
    # it once per env reset, pass it to the acting methods (which advance it in place) and
    # zero the rows of sub-envs whose episode starts (``reset_hidden``).
    def initial_hidden(self, num_envs: int) -> dict[str, torch.Tensor] | None:
        """The recurrent state of ``num_envs`` sub-envs at an episode start (name ->
        tensor, batch first); None for a policy without one (the default)."""
        return None

    def _check_recurrent_encoders(self) -> None:
        """A recurrent encoder (LSTM) needs an algorithm that carries its state."""
        if self.initial_hidden(1) is not None:
            return
        for network in self.networks.values():
            for encoder in network.encoders.values():
                if getattr(encoder, "recurrent", False):
                    raise NotImplementedError(
                        f"network encoder arch {encoder.kind!r} is not supported by "
                        f"{self.algo}: it carries a state across steps, which only PPO with "
                        "algorithm.recurrent: true keeps"
                    )

    @staticmethod
    def reset_hidden(hidden: dict[str, torch.Tensor] | None, starts: np.ndarray) -> None:
        """Zero, in place, the rows of ``hidden`` of the sub-envs where ``starts`` is True
        (their next observation begins an episode). New tensors replace the old ones, so
        a state saved before keeps its values."""
        if hidden is None or not np.any(starts):
            return
        for name, state in hidden.items():
            keep = torch.as_tensor(~np.asarray(starts, dtype=bool), device=state.device)
            hidden[name] = state * keep.view(-1, *([1] * (state.dim() - 1))).to(state.dtype)

    # ------------------------------------------------------------------ settings
    # ------------------------------------------------------------------ evaluation
    def test(
        self, env: Any, max_steps: int | None = None, loop: int = 1, seed: int | None = None
    ) -> float:
        """Greedy evaluation on a vector env; appends the result to ``fitness``.

        ``loop`` rounds; each resets the env (the first with ``seed``) and runs one greedy
        episode in every sub-env (a sub-env is ignored after its first episode ends, so
        autoreset in any mode never mixes episodes). ``max_steps`` caps a round's vector
        steps; an unfinished episode then counts with its partial return. Returns (and
        appends to ``fitness``) the mean episode return over sub-envs and rounds.
        """
        fitness = evaluate_greedy(self, env, max_steps=max_steps, loop=loop, seed=seed)
        self.fitness.append(fitness)
        return fitness

    def network_generator(self) -> torch.Generator:
        """Generator for initial weights: ``net_config.random_seed`` when the manifest sets
        one (every member then starts from the same weights), else the agent's own."""
        seed = self.net_config.get("random_seed")
        if seed is None:
            return self.torch_rng
        return torch.Generator().manual_seed(int(seed))

    # ------------------------------------------------------------------ tensors
    def to_tensor(self, obs: ObsLike) -> NetworkInput:
        """Observations (numpy, batched) -> the network input on the agent's device: a
        tensor, or a dict of tensors for Tuple/Dict spaces (``ObsEncoder``)."""
        assert self.obs_encoder is not None  # (multi-agent algorithms override to_tensor)
        return self.obs_encoder(obs, self.device)

    # ------------------------------------------------------------------ cloning & state
    def get_state(self) -> dict[str, object]:
        """Everything needed to rebuild this agent exactly; picklable by ``torch.save``."""
        return {
            **self.member_state(),
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "seed": self.seed,
            "spec": self.spec.model_dump(mode="json", exclude_unset=False),
            "net_config": copy.deepcopy(self.net_config),
            "architectures": {n: net.architecture() for n, net in self.networks.items()},
            "weights": {n: cpu_copy(net.state_dict()) for n, net in self.networks.items()},
            "optimizers": {n: cast(AdamStateDict, cpu_copy(opt.state_dict()))
                           for n, opt in self.optimizers.items()},
            "np_rng": copy.deepcopy(self.np_rng.bit_generator.state),
            "torch_rng": self.torch_rng.get_state(),
            "dormancy": network_scores({n: self.networks[n] for n in self.trained_networks()}),
            "extra": self._extra_state(),
        }

    def set_state(self, state: Mapping[str, object]) -> None:
        """Load a state produced by ``get_state`` (architectures are rebuilt to match).

        Every tensor is copied (weights into the networks, optimizer state by
        ``Adam.load_state_dict``), so one state can be loaded into several agents and
        none of them shares memory with it or with each other.
        """
        self.load_member_state(state)
        state = cast(RLStateFields, state)  # a get_state dict (or its torch.load)
        for name, arch in state["architectures"].items():
            net = self.networks[name]
            if net.architecture() != arch:
                net = type(net).from_architecture(arch, device=self.device)
                self.networks[name] = net
                setattr(self, name, net)
            net.load_state_dict(state["weights"][name])
        load_network_scores(self.networks, state.get("dormancy"))
        for opt_name, opt_state in state["optimizers"].items():
            self._rebuild_optimizer(opt_name)
            self.optimizers[opt_name].load_state_dict(opt_state)
        self.np_rng.bit_generator.state = copy.deepcopy(state["np_rng"])
        self.torch_rng.set_state(state["torch_rng"])
        self._load_extra_state(state.get("extra", {}))

    @classmethod
    def from_state(cls, state: Mapping[str, object],
                   device: str | torch.device | None = None) -> RLAlgorithm:
        """Build an agent from ``get_state`` output (dispatching on the stored algorithm)."""
        state = cast(RLStateFields, state)  # a get_state dict (or its torch.load)
        target = cls if getattr(cls, "algo", None) == state["algo"] else _registered(state["algo"])
        # (the spec's values, by name: the constructor validates them)
        hyper: dict[str, Any] = {k: v for k, v in state["spec"].items()
                                 if k not in _NOT_HYPERPARAMETERS}
        agent = target(
            state["observation_space"],
            state["action_space"],
            index=state["index"],
            net_config=state["net_config"],
            hp_config=state["hp_config"],
            device=device if device is not None else "cpu",
            seed=state["seed"],
            **hyper,
        )
        agent.set_state(state)
        return agent

    def save_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Write ``get_state()`` to ``path`` atomically (temporary file, then rename)."""
        from agilerl.checkpoint.folder import save_torch_atomically

        path = Path(path)
        save_torch_atomically(self.get_state(), path)

    # ------------------------------------------------------------------ mutation support
    def mutable_networks(self) -> list[str]:
        """Networks whose architecture may be mutated (mirrors follow their source)."""
        return self.trained_networks()

    def network_mirror_sources(self) -> dict[str, str]:
        """Mirror (target) network -> the network it follows."""
        return dict(self.mirrored_networks)

    def trained_networks(self) -> list[str]:
        """The networks an optimizer trains: every network but the mirrors."""
        mirrors = self.network_mirror_sources()
        return [name for name in self.networks if name not in mirrors]

    def restart_targets_and_optimizers(self) -> None:
        """Each mirror (target network) becomes a copy of the network it follows, and
        every optimizer starts afresh: called after a mutation that changed what the
        networks compute (new weights, units or a layer removed, another activation), when
        a target's lagged weights and the optimizers' moments describe a function that no
        longer exists."""
        for mirror, source in self.network_mirror_sources().items():
            self.networks[mirror].load_state_dict(self.networks[source].state_dict())
        for opt_name in self.optimizers:
            replaced = self.optimizers[opt_name]
            self._rebuild_optimizer(opt_name)
            # (the learning rate in effect follows the run's progress, not the weights)
            carry_learning_rates(self.optimizers[opt_name], replaced)

    def apply_architecture_mutation(self, network_name: str,
                                    plan: Mapping[str, JsonValue]) -> None:
        """Apply one architecture mutation ``plan`` to a network and its mirrors.

        Optimizers that train the network are rebuilt with their state carried over:
        moments and step counts (see ``agilerl.networks.optim.carry_state``) and the
        learning rates in effect (an annealed rate stays annealed)."""
        names = [network_name] + [
            m for m, src in self.mirrored_networks.items() if src == network_name
        ]
        affected = [o for o, nets in self.optimizer_networks.items() if network_name in nets]
        carried = {o: state_by_name(self.optimizers[o], self._optimizer_nets(o)) for o in affected}
        replaced = {o: self.optimizers[o] for o in affected}
        sources = network_parameter_sources(self.networks, names, plan)
        for name in names:
            new = self.networks[name].mutated(plan)
            self.networks[name] = new
            setattr(self, name, new)
        for opt_name in affected:
            self._rebuild_optimizer(opt_name)
            carry_learning_rates(self.optimizers[opt_name], replaced[opt_name])
            carry_state(
                self.optimizers[opt_name], self._optimizer_nets(opt_name), carried[opt_name],
                optimizer_sources(self.optimizer_networks[opt_name], sources),
            )

    def _optimizer_nets(self, opt_name: str) -> list[EvolvableNetwork]:
        return [self.networks[n] for n in self.optimizer_networks[opt_name]]

    def _rebuild_optimizer(self, opt_name: str) -> None:
        """(Re)create optimizer ``opt_name`` over the current networks, empty state."""
        self.optimizers[opt_name] = make_optimizer(
            self._optimizer_nets(opt_name), lr=self._lr_for_optimizer(opt_name)
        )

    def _lr_for_optimizer(self, opt_name: str) -> float:
        return float(getattr(self, self.lr_names[0]))

    # hooks for algorithm-specific state (e.g. nothing for DQN/PPO today)
    def _extra_state(self) -> dict[str, object]:
        return {}

    def _load_extra_state(self, extra: Mapping[str, object]) -> None:
        return None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(index={self.index}, steps={self.steps[-1]}, mut={self.mut!r})"
        )


#: Spec keys that are constructor arguments of their own, not hyperparameters.
_NOT_HYPERPARAMETERS = frozenset({"net_config", "hp_config", "index", "device", "seed"})


def _registered(name: str) -> type[RLAlgorithm]:
    cls = algorithm_class(name)
    assert issubclass(cls, RLAlgorithm)  # an RL agent's state names an RL algorithm
    return cls
