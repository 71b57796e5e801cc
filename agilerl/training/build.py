"""Building the parts a LocalTrainer trains with: agents, memory, HPO operators, device."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias

from agilerl.checkpoint.rng import derive_seed
from agilerl.core.algorithm_spec import algo_name
from agilerl.core.errors import (
    ArgumentError,
    InsufficientMemoryError,
    UnsupportedAlgorithmError,
    memory_exhausted,
)
from agilerl.training import hp_bounds
from agilerl.training.networks import resolve_network_spec
from agilerl.training.paradigms import paradigm

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from typing_extensions import TypeIs  # typing.TypeIs from Python 3.13

    from agilerl.algorithms.core.multi_agent import AgentSpaces
    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.components.replay_buffer import ReplayBuffer
    from agilerl.core.member_training import Agent
    from agilerl.core.value_types import Space
    from agilerl.hpo.multi_frequency import MultiFrequencySelection
    from agilerl.hpo.mutation import Mutations
    from agilerl.hpo.tournament import TournamentSelection
    from agilerl.models.algo import AlgoSpec
    from agilerl.models.hpo import (
        MultiFrequencySelectionSpec,
        MutationSpec,
        TournamentSelectionSpec,
    )
    from agilerl.models.training import ReplayBufferSpec, TrainingSpec
    from agilerl.networks.base import NetworkArchitecture
    from agilerl.training.trainer import LocalTrainer

_SEED_AGENT = 0xA6E7
_SEED_MEMORY = 0xB0FF
_SEED_SELECTION = 0x5E1E
_SUBPOPULATION_ID = "subpopulation_id"


def resolve_device(device: str | torch.device | None) -> str:
    """``"auto"``/None -> ``"cuda"`` when available else ``"cpu"``; anything else is checked
    to be a torch device present on this machine (:class:`DeviceUnavailableError` if not),
    before anything is built on it."""
    import torch

    if device is None or str(device) == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    from agilerl.core.errors import DeviceUnavailableError

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise DeviceUnavailableError(
            f"device {str(device)!r} is not a torch device; use 'cpu', 'cuda', 'cuda:N', "
            "'mps' or 'auto'"
        ) from None
    problem = _device_problem(parsed)
    if problem is not None:
        raise DeviceUnavailableError(f"device {str(device)!r} is not available: {problem}")
    return str(device)


def _device_problem(device: torch.device) -> str | None:
    """Why ``device`` cannot be used here, or None when it can."""
    import torch

    if device.type == "cuda":
        if torch.version.cuda is None and torch.version.hip is None:
            return (f"this torch ({torch.__version__}) was built without CUDA support; "
                    "use --device cpu (device='cpu') or install a CUDA build of torch")
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            return "no CUDA GPU is visible on this machine; use --device cpu (device='cpu')"
        if device.index is not None and device.index >= count:
            return (f"this machine has {count} CUDA device(s) (cuda:0 to cuda:{count - 1})")
        return None
    if device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        return None if mps is not None and mps.is_available() else \
            "MPS (Apple GPU) is not available on this machine"
    if device.type != "cpu":
        return f"agilerl trains on 'cpu', 'cuda' or 'mps', not {device.type!r}"
    return None


def resolve_seed(seed: int | None) -> int:
    """The run seed: the one given, or a fresh random one (recorded in checkpoints)."""
    if seed is None:
        return secrets.randbits(31)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ArgumentError(f"seed={seed!r:.40}: expected a whole number >= 0 or None, got "
                            f"{type(seed).__name__}")
    if seed < 0:
        raise ArgumentError(f"seed must be >= 0, got {seed}")
    return int(seed)


def check_selection(selection_spec: object, training_spec: TrainingSpec | None = None) -> None:
    """Refuse selection strategies this version cannot run; resolve an MF-PBT layout.

    An MF-PBT spec built in Python (not from a manifest) gets its bracket sizes resolved for
    ``training.pop_size`` and written back here, with the manifest's errors (``ValueError``).
    """
    strategy = getattr(selection_spec, "strategy", "tournament")
    if selection_spec is None or strategy == "tournament":
        return
    if strategy != "multi_frequency":
        raise UnsupportedAlgorithmError(
            f"selection strategy {strategy!r} is not implemented in this version of agilerl "
            "(LocalTrainer supports 'tournament' and 'multi_frequency')"
        )
    if training_spec is not None:
        from agilerl.models.hpo import MultiFrequencySelectionSpec

        assert isinstance(selection_spec, MultiFrequencySelectionSpec)  # multi_frequency
        selection_spec.resolve_layout(int(training_spec.pop_size),
                                      bool(getattr(training_spec, "pop_size_given", True)))


def is_multi_frequency(selection_spec: object) -> TypeIs[MultiFrequencySelectionSpec]:
    """True for an MF-PBT (``strategy: multi_frequency``) selection spec."""
    return getattr(selection_spec, "strategy", None) == "multi_frequency"


class _EnvSpaces(Protocol):
    """A (vector) env's spaces; a multi-agent env has ``possible_agents`` instead."""

    @property
    def observation_space(self) -> Space: ...

    @property
    def action_space(self) -> Space: ...


#: What a member is built for: a space, or agent id -> space for a multi-agent env.
AgentSpace: TypeAlias = "Space | dict[str, Space]"


def _spaces(env: _EnvSpaces | AgentSpaces) -> tuple[AgentSpace, AgentSpace]:
    """(observation, action) spaces the population is built for: one each for a
    Gymnasium vector env; agent id -> space mappings for a multi-agent (PettingZoo) one."""
    from agilerl.algorithms.core.multi_agent import agent_spaces, is_multi_agent_env

    if is_multi_agent_env(env):
        return agent_spaces(env)
    obs = getattr(env, "single_observation_space", None) or env.observation_space
    act = getattr(env, "single_action_space", None) or env.action_space
    return obs, act


def _network_space(obs_space: AgentSpace) -> Space:
    """The space a deferred network section is resolved for: multi-agent, the first
    agent's (action mask stripped); every group then gets that encoder arch."""
    if isinstance(obs_space, dict):
        from agilerl.algorithms.core.multi_agent import network_space

        return network_space(next(iter(obs_space.values())))
    return obs_space


def make_population(trainer: LocalTrainer) -> list[Agent]:
    """``pop_size`` agents, each seeded from the run seed and its slot index."""
    from agilerl.algorithms import build_algorithm

    own_population = paradigm(trainer.paradigm).make_population
    if own_population is not None:
        return own_population(trainer)
    spec, obs_space, action_space, net_config = _agent_inputs(
        trainer, getattr(trainer.algorithm_spec, "net_config", None))
    algorithm_spec = trainer.algorithm_spec
    if net_config is not None and "net_config" in type(algorithm_spec).model_fields:
        from agilerl.models.algo import MultiAgentRLAlgorithmSpec, RLAlgorithmSpec

        # As in the reference: once built, the spec holds the network that was built.
        assert isinstance(algorithm_spec, RLAlgorithmSpec | MultiAgentRLAlgorithmSpec)
        algorithm_spec.net_config = net_config
    hp_config = hp_bounds.hp_config(trainer.algorithm_spec, trainer.mutation_spec)
    pop_size = int(trainer.training_spec.pop_size)
    try:
        population: list[Agent] = [
            build_algorithm(
                spec, obs_space, action_space, index=i, net_config=net_config,
                hp_config=hp_config, device=trainer.device,
                seed=derive_seed(trainer.seed, _SEED_AGENT, i),
            )
            for i in range(pop_size)
        ]
    except (MemoryError, RuntimeError) as exc:
        if not memory_exhausted(exc):
            raise
        raise InsufficientMemoryError(
            f"out of memory building {pop_size} {algo_name(spec)} agents on {trainer.device}: "
            f"the network is too large for this machine ({_widest_layer(net_config)}); make "
            "it narrower or shallower, or lower training.pop_size") from None
    sum_scores = getattr(trainer.training_spec, "sum_scores", None)
    for agent in population:
        if hasattr(agent, "sum_scores") and sum_scores is not None:
            agent.sum_scores = bool(sum_scores)  # multi-agent scoring (per agent or summed)
    return population


def _agent_inputs(trainer: LocalTrainer, network: object
                  ) -> tuple[AlgoSpec, AgentSpace, AgentSpace, object]:
    """The spec, spaces and resolved network config an agent of ``trainer`` is built from,
    for the ``network`` section ``network`` (None: the algorithm's default network)."""
    obs_space, action_space = _spaces(trainer.env)
    spec = trainer.algorithm_spec
    if "num_envs" in type(spec).model_fields:
        spec = spec.model_copy(update={"num_envs": int(getattr(trainer.env, "num_envs", 1))})
    net_config = resolve_network_spec(
        network, _network_space(obs_space), type(spec).network_spec,
        recurrent=bool(getattr(spec, "recurrent", False)),
    )
    if "net_config" in type(spec).model_fields:  # the spec would fill in its own otherwise
        spec = spec.model_copy(update={"net_config": net_config})
    return spec, obs_space, action_space, net_config


def network_architectures(trainer: LocalTrainer,
                          network: object) -> dict[str, NetworkArchitecture]:
    """The architectures of an agent built from the ``network`` section ``network`` (a
    mapping, or None for the algorithm's default): two sections build the same members
    exactly when these are equal, however each is spelled (defaults written out or not)."""
    from agilerl.algorithms import build_algorithm

    spec, obs_space, action_space, net_config = _agent_inputs(trainer, network)
    agent = build_algorithm(spec, obs_space, action_space, index=0, net_config=net_config,
                            hp_config=None, device="cpu", seed=0)
    return {name: net.architecture() for name, net in agent.networks.items()}


#: ``network`` fields that set a layer's width (not the mutation bounds beside them).
_LAYER_SIZE_KEYS = frozenset({"hidden_size", "latent_dim", "channel_size"})


def _widest_layer(net_config: object) -> str:
    """The ``network`` field holding the widest layer, as the manifest writes it."""
    sizes: list[tuple[int, str, int | list[object]]] = []

    def walk(value: Mapping[str, object], path: str) -> None:
        for key, item in value.items():
            if isinstance(item, dict):
                walk(item, f"{path}.{key}")
            elif key in _LAYER_SIZE_KEYS and isinstance(item, int | list):
                widths = [w for w in (item if isinstance(item, list) else [item])
                          if isinstance(w, int)]
                if widths:
                    sizes.append((max(widths), f"{path}.{key}", item))

    dumped = net_config.model_dump() if hasattr(net_config, "model_dump") else net_config
    walk(dumped if isinstance(dumped, dict) else {}, "network")
    if not sizes:
        return "see the network section"
    _, path, shown = max(sizes, key=lambda found: found[0])
    return f"{path}={shown}"


def make_memory(trainer: LocalTrainer) -> ReplayBuffer | OfflineDataset | None:
    """The shared replay memory of a run whose loop keeps one (None otherwise).

    Without a ``replay_buffer`` section the schema's ``ReplayBufferSpec`` defaults apply.
    ``per_buffer`` gives a prioritized memory (``per_buffer_args.alpha``); ``n_step_buffer``
    folds transitions into ``n_step_buffer_args.n_step``-step returns with the algorithm's
    ``gamma`` (both: a prioritized memory of n-step transitions). Both need an algorithm
    that learns from them (its ``replay_features``); others are refused. Multi-agent
    off-policy loops get a memory of joint transitions (``MultiAgentReplayBuffer``).
    """
    loop = paradigm(trainer.paradigm)
    if loop.memory is not None:
        return loop.memory(trainer)
    if not loop.replay_memory:
        return None
    from agilerl.components.replay_memory import build_replay_memory

    spec = trainer.replay_buffer_spec
    if spec is None:
        import warnings

        from agilerl.models import ReplayBufferSpec

        spec = ReplayBufferSpec()
        warnings.warn(
            f"no replay_buffer section: using a replay buffer of {spec.max_size:,} "
            "transitions", UserWarning, stacklevel=4,
        )
    _check_replay_features(trainer.algorithm_spec, spec)
    return build_replay_memory(spec, trainer.algorithm_spec, device=trainer.device,
                               seed=derive_seed(trainer.seed, _SEED_MEMORY),
                               multi_agent=loop.joint_memory, joint=loop.joint_memory)


def _check_replay_features(algorithm_spec: object, buffer_spec: ReplayBufferSpec) -> None:
    """Refuse memories the algorithm cannot learn from (its ``replay_features``); warn about
    settings they make inert."""
    per, n_step = bool(buffer_spec.per_buffer), bool(buffer_spec.n_step_buffer)
    name = algo_name(algorithm_spec)
    features: frozenset[str] = getattr(algorithm_spec, "replay_features", frozenset())
    wanted = [f for f, on in (("per", per), ("n_step", n_step)) if on and f not in features]
    if wanted:
        flags = " and ".join(f"replay_buffer.{f}_buffer" for f in wanted)
        raise UnsupportedAlgorithmError(
            f"{flags}: {name} does not learn from "
            f"{'prioritized' if wanted[0] == 'per' else 'n-step'} replay in this version of "
            "agilerl; set it to false"
        )
    if not n_step and bool(getattr(algorithm_spec, "combined_reward", False)):
        import warnings

        warnings.warn("algorithm.combined_reward = True has no effect without "
                      "replay_buffer.n_step_buffer (there is no n-step loss to combine)",
                      UserWarning, stacklevel=5)


def make_mutations(mutation_spec: MutationSpec | None, algorithm_spec: object,
                   seed: int) -> Mutations | None:
    """The mutation operator of a ``MutationSpec`` (None when absent).

    Its generator is seeded by the manifest's ``mutation.rand_seed`` (as documented there).
    """
    if mutation_spec is None:
        return None
    from agilerl.hpo.mutation import Mutations
    from agilerl.models.hpo import zero_left_out_kinds

    zero_left_out_kinds(mutation_spec)  # a spec built in Python, not read from a manifest

    return Mutations.from_spec(mutation_spec)


def make_selection(
    selection_spec: TournamentSelectionSpec | MultiFrequencySelectionSpec | None,
    pop_size: int, seed: int,
    mutation_spec: MutationSpec | None = None,
) -> TournamentSelection | MultiFrequencySelection | None:
    """The selection operator (None when absent): tournament, or MF-PBT.

    The tournament's generator is seeded from the run seed; MF-PBT's from
    ``mutation.rand_seed`` when there is a mutation section (as the manifest documents),
    else from the run seed.
    """
    if selection_spec is None:
        return None
    if is_multi_frequency(selection_spec):
        from agilerl.hpo.multi_frequency import MultiFrequencySelection

        rand_seed = getattr(mutation_spec, "rand_seed", None) if mutation_spec else None
        if rand_seed is None:
            rand_seed = derive_seed(seed, _SEED_SELECTION)
        return MultiFrequencySelection.from_spec(selection_spec, pop_size, rand_seed=rand_seed)
    from agilerl.hpo.tournament import TournamentSelection

    # eval_loop=1: a member's fitness entry already averages its eval_loop episodes.
    return TournamentSelection.from_spec(
        selection_spec, pop_size, eval_loop=1, rand_seed=derive_seed(seed, _SEED_SELECTION)
    )


def tag_subpopulations(population: Sequence[Agent], selection: object) -> None:
    """Under MF-PBT, set ``agent.subpopulation_id`` (slot ``i`` -> ``i // S``) on every member."""
    subpopulation_of = getattr(selection, "subpopulation_of", None)
    if subpopulation_of is None:
        return
    for slot, agent in enumerate(population):
        setattr(agent, _SUBPOPULATION_ID, subpopulation_of(slot))  # a tag, not a field
