"""Light Arena manifest models: validate and serialise a payload for the hosted service.

Imports pydantic only (never torch or gymnasium). The spec classes come from the generated
Arena models (``schemas/`` with the Arena differences, spec §6); :class:`TrainingManifest`
and ``ARENA_REGISTRY`` are defined in :mod:`agilerl.arena.models.manifest`.
"""

from agilerl.arena.models._generated import (
    AlgoSpec,
    CISPOSpec,
    CnnSpec,
    ContinuousQNetworkSpec,
    CosineLRScheduleConfig,
    DDPGSpec,
    DeterministicActorSpec,
    DPOSpec,
    DQNSpec,
    EnvSpec,
    FinetuningNetworkSpec,
    GRPOSpec,
    GSPOSpec,
    IPPOSpec,
    LLMAlgorithmSpec,
    LLMPPOSpec,
    LLMREINFORCESpec,
    LoraConfigDict,
    LstmSpec,
    MADDPGSpec,
    MATD3Spec,
    MlpSpec,
    MultiAgentRLAlgorithmSpec,
    MultiInputSpec,
    MutationProbabilities,
    MutationSpec,
    NetworkSpec,
    NStepBufferArgs,
    PerBufferArgs,
    PPOSpec,
    QNetworkSpec,
    RainbowDQNSpec,
    RainbowQNetworkSpec,
    ReplayBufferSpec,
    RLAlgorithmSpec,
    RLHyperparameter,
    SFTSpec,
    SimbaSpec,
    StochasticActorSpec,
    TD3Spec,
    TournamentSelectionSpec,
    TrainingSpec,
    ValueNetworkSpec,
    VLLMConfig,
)
from agilerl.arena.models.manifest import ARENA_REGISTRY, TrainingManifest
from agilerl.models.errors import ManifestError

__all__ = [
    "ARENA_REGISTRY", "AlgoSpec", "CISPOSpec", "CnnSpec", "ContinuousQNetworkSpec",
    "CosineLRScheduleConfig", "DDPGSpec", "DPOSpec", "DQNSpec", "DeterministicActorSpec",
    "EnvSpec", "FinetuningNetworkSpec", "GRPOSpec", "GSPOSpec", "IPPOSpec",
    "LLMAlgorithmSpec", "LLMPPOSpec", "LLMREINFORCESpec", "LoraConfigDict", "LstmSpec",
    "MADDPGSpec", "MATD3Spec", "ManifestError", "MlpSpec", "MultiAgentRLAlgorithmSpec",
    "MultiInputSpec", "MutationProbabilities", "MutationSpec", "NStepBufferArgs",
    "NetworkSpec", "PPOSpec", "PerBufferArgs", "QNetworkSpec", "RLAlgorithmSpec",
    "RLHyperparameter", "RainbowDQNSpec", "RainbowQNetworkSpec", "ReplayBufferSpec",
    "SFTSpec", "SimbaSpec", "StochasticActorSpec", "TD3Spec", "TournamentSelectionSpec",
    "TrainingManifest", "TrainingSpec", "ValueNetworkSpec", "VLLMConfig",
]
