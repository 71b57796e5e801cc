"""Light Arena manifest models: validate and serialise a payload for the hosted service.

Imports pydantic only (never torch or gymnasium). The spec classes come from the generated
Arena models (``schemas/`` with the Arena differences, spec §6); :class:`TrainingManifest`
and ``ARENA_REGISTRY`` are defined in :mod:`agilerl.arena.models.manifest`.
"""

from agilerl.arena.models._generated import (
    AlgoSpec,
    CnnSpec,
    ContinuousQNetworkSpec,
    CosineLRScheduleConfig,
    DeterministicActorSpec,
    EnvSpec,
    FinetuningNetworkSpec,
    LLMAlgorithmSpec,
    LoraConfigDict,
    LstmSpec,
    MlpSpec,
    MultiAgentRLAlgorithmSpec,
    MultiInputSpec,
    MutationProbabilities,
    MutationSpec,
    NetworkSpec,
    NStepBufferArgs,
    PerBufferArgs,
    QNetworkSpec,
    RainbowQNetworkSpec,
    ReplayBufferSpec,
    RLAlgorithmSpec,
    RLHyperparameter,
    SimbaSpec,
    StochasticActorSpec,
    TournamentSelectionSpec,
    TrainingSpec,
    ValueNetworkSpec,
    VLLMConfig,
)
from agilerl.arena.models._generated.algorithm_specs import *  # noqa: F403 (generated)
from agilerl.arena.models._generated.algorithm_specs import __all__ as _ALGORITHM_SPECS
from agilerl.arena.models.manifest import ARENA_REGISTRY, TrainingManifest
from agilerl.core.manifest_errors import ManifestError

__all__ = [
    "ARENA_REGISTRY", "AlgoSpec", "CnnSpec", "ContinuousQNetworkSpec", "CosineLRScheduleConfig",
    "DeterministicActorSpec", "EnvSpec", "FinetuningNetworkSpec", "LLMAlgorithmSpec",
    "LoraConfigDict", "LstmSpec", "ManifestError", "MlpSpec", "MultiAgentRLAlgorithmSpec",
    "MultiInputSpec", "MutationProbabilities", "MutationSpec", "NStepBufferArgs", "NetworkSpec",
    "PerBufferArgs", "QNetworkSpec", "RLAlgorithmSpec", "RLHyperparameter",
    "RainbowQNetworkSpec", "ReplayBufferSpec", "SimbaSpec", "StochasticActorSpec",
    "TournamentSelectionSpec", "TrainingManifest", "TrainingSpec", "ValueNetworkSpec",
    "VLLMConfig",
    *_ALGORITHM_SPECS,
]
