"""Mutation of population members: architecture, weights, activation, RL hyperparameters.

For every member one mutation kind is drawn with probabilities proportional to
``no_mutation``, ``architecture``, ``parameters``, ``activation`` and ``rl_hp`` (the
manifest's ``no_mut``, ``arch_mut``, ``params_mut``, ``act_mut``, ``rl_hp_mut``). An
architecture mutation is a *layer* change (add or remove a hidden layer) with probability
``new_layer_prob`` (the manifest's ``new_layer``), else a *node* change (add or remove
units of a hidden layer or of the latent width); it is drawn for one of the member's
mutable networks and applied identically to its mirrors (e.g. a DQN target network).
Where a change keeps what the network computes (new units, which start with zero outgoing
weights; a new identity layer where no layer norm or activation alters what it passes on:
the network's ``preserves_function(plan)``, see :mod:`agilerl.modules.mlp`), the targets
keep their lagged weights and the optimizers their moments. Every other architecture
change (units or a layer removed, a layer added before a layer norm, an LSTM's new layer)
and an activation change (``act_mut``) alter the function: the targets then become copies
of the networks they follow and the optimizers start afresh
(``agent.restart_targets_and_optimizers``), as after a weight mutation, since a lagged copy
of a function that no longer exists is no target to learn towards.

* ``params_mut``: first the dormant neurons of every network the member trains are
  re-initialised (ReGraMa, :mod:`agilerl.hpo.dormant`, with ``dormant_threshold``); then,
  in a random non-empty subset of one network's weight matrices (biases and norms
  untouched), 10% of the entries are drawn; each gets Gaussian noise of standard
  deviation ``mutation_sd * |w|`` (relative to the weight, as the reference library's
  ``mutation_sd`` means), except 5% of them, which are redrawn from N(0, 1). Then, as in
  the reference, target networks are copied from the networks they follow and the
  optimizers start afresh (``agent.restart_targets_and_optimizers``).
* ``act_mut``: the hidden activation of one network becomes another of
  ``activation_selection``.
* ``rl_hp_mut``: one hyperparameter listed in the member's ``hp_config`` (else this
  operator's ``rl_hp_selection``) is multiplied by its ``grow_factor`` or
  ``shrink_factor`` (even odds) and clipped to ``[min, max]``; integers move by at least
  one. Learning rates are pushed into the optimizer (``agent.set_hyperparameter``).

All randomness comes from the operator's own ``np.random.Generator`` (``rand_seed``),
exposed by ``get_state``/``set_state``; members are changed only through their public
API (``mutable_networks``, ``apply_architecture_mutation``, ``set_hyperparameter``).

Each member mutated appends a record of what changed to ``records`` (see
:mod:`agilerl.hpo.mutation_record`; the run's event log takes them with
:meth:`Mutations.take_records`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict, TypeVar

import numpy as np
import torch

from agilerl.core.member_training import Agent, EvolvableAgent
from agilerl.hpo import mutation_record
from agilerl.hpo.dormant import revive_dormant_neurons
from agilerl.hpo.mutation_record import MutationRecord
from agilerl.hpo.ranges import plain_hp_config

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11

    from agilerl.models.hpo import MutationSpec, RLHyperparameter

#: Activations an ``act_mut`` chooses from unless ``activation_selection`` says otherwise.
DEFAULT_ACTIVATIONS = ("ReLU", "ELU", "GELU")
#: Share of a chosen weight matrix's entries a parameter mutation draws.
PARAM_FRACTION = 0.1
#: Share of the drawn entries that are redrawn from N(0, 1) instead of perturbed.
PARAM_RESET_FRACTION = 0.05
#: Bound on a mutated weight's magnitude.
PARAM_LIMIT = 1e6

KINDS = ("None", "arch", "param", "act", "rl_hp")

A = TypeVar("A", bound=Agent)


class _Forwarded(TypedDict, total=False):
    activation_selection: Sequence[str]
    mutate_elite: bool


class MutationOptions(_Forwarded, total=False):
    """The constructor arguments :meth:`Mutations.from_spec` does not read from the spec
    (``rand_seed`` overrides the spec's)."""

    rand_seed: int | None


class MutationsState(TypedDict):
    """The operator's checkpoint: its generator's ``bit_generator.state``."""

    rng: Mapping[str, object]


class Mutations:
    """Mutation operator (see module docstring); ``mutation(population)`` applies it."""

    def __init__(
        self,
        no_mutation: float,
        architecture: float,
        new_layer_prob: float,
        parameters: float,
        activation: float,
        rl_hp: float,
        mutation_sd: float = 0.1,
        dormant_threshold: float = 0.01,
        activation_selection: Sequence[str] = DEFAULT_ACTIVATIONS,
        mutate_elite: bool = True,
        rl_hp_selection: Mapping[str, RLHyperparameter | Mapping[str, float]] | None = None,
        rand_seed: int | None = None,
    ):
        probs = np.array(
            [no_mutation, architecture, parameters, activation, rl_hp], dtype=np.float64
        )
        if (probs < 0).any() or probs.sum() <= 0:
            raise ValueError("mutation probabilities must be >= 0 and not all zero")
        self.probabilities = probs / probs.sum()
        # The mutation before training is there to diversify the population, so it never
        # draws "no mutation" (as the reference's); without any other kind it is one.
        changes = probs.copy()
        changes[0] = 0.0
        self.pre_training_probabilities = (
            changes / changes.sum() if changes.sum() > 0 else np.eye(len(KINDS))[0])
        self.new_layer_prob = float(new_layer_prob)
        self.mutation_sd = float(mutation_sd)
        if dormant_threshold < 0:
            raise ValueError("dormant_threshold must be >= 0")
        self.dormant_threshold = float(dormant_threshold)
        self.activation_selection = list(activation_selection)
        self.mutate_elite = bool(mutate_elite)
        self.rl_hp_selection = plain_hp_config(rl_hp_selection)
        self.rng = np.random.default_rng(rand_seed)
        #: One record per member mutated, in order (kind, changes, description).
        self.records: list[MutationRecord] = []
        self._network: str | None = None  # the network the current mutation picked

    @classmethod
    def from_spec(cls, spec: MutationSpec, **kwargs: Unpack[MutationOptions]) -> Mutations:
        """From a ``MutationSpec`` (probabilities, ``mutation_sd``, ``rand_seed``, hp ranges)."""
        p = spec.probabilities
        forwarded: _Forwarded = kwargs  # what is left once rand_seed is popped below
        return cls(
            no_mutation=p.no_mut,
            architecture=p.arch_mut,
            new_layer_prob=p.new_layer,
            parameters=p.params_mut,
            activation=p.act_mut,
            rl_hp=p.rl_hp_mut,
            mutation_sd=spec.mutation_sd,
            dormant_threshold=spec.dormant_threshold,
            rl_hp_selection=spec.rl_hp_selection,
            rand_seed=kwargs.pop("rand_seed", spec.rand_seed),
            **forwarded,
        )

    # ------------------------------------------------------------------ population
    def mutation(
        self,
        population: Sequence[A],
        pre_training_mut: bool = False,
        indices: Sequence[int] | None = None,
    ) -> list[A]:
        """Mutate every member in place (slot 0, the elite, only if ``mutate_elite`` or
        ``pre_training_mut``); returns the population. ``agent.mut`` names what changed.
        Before training (``pre_training_mut``) "no mutation" is never drawn.

        ``indices`` (MF-PBT): mutate only the members whose ``index`` is listed, in
        population order, with no elite exception; the others are not touched.
        """
        wanted = None if indices is None else {int(i) for i in indices}
        for slot, agent in enumerate(population):
            if wanted is not None and int(agent.index) not in wanted:
                continue
            weights = self.pre_training_probabilities if pre_training_mut else self.probabilities
            drawn = KINDS[int(self.rng.choice(len(KINDS), p=weights))]
            kept = wanted is None and slot == 0 and not (self.mutate_elite or pre_training_mut)
            kind = "None" if kept else drawn
            before = mutation_record.snapshot(agent)
            self._network = None
            agent.mut = self.mutate(agent, kind)
            self.records.append(mutation_record.record(
                agent.mut, kind, self._network, before, mutation_record.snapshot(agent),
                elite_kept=kept))
        return list(population)

    def take_records(self) -> list[MutationRecord]:
        """The records of the members mutated since the last call, in order; clears them."""
        records, self.records = self.records, []
        return records

    def mutate(self, agent: Agent, kind: str) -> str:
        """Apply one mutation of ``kind`` to ``agent``; returns the label stored in ``mut``."""
        if kind == "rl_hp":
            return self.rl_hyperparam_mutation(agent)
        if kind not in ("arch", "param", "act"):
            return "None"
        if not isinstance(agent, EvolvableAgent):
            raise TypeError(f"a {kind!r} mutation needs networks to mutate; "
                            f"{type(agent).__name__} has none")
        if kind == "arch":
            return self.architecture_mutate(agent)
        if kind == "param":
            return self.parameter_mutation(agent)
        return self.activation_mutation(agent)

    # ------------------------------------------------------------------ kinds
    def architecture_mutate(self, agent: EvolvableAgent) -> str:
        network = self._pick_network(agent)
        if self.rng.random() < self.new_layer_prob:
            ops = (
                ["add_layer", "remove_layer"]
                if self.rng.random() < 0.5
                else ["remove_layer", "add_layer"]
            )
        else:
            ops = (
                ["add_nodes", "remove_nodes"]
                if self.rng.random() < 0.5
                else ["remove_nodes", "add_nodes"]
            )
        for op in ops:  # fall back to the opposite change when at a bound
            plan = agent.networks[network].draw_plan(op, self.rng, self.activation_selection)
            if plan is not None:
                keeps_function = agent.networks[network].preserves_function(plan)
                agent.apply_architecture_mutation(network, plan)
                if not keeps_function:
                    agent.restart_targets_and_optimizers()
                return op
        return "None"

    def activation_mutation(self, agent: EvolvableAgent) -> str:
        network = self._pick_network(agent)
        plan = agent.networks[network].draw_plan("activation", self.rng, self.activation_selection)
        if plan is None:
            return "None"
        agent.apply_architecture_mutation(network, plan)
        agent.restart_targets_and_optimizers()
        return "act"

    def parameter_mutation(self, agent: EvolvableAgent) -> str:
        for name in agent.trained_networks():
            revive_dormant_neurons(agent.networks[name], self.dormant_threshold, self.rng)
        network = agent.networks[self._pick_network(agent)]
        # weight matrices: ``linears.0.weight``, an LSTM's ``weight_ih_l0`` ...
        weights = [param for name, param in network.named_parameters()
                   if param.dim() >= 2 and name.rsplit(".", 1)[-1].startswith("weight")]
        if not weights:
            return "param"
        count = int(self.rng.integers(1, len(weights) + 1))
        chosen = sorted(self.rng.choice(len(weights), size=count, replace=False))
        with torch.no_grad():
            for index in chosen:
                _mutate_entries(weights[index], self.rng, self.mutation_sd)
        agent.restart_targets_and_optimizers()
        return "param"

    def rl_hyperparam_mutation(self, agent: Agent) -> str:
        ranges = agent.hp_config or self.rl_hp_selection
        names = [n for n in ranges if n in agent.mutable_hyperparameters()]
        if not names:
            return "None"
        name = names[int(self.rng.integers(len(names)))]
        spec = ranges[name]
        current = getattr(agent, name)
        grow = self.rng.random() < 0.5
        value = current * (spec["grow_factor"] if grow else spec["shrink_factor"])
        if isinstance(current, int) and not isinstance(current, bool):
            value = round(value)
            if value == current:
                value = current + (1 if grow else -1)
        value = min(max(value, spec["min"]), spec["max"])
        agent.set_hyperparameter(name, value)
        return name

    def _pick_network(self, agent: EvolvableAgent) -> str:
        names = agent.mutable_networks()
        self._network = names[int(self.rng.integers(len(names)))]
        return self._network

    # ------------------------------------------------------------------ checkpoints
    def get_state(self) -> MutationsState:
        return {"rng": copy.deepcopy(self.rng.bit_generator.state)}

    def set_state(self, state: MutationsState) -> None:
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])


def _mutate_entries(weight: torch.Tensor, rng: np.random.Generator, strength: float) -> None:
    """Draw ``PARAM_FRACTION`` of ``weight``'s entries (with replacement; an entry drawn
    twice is changed once, so that the result is well defined): each is redrawn
    from N(0, 1) with probability ``PARAM_RESET_FRACTION``, else perturbed by noise of
    standard deviation ``strength * |w|`` (so the noise scales with the weight)."""
    flat = weight.view(-1)
    draws = int(np.ceil(PARAM_FRACTION * flat.numel()))
    index = torch.from_numpy(np.unique(rng.integers(0, flat.numel(), size=draws)))
    index = index.to(flat.device)
    current = flat[index].cpu().numpy().astype(np.float64)
    reset = rng.uniform(size=len(current)) < PARAM_RESET_FRACTION
    noise = rng.standard_normal(len(current))
    new = np.where(reset, noise, current + noise * np.abs(current) * strength)
    flat[index] = torch.from_numpy(
        np.clip(new, -PARAM_LIMIT, PARAM_LIMIT)).to(flat.dtype).to(flat.device)
