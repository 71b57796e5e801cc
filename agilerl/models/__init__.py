"""Training manifest models: the public spec classes, the algorithm registry, validation.

Field lists, defaults and bounds come from ``schemas/`` through the generated models; this
package adds what a schema cannot say (cross-field rules, registry facts, runtime-only
objects, environment building). It imports neither torch nor gymnasium.
"""

from typing import TYPE_CHECKING, Any

from agilerl.models.algo import (
    ALGO_REGISTRY,
    AgentType,
    AlgoSpec,
    LLMAlgorithmSpec,
    MultiAgentRLAlgorithmSpec,
    RLAlgorithmSpec,
    register_algorithm,
)
from agilerl.models.env import (
    BanditEnvSpec,
    EnvSpec,
    GymEnvSpec,
    LLMEnvSpec,
    LLMEnvType,
    OfflineEnvSpec,
    PzEnvSpec,
    resolve_env_spec,
)
from agilerl.models.errors import ManifestError, ManifestIssue, UnknownAlgorithmError
from agilerl.models.hpo import (
    MultiFrequencySelectionSpec,
    MutationProbabilities,
    MutationSpec,
    RLHyperparameter,
    SelectionStrategySpec,
    TournamentSelectionSpec,
)
from agilerl.models.manifest import ManifestWarning, TrainingManifest
from agilerl.models.networks import (
    CnnSpec,
    ContinuousQNetworkSpec,
    DeterministicActorSpec,
    FinetuningNetworkSpec,
    LoraConfigDict,
    LstmSpec,
    MlpSpec,
    MultiInputSpec,
    NetworkSpec,
    QNetworkSpec,
    RainbowQNetworkSpec,
    SimbaSpec,
    StochasticActorSpec,
    ValueNetworkSpec,
    network_arch_is_resolvable,
)
from agilerl.models.training import NStepBufferArgs, PerBufferArgs, ReplayBufferSpec, TrainingSpec

_ALGORITHM_SPECS = {f"{name}Spec" for name in ALGO_REGISTRY}


def __getattr__(name: str) -> Any:
    # Algorithm spec classes are created on first use (see ALGO_REGISTRY).
    if name in _ALGORITHM_SPECS:
        return ALGO_REGISTRY[name.removesuffix("Spec")]
    raise AttributeError(f"module 'agilerl.models' has no attribute {name!r}")

__all__ = [
    "ALGO_REGISTRY", "AgentType", "AlgoSpec", "BanditEnvSpec", "CISPOSpec", "CQNSpec",
    "CnnSpec", "ContinuousQNetworkSpec", "DDPGSpec", "DPOSpec", "DQNSpec",
    "DeterministicActorSpec", "EnvSpec", "FinetuningNetworkSpec", "GRPOSpec", "GSPOSpec",
    "GymEnvSpec", "IPPOSpec", "LLMAlgorithmSpec", "LLMEnvSpec", "LLMEnvType", "LLMPPOSpec",
    "LLMREINFORCESpec", "LoraConfigDict", "LstmSpec", "MADDPGSpec", "MATD3Spec",
    "ManifestError", "ManifestIssue", "ManifestWarning", "MlpSpec",
    "MultiAgentRLAlgorithmSpec", "MultiFrequencySelectionSpec", "MultiInputSpec",
    "MutationProbabilities", "MutationSpec", "NStepBufferArgs", "NetworkSpec",
    "NeuralTSSpec", "NeuralUCBSpec", "OfflineEnvSpec", "PPOSpec", "PerBufferArgs",
    "PzEnvSpec", "QNetworkSpec", "RLAlgorithmSpec", "RLHyperparameter", "RainbowDQNSpec",
    "RainbowQNetworkSpec", "ReplayBufferSpec", "SFTSpec", "SelectionStrategySpec",
    "SimbaSpec", "StochasticActorSpec", "TD3Spec", "TournamentSelectionSpec",
    "TrainingManifest", "TrainingSpec", "UnknownAlgorithmError", "ValueNetworkSpec",
    "network_arch_is_resolvable", "register_algorithm", "resolve_env_spec",
]

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.models.algorithms import (
        CISPOSpec,
        CQNSpec,
        DDPGSpec,
        DPOSpec,
        DQNSpec,
        GRPOSpec,
        GSPOSpec,
        IPPOSpec,
        LLMPPOSpec,
        LLMREINFORCESpec,
        MADDPGSpec,
        MATD3Spec,
        NeuralTSSpec,
        NeuralUCBSpec,
        PPOSpec,
        RainbowDQNSpec,
        SFTSpec,
        TD3Spec,
    )
