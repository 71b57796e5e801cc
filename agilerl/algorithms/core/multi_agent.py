"""What every multi-agent algorithm (IPPO, MADDPG, MATD3) shares, on top of ``RLAlgorithm``.

Agents and groups. Agents are named by the env's ``possible_agents`` (``agent_ids``, in
that order). Homogeneous agents are grouped by id prefix: ``speaker_0`` -> ``speaker``,
``adversary_3`` -> ``adversary``; an id without a numeric suffix is its own group, and a
prefix group whose agents do not all have the same observation and action spaces is split
into one group per agent. Networks belong to *units*: one per group when the algorithm
shares networks within a group (``shares_group_networks()``, the default), else one per
agent. A unit's networks are registered under ``"<role>.<unit>"`` (``"actor.speaker"``),
its optimizers likewise (``"optimizer.speaker"``), so cloning, checkpoints, selection and
mutation work through ``RLAlgorithm``'s name-keyed plumbing. Always reach a network
through ``self.networks`` (``unit_network``): mutation replaces the objects.

Networks. ``net_config`` is one network section for every group, or a mapping group id
(or agent id) -> section. Encoders are the evolvable encoders of
``agilerl.modules.encoders``, picked for each unit's observation space.

Mutation. An architecture or activation mutation drawn for one network is applied to
every network of the same role with the same initial configuration (all agents' actors,
say), so a member's agents keep one architecture; mirrors (target networks, registered
with ``mirror_of``) follow their source; optimizers are rebuilt with their state carried.
A learning-rate mutation reaches every optimizer driven by that rate
(``optimizer_lrs``: optimizer role -> hyperparameter; default: the first of ``lr_names``).

Action masks. An agent whose observation space is a Dict of ``observation`` and
``action_mask`` (PettingZoo classic) gets networks over ``observation``;
``action_masks(obs)`` gives the masks, which acting must honour.

Fitness and returns. With ``sum_scores`` (the manifest's ``training.sum_scores``, default
true, as in the reference library) an episode's score is the sum over agents of their
returns, and ``test`` appends to ``fitness`` the mean of that sum over greedy episodes.
With ``sum_scores`` false the scores are kept per agent: ``test`` records each agent's
mean return in ``agent_fitness`` (one row agent id -> return per evaluation), and the
number selection, early stopping and the ``fitness`` list use is the mean of that row
over agents (the reference ranks per-agent rows by their mean too); training scores are
likewise the per-episode mean over agents. ``MultiAgentReturns`` keeps per-agent and
summed training returns.
"""

from __future__ import annotations

import copy
import json
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar, cast

import numpy as np
import numpy.typing as npt
import torch
from gymnasium import spaces

from agilerl.algorithms.core.base import ObsLike, RLAlgorithm, RLStateFields
from agilerl.core.spaces import ObsEncoder
from agilerl.core.value_types import JsonValue, Observation, Space
from agilerl.models._generated.hyperparameter_attributes import (
    MultiAgentRLAlgorithmHyperparameterAttributes,
)
from agilerl.networks.base import EvolvableNetwork
from agilerl.networks.config import NetworkConfig, normalise_net_config
from agilerl.networks.optim import (
    carry_learning_rates,
    carry_state,
    make_optimizer,
    network_parameter_sources,
    optimizer_sources,
    state_by_name,
)

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing.TypeIs from Python 3.13

    from agilerl.models.algo import AlgoSpec

MASK_KEY = "action_mask"
OBS_KEY = "observation"
#: Replay field of the action masks at the next observation (masked agents only).
NEXT_MASK = "next_action_mask"

#: Per-agent rows: a numpy batch or a tensor one.
RowsT = TypeVar("RowsT", np.ndarray, torch.Tensor)


class AgentSpaces(Protocol):
    """A multi-agent env's agents and their spaces (a PettingZoo parallel env, or a vector
    env over them, whose ``single_observation_space``/``single_action_space`` are read
    when it has them)."""

    @property
    def possible_agents(self) -> Sequence[str]: ...

    def observation_space(self, agent: str, /) -> Space: ...

    def action_space(self, agent: str, /) -> Space: ...


class MultiAgentVectorEnv(Protocol):
    """What the multi-agent loops and evaluation use of a multi-agent vector env
    (:class:`~agilerl.envs.pettingzoo_env.PettingZooVectorEnv`): agent-keyed batches."""

    @property
    def possible_agents(self) -> Sequence[str]: ...

    @property
    def num_envs(self) -> int: ...

    def reset(self, *, seed: int | None = None
              ) -> tuple[dict[str, Observation], Mapping[str, object]]: ...

    def step(self, actions: dict[str, np.ndarray], /) -> tuple[
            dict[str, Observation], Mapping[str, npt.ArrayLike], Mapping[str, npt.ArrayLike],
            Mapping[str, npt.ArrayLike], Mapping[str, object]]: ...


class MultiAgentStateFields(RLStateFields, total=False):
    """:class:`RLStateFields` and what a multi-agent algorithm adds to them."""

    network_mirrors: dict[str, str]
    sum_scores: bool
    agent_fitness: list[dict[str, float]]


# ---------------------------------------------------------------------- agents and groups
def group_id(agent_id: str) -> str:
    """``speaker_0`` -> ``speaker``; an id without a ``_<digits>`` suffix is its own group."""
    head, sep, tail = agent_id.rpartition("_")
    return head if sep and head and tail.isdigit() else agent_id


def group_agents(
    agent_ids: Sequence[str],
    observation_spaces: Mapping[str, Space],
    action_spaces: Mapping[str, Space],
) -> dict[str, list[str]]:
    """Group id -> its agents (in ``agent_ids`` order); see the module docstring."""
    by_prefix: dict[str, list[str]] = {}
    for agent in agent_ids:
        by_prefix.setdefault(group_id(agent), []).append(agent)
    groups: dict[str, list[str]] = {}
    for prefix, members in by_prefix.items():
        first = members[0]
        same = all(
            observation_spaces[a] == observation_spaces[first]
            and action_spaces[a] == action_spaces[first]
            for a in members
        )
        if same:
            groups[prefix] = members
        else:
            groups.update({a: [a] for a in members})
    return groups


def has_action_mask(space: Space) -> bool:
    """A Dict observation space of ``observation`` and ``action_mask`` (PettingZoo classic)."""
    return isinstance(space, spaces.Dict) and OBS_KEY in space.spaces and MASK_KEY in space.spaces


def network_space(space: Space) -> Space:
    """The part of an agent's observation space its networks read (masks stripped)."""
    return cast(spaces.Dict, space)[OBS_KEY] if has_action_mask(space) else space


def agent_spaces(env: AgentSpaces) -> tuple[dict[str, Space], dict[str, Space]]:
    """Per-agent (observation, action) spaces of a multi-agent vector env (or a PettingZoo
    parallel env), keyed by ``possible_agents`` in the env's order."""
    agents = list(env.possible_agents)
    obs_of = getattr(env, "single_observation_space", None) or env.observation_space
    act_of = getattr(env, "single_action_space", None) or env.action_space
    return {a: obs_of(a) for a in agents}, {a: act_of(a) for a in agents}


def is_multi_agent_env(env: object) -> TypeIs[AgentSpaces]:
    """A PettingZoo-style env (agents named by ``possible_agents``)."""
    return hasattr(env, "possible_agents")


def _part(value: Observation, key: str) -> np.ndarray:
    """Part ``key`` of a masked agent's batch (its space is a Dict, so the batch a dict)."""
    assert isinstance(value, Mapping)
    return value[key]


def _as_agent_dict(value: object, agent_ids: Sequence[str] | None, what: str
                   ) -> dict[str, Space]:
    if isinstance(value, spaces.Dict):
        value = dict(value.spaces)
    if isinstance(value, Mapping):
        items = dict(value)
        if agent_ids is not None:
            missing = [a for a in agent_ids if a not in items]
            if missing:
                raise ValueError(f"{what} has no space for agent(s) {', '.join(missing)}")
            return {a: items[a] for a in agent_ids}
        return items
    if isinstance(value, Sequence) and not isinstance(value, str):
        if agent_ids is None or len(agent_ids) != len(value):
            raise ValueError(f"{what} given as a list needs agent_ids of the same length")
        return dict(zip(agent_ids, value, strict=True))
    raise TypeError(f"{what} must be a mapping agent id -> space (or a list with agent_ids)")


# ---------------------------------------------------------------------- the base class
class MultiAgentRLAlgorithm(MultiAgentRLAlgorithmHyperparameterAttributes, RLAlgorithm):
    """Base class of multi-agent algorithms (see the module docstring).

    Subclasses build their networks in ``_build`` with :meth:`register_network` /
    :meth:`register_optimizer` for every unit of :attr:`units`, and implement
    ``get_action``, ``greedy_action`` (agent id -> batched observations in, agent id ->
    batched env actions out) and ``learn``.
    """

    #: Optimizer role (name before the dot) -> the learning-rate hyperparameter driving it;
    #: roles not listed use ``lr_names[0]``.
    optimizer_lrs: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        observation_spaces: Mapping[str, Space] | spaces.Dict | Sequence[Space],
        action_spaces: Mapping[str, Space] | spaces.Dict | Sequence[Space],
        agent_ids: Sequence[str] | None = None,
        *,
        index: int = 0,
        net_config: object = None,
        hp_config: Mapping[str, object] | None = None,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        spec: AlgoSpec | None = None,
        **hyperparameters: object,
    ) -> None:
        if observation_spaces is None or action_spaces is None:
            raise ValueError(
                f"{type(self).__name__} requires observation_spaces and action_spaces "
                "(agent id -> space)"
            )
        obs = _as_agent_dict(observation_spaces, agent_ids, "observation_spaces")
        act = _as_agent_dict(action_spaces, list(obs), "action_spaces")
        if not obs:
            raise ValueError(f"{type(self).__name__} needs at least one agent")
        self.agent_ids: list[str] = list(obs)
        self.observation_spaces: dict[str, Space] = obs
        self.action_spaces: dict[str, Space] = act
        self.groups = group_agents(self.agent_ids, obs, act)
        self.group_of = {a: g for g, members in self.groups.items() for a in members}
        self.network_mirrors: dict[str, str] = {}
        super().__init__(
            obs,  # type: ignore[arg-type]
            act,  # type: ignore[arg-type]
            index=index, net_config=net_config, hp_config=hp_config, device=device,
            seed=seed, spec=spec, **hyperparameters,
        )  # fmt: skip

    # ------------------------------------------------------------------ units
    def shares_group_networks(self) -> bool:
        """One set of networks per group (True) or per agent; read after the
        hyperparameters are set, before ``_build``."""
        return True

    @property
    def units(self) -> dict[str, list[str]]:
        """Network unit -> the agents it acts for (groups, or one agent each)."""
        if self.shares_group_networks():
            return self.groups
        return {a: [a] for a in self.agent_ids}

    def unit_of(self, agent: str) -> str:
        return self.group_of[agent] if self.shares_group_networks() else agent

    def unit_observation_space(self, unit: str) -> Space:
        """The space the unit's networks read (an action mask stripped)."""
        return network_space(self.observation_spaces[self.units[unit][0]])

    def unit_action_space(self, unit: str) -> Space:
        return self.action_spaces[self.units[unit][0]]

    def unit_net_config(self, unit: str) -> NetworkConfig:
        return self.net_configs[self.group_of[self.units[unit][0]]]

    @staticmethod
    def network_name(role: str, unit: str) -> str:
        return f"{role}.{unit}"

    def unit_network(self, role: str, unit: str) -> EvolvableNetwork:
        return self.networks[self.network_name(role, unit)]

    def register_network(
        self, role: str, unit: str, network: EvolvableNetwork, mirror_of: str | None = None
    ) -> str:
        """Add ``network`` as ``role.unit`` (``mirror_of``: the role it mirrors, e.g. the
        target network of ``actor``); returns its name."""
        name = self.network_name(role, unit)
        self.networks[name] = network.to(self.device)
        if mirror_of is not None:
            self.network_mirrors[name] = self.network_name(mirror_of, unit)
        return name

    def register_optimizer(self, role: str, unit: str, network_roles: Sequence[str]) -> str:
        """Create optimizer ``role.unit`` over the unit's networks of ``network_roles``."""
        name = self.network_name(role, unit)
        self.optimizer_networks[name] = tuple(self.network_name(r, unit) for r in network_roles)
        self._rebuild_optimizer(name)
        return name

    # ------------------------------------------------------------------ observations
    def _make_obs_encoder(self, observation_space: Space) -> None:
        self.obs_encoders = {u: ObsEncoder(self.unit_observation_space(u)) for u in self.units}
        return None

    def agent_obs(self, agent: str, obs: Mapping[str, Observation]) -> Observation:
        """The batch an agent's networks read (its mask stripped)."""
        value = obs[agent]
        return _part(value, OBS_KEY) if has_action_mask(self.observation_spaces[agent]) else value

    def agent_obs_numpy(self, agent: str, obs: Mapping[str, Observation]) -> np.ndarray:
        """One agent's batch as its unit's network-input array (what rollouts store)."""
        return self.obs_encoders[self.unit_of(agent)].numpy(self.agent_obs(agent, obs))

    def unit_obs(self, unit: str, obs: Mapping[str, Observation]) -> np.ndarray:
        """The unit's agents' batches as one network-input array, agent after agent
        (rows ``k * num_envs + i``: agent ``k`` of the unit, sub-env ``i``)."""
        encoder = self.obs_encoders[unit]
        parts = [encoder.numpy(self.agent_obs(a, obs)) for a in self.units[unit]]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def unit_tensor(self, unit: str, obs: Mapping[str, Observation]
                    ) -> torch.Tensor | dict[str, torch.Tensor]:
        """``unit_obs`` as the network input on the agent's device."""
        return self.obs_encoders[unit](self.unit_obs(unit, obs), self.device)

    def split_unit(self, unit: str, rows: RowsT) -> dict[str, RowsT]:
        """Rows stacked as in :meth:`unit_obs` -> agent id -> its rows."""
        agents = self.units[unit]
        per = len(rows) // len(agents)
        return {a: rows[k * per : (k + 1) * per] for k, a in enumerate(agents)}

    def action_masks(self, obs: Mapping[str, Observation]) -> dict[str, np.ndarray | None]:
        """Agent id -> its batch of legal-action masks (bool), or None when unmasked."""
        return {
            a: np.asarray(_part(obs[a], MASK_KEY), dtype=bool)
            if has_action_mask(self.observation_spaces[a]) else None
            for a in self.agent_ids
        }  # fmt: skip

    def unit_action_mask(self, unit: str, obs: Mapping[str, Observation]) -> np.ndarray | None:
        """The unit's masks stacked as in :meth:`unit_obs` (None when unmasked)."""
        agents = self.units[unit]
        if not has_action_mask(self.observation_spaces[agents[0]]):
            return None
        return np.concatenate([np.asarray(_part(obs[a], MASK_KEY), dtype=bool) for a in agents])

    def to_tensor(self, obs: ObsLike) -> torch.Tensor | dict[str, torch.Tensor]:
        raise TypeError("multi-agent algorithms encode observations per unit: use unit_tensor")

    # ------------------------------------------------------------------ networks config
    def _normalise_net_config(self, net_config: object) -> NetworkConfig:
        """One section for all groups, or group (or agent) id -> section."""
        spec_name = self.network_spec_name()
        per_group = _per_group_config(net_config, self.groups)
        if per_group is None:
            single = normalise_net_config(net_config, spec_name)
            self.net_configs = {g: single for g in self.groups}
            return single
        self.net_configs = {g: normalise_net_config(c, spec_name) for g, c in per_group.items()}
        # group -> section, kept where the base class keeps its one section
        return cast(NetworkConfig, dict(self.net_configs))

    # ------------------------------------------------------------------ learning rates
    def _lr_for_optimizer(self, opt_name: str) -> float:
        role = opt_name.partition(".")[0]
        return float(getattr(self, self.optimizer_lrs.get(role, self.lr_names[0])))

    def _optimizers_for_lr(self, lr_name: str) -> list[str]:
        default = self.lr_names[0]
        return [o for o in self.optimizers
                if self.optimizer_lrs.get(o.partition(".")[0], default) == lr_name]

    # ------------------------------------------------------------------ mutation
    def mutation_families(self) -> list[list[str]]:
        """Networks mutated together: same role and same initial configuration (mirrors
        excluded; they follow their source)."""
        families: dict[str, list[str]] = {}
        for name, network in self.networks.items():
            if name in self.network_mirrors:
                continue
            role, _, unit = name.partition(".")
            config = self.unit_net_config(unit) if unit in self.units else {}
            kinds = sorted((n, e.kind) for n, e in network.encoder_modules().items())
            key = json.dumps([role, kinds, config], sort_keys=True, default=str)
            families.setdefault(key, []).append(name)
        return list(families.values())

    def mutable_networks(self) -> list[str]:
        """One representative per mutation family (its plan applies to the whole family)."""
        return [family[0] for family in self.mutation_families()]

    def network_mirror_sources(self) -> dict[str, str]:
        return dict(self.network_mirrors)

    def apply_architecture_mutation(self, network_name: str,
                                    plan: Mapping[str, JsonValue]) -> None:
        """Apply ``plan`` to every network of ``network_name``'s family and their mirrors;
        optimizers training any of them are rebuilt with their state carried."""
        family = next((f for f in self.mutation_families() if network_name in f), [network_name])
        names = list(family) + [m for m, src in self.network_mirrors.items() if src in family]
        affected = [o for o, nets in self.optimizer_networks.items() if set(nets) & set(names)]
        carried = {o: state_by_name(self.optimizers[o], self._optimizer_nets(o)) for o in affected}
        replaced = {o: self.optimizers[o] for o in affected}
        sources = network_parameter_sources(self.networks, names, plan)
        for name in names:
            self.networks[name] = self.networks[name].mutated(plan)
        for opt_name in affected:
            self._rebuild_optimizer(opt_name)
            carry_learning_rates(self.optimizers[opt_name], replaced[opt_name])
            carry_state(
                self.optimizers[opt_name], self._optimizer_nets(opt_name), carried[opt_name],
                optimizer_sources(self.optimizer_networks[opt_name], sources),
            )

    def _rebuild_optimizer(self, opt_name: str) -> None:
        self.optimizers[opt_name] = make_optimizer(
            self._optimizer_nets(opt_name), lr=self._lr_for_optimizer(opt_name)
        )

    # ------------------------------------------------------------------ acting
    @abstractmethod
    def greedy_action(self, obs: Mapping[str, Observation]) -> dict[str, np.ndarray]:  # type: ignore[override]
        """Deterministic actions: agent id -> batch of env actions (every agent, live or
        not; the vector env ignores actions of absent agents)."""

    # ------------------------------------------------------------------ evaluation
    #: Score episodes by the sum over agents (True) or per agent (see the module docstring).
    sum_scores: bool = True

    def test(
        self, env: MultiAgentVectorEnv, max_steps: int | None = None, loop: int = 1,
        seed: int | None = None
    ) -> float:
        """Greedy evaluation on a multi-agent vector env (``greedy_returns``): the mean
        over episodes of the summed-over-agents return, or with ``sum_scores`` false the
        mean over agents of their mean returns (each recorded in ``agent_fitness``);
        appended to ``fitness``."""
        returns = greedy_returns(self, env, max_steps=max_steps, loop=loop, seed=seed)
        per_agent = {a: float(np.mean(r)) for a, r in returns.items()}
        self.agent_fitness.append(per_agent)
        if self.sum_scores:
            fitness = float(np.mean(np.sum(list(returns.values()), axis=0)))
        else:
            fitness = float(np.mean(list(per_agent.values())))
        self.fitness.append(fitness)
        return fitness

    @property
    def agent_fitness(self) -> list[dict[str, float]]:
        """Per evaluation, agent id -> its mean greedy return."""
        return cast(list[dict[str, float]], self.__dict__.setdefault("_agent_fitness", []))

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, object]:
        state = super().get_state()
        state["network_mirrors"] = dict(self.network_mirrors)
        state["sum_scores"] = bool(self.sum_scores)
        state["agent_fitness"] = copy.deepcopy(self.agent_fitness)
        return state

    def set_state(self, state: Mapping[str, object]) -> None:
        super().set_state(state)
        state = cast(MultiAgentStateFields, state)  # a get_state dict (or its torch.load)
        self.sum_scores = bool(state.get("sum_scores", True))
        self.__dict__["_agent_fitness"] = copy.deepcopy(list(state.get("agent_fitness", [])))


def _per_group_config(net_config: object, groups: Mapping[str, list[str]]
                      ) -> dict[str, object] | None:
    """``net_config`` keyed by group or agent id -> group id -> section; None when it is
    one section for everyone."""
    if not isinstance(net_config, Mapping) or not net_config:
        return None
    agents = {a for members in groups.values() for a in members}
    if not set(net_config) <= set(groups) | agents:
        return None
    per_group: dict[str, object] = {}
    for group, members in groups.items():
        keys = [group, *members]
        found = next((net_config[k] for k in keys if k in net_config), None)
        if found is None:
            raise ValueError(
                f"net_config is given per agent group but has no entry for group {group!r} "
                f"(agents {', '.join(members)})"
            )
        per_group[group] = found
    return per_group


# ---------------------------------------------------------------------- stepping & returns
class MultiAgentStepper:
    """Steps a multi-agent vector env (NEXT_STEP autoreset) and says which entries are real.

    ``step`` returns ``(obs, rewards, terminated, truncated, acted, ended, infos)``:
    ``acted[agent]`` (bool per sub-env) is True where the agent observed the previous
    observation as a live agent and the step was not an autoreset step, i.e. where
    ``(obs_before, action, reward, obs_after, terminated)`` is a transition of that agent;
    ``ended`` (per sub-env) marks the steps that finished a sub-env's episode (every
    agent done). The next step of an ended sub-env is its reset step (``acted`` all False).
    """

    def __init__(self, env: MultiAgentVectorEnv) -> None:
        self.env = env
        self.agent_ids = list(env.possible_agents)
        self.num_envs = int(env.num_envs)
        self._resetting = np.zeros(self.num_envs, dtype=bool)
        self._active: dict[str, np.ndarray] = {}

    def reset(self, seed: int | None = None) -> dict[str, Observation]:
        obs, infos = self.env.reset(seed=seed)
        self._resetting[:] = False
        self._active = _active_flags(infos, self.agent_ids, self.num_envs)
        return obs

    def step(self, actions: Mapping[str, np.ndarray]) -> tuple[
            dict[str, Observation], Mapping[str, npt.ArrayLike], Mapping[str, npt.ArrayLike],
            Mapping[str, npt.ArrayLike], dict[str, np.ndarray], np.ndarray, Mapping[str, object]]:
        obs, rewards, terminated, truncated, infos = self.env.step(dict(actions))
        real = ~self._resetting
        acted = {a: self._active[a] & real for a in self.agent_ids}
        ended = np.ones(self.num_envs, dtype=bool)
        for a in self.agent_ids:
            ended &= np.asarray(terminated[a], dtype=bool) | np.asarray(truncated[a], dtype=bool)
        ended &= real
        self._resetting = ended
        self._active = _active_flags(infos, self.agent_ids, self.num_envs)
        return obs, rewards, terminated, truncated, acted, ended, infos


def _active_flags(infos: object, agent_ids: Sequence[str], num_envs: int) -> dict[str, np.ndarray]:
    flags = {}
    for a in agent_ids:
        info = infos.get(a, {}) if isinstance(infos, Mapping) else {}
        active = info.get("active") if isinstance(info, Mapping) else None
        flags[a] = (np.ones(num_envs, dtype=bool) if active is None
                    else np.asarray(active, dtype=bool).copy())
    return flags


class MultiAgentReturns:
    """Running per-agent returns per sub-env, and those of the episodes completed."""

    def __init__(self, agent_ids: Sequence[str], num_envs: int) -> None:
        self.agent_ids = list(agent_ids)
        self.running = {a: np.zeros(num_envs, dtype=np.float64) for a in self.agent_ids}
        self.completed: list[dict[str, float]] = []

    def update(
        self, rewards: Mapping[str, npt.ArrayLike], acted: Mapping[str, np.ndarray],
        ended: np.ndarray,
    ) -> None:
        for a in self.agent_ids:
            self.running[a] += np.where(acted[a], np.asarray(rewards[a], dtype=np.float64), 0.0)
        for i in np.flatnonzero(ended):
            self.completed.append({a: float(self.running[a][i]) for a in self.agent_ids})
            for a in self.agent_ids:
                self.running[a][i] = 0.0

    def mean_total(self) -> float:
        """Mean summed-over-agents return of the completed episodes (NaN if none)."""
        if not self.completed:
            return float("nan")
        return float(np.mean([sum(ep.values()) for ep in self.completed]))

    def score(self, sum_scores: bool = True) -> float:
        """The training score: :meth:`mean_total`, or with ``sum_scores`` false the mean
        over episodes of the agents' mean return (NaN if no episode completed)."""
        if sum_scores or not self.completed:
            return self.mean_total()
        return float(np.mean([np.mean(list(ep.values())) for ep in self.completed]))

    def mean_per_agent(self) -> dict[str, float]:
        """Agent id -> its mean return over the completed episodes (empty if none)."""
        if not self.completed:
            return {}
        return {a: float(np.mean([ep[a] for ep in self.completed])) for a in self.agent_ids}


def evaluate_multi_agent(
    agent: MultiAgentRLAlgorithm, env: MultiAgentVectorEnv, *, max_steps: int | None = None,
    loop: int = 1, seed: int | None = None,
) -> float:
    """Mean summed-over-agents return of ``loop`` rounds of one greedy episode per sub-env
    (:func:`greedy_returns`)."""
    returns = greedy_returns(agent, env, max_steps=max_steps, loop=loop, seed=seed)
    return float(np.mean(np.sum(list(returns.values()), axis=0)))


def greedy_returns(
    agent: MultiAgentRLAlgorithm, env: MultiAgentVectorEnv, *, max_steps: int | None = None,
    loop: int = 1, seed: int | None = None,
) -> dict[str, np.ndarray]:
    """Agent id -> its returns in ``loop`` rounds of one greedy episode per sub-env.

    As ``evaluate_greedy`` for single agents: each round resets the env (the first with
    ``seed``); a sub-env stops counting once its first episode ends (every agent done);
    ``max_steps`` caps a round's vector steps (unfinished episodes count partially).
    """
    stepper = MultiAgentStepper(env)
    rounds: dict[str, list[np.ndarray]] = {a: [] for a in stepper.agent_ids}
    for round_index in range(max(1, int(loop))):
        obs = stepper.reset(seed=seed if round_index == 0 else None)
        returns = MultiAgentReturns(stepper.agent_ids, stepper.num_envs)
        running = np.ones(stepper.num_envs, dtype=bool)
        steps = 0
        while running.any() and (max_steps is None or steps < max_steps):
            obs, rewards, _, _, acted, ended, _ = stepper.step(agent.greedy_action(obs))
            returns.update(rewards, {a: acted[a] & running for a in acted}, np.zeros_like(ended))
            running &= ~ended
            steps += 1
        for a in stepper.agent_ids:
            rounds[a].append(returns.running[a].copy())
    return {a: np.concatenate(r) for a, r in rounds.items()}
