"""Training manifest models: the public spec classes, the algorithm registry, validation.

Field lists, defaults and bounds come from ``schemas/`` through the generated models; this
package adds what a schema cannot say (cross-field rules, registry facts, runtime-only
objects, environment building). It imports neither torch nor gymnasium.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# The algorithm spec names (``DQNSpec``...) are generated from schemas/algorithms/.
from agilerl.models.algorithms import __all__ as _ALGORITHM_SPECS

# Public name -> module that defines it. Everything loads on first use, so importing one
# submodule (the loader, the rules) stays cheap, e.g. for the light Arena models.
_EXPORTS: dict[str, str] = {
    "ALGO_REGISTRY": "agilerl.models.algo",
    "AgentType": "agilerl.models.algo",
    "AlgoSpec": "agilerl.models.algo",
    "BanditEnvSpec": "agilerl.models.env",
    "CnnSpec": "agilerl.models.networks",
    "DEFERRED_ENCODER_SEEDS": "agilerl.models.networks",
    "ContinuousQNetworkSpec": "agilerl.models.networks",
    "DeterministicActorSpec": "agilerl.models.networks",
    "EnvSpec": "agilerl.models.env",
    "FinetuningNetworkSpec": "agilerl.models.networks",
    "GymEnvSpec": "agilerl.models.env",
    "LLMAlgorithmSpec": "agilerl.models.algo",
    "LLMEnvSpec": "agilerl.models.env",
    "LLMEnvType": "agilerl.models.env",
    "LoraConfigDict": "agilerl.models.networks",
    "LstmSpec": "agilerl.models.networks",
    "ManifestError": "agilerl.core.manifest_errors",
    "ManifestIssue": "agilerl.core.manifest_errors",
    "ManifestWarning": "agilerl.models.manifest",
    "MlpSpec": "agilerl.models.networks",
    "MultiAgentRLAlgorithmSpec": "agilerl.models.algo",
    "MultiFrequencySelectionSpec": "agilerl.models.hpo",
    "MultiInputSpec": "agilerl.models.networks",
    "MutationProbabilities": "agilerl.models.hpo",
    "MutationSpec": "agilerl.models.hpo",
    "NStepBufferArgs": "agilerl.models.training",
    "NetworkSpec": "agilerl.models.networks",
    "OfflineEnvSpec": "agilerl.models.env",
    "PerBufferArgs": "agilerl.models.training",
    "PzEnvSpec": "agilerl.models.env",
    "QNetworkSpec": "agilerl.models.networks",
    "RLAlgorithmSpec": "agilerl.models.algo",
    "RLHyperparameter": "agilerl.models.hpo",
    "RainbowQNetworkSpec": "agilerl.models.networks",
    "ReplayBufferSpec": "agilerl.models.training",
    "SelectionStrategySpec": "agilerl.models.hpo",
    "SimbaSpec": "agilerl.models.networks",
    "StochasticActorSpec": "agilerl.models.networks",
    "TournamentSelectionSpec": "agilerl.models.hpo",
    "TrainingManifest": "agilerl.models.manifest",
    "TrainingSpec": "agilerl.models.training",
    "UnknownAlgorithmError": "agilerl.core.manifest_errors",
    "ValueNetworkSpec": "agilerl.models.networks",
    "network_arch_is_resolvable": "agilerl.models.networks",
    "register_algorithm": "agilerl.models.algo",
    "resolve_env_spec": "agilerl.models.env",
}

__all__ = [
    "ALGO_REGISTRY",
    "DEFERRED_ENCODER_SEEDS",
    "AgentType",
    "AlgoSpec",
    "BanditEnvSpec",
    "CnnSpec",
    "ContinuousQNetworkSpec",
    "DeterministicActorSpec",
    "EnvSpec",
    "FinetuningNetworkSpec",
    "GymEnvSpec",
    "LLMAlgorithmSpec",
    "LLMEnvSpec",
    "LLMEnvType",
    "LoraConfigDict",
    "LstmSpec",
    "ManifestError",
    "ManifestIssue",
    "ManifestWarning",
    "MlpSpec",
    "MultiAgentRLAlgorithmSpec",
    "MultiFrequencySelectionSpec",
    "MultiInputSpec",
    "MutationProbabilities",
    "MutationSpec",
    "NStepBufferArgs",
    "NetworkSpec",
    "OfflineEnvSpec",
    "PerBufferArgs",
    "PzEnvSpec",
    "QNetworkSpec",
    "RLAlgorithmSpec",
    "RLHyperparameter",
    "RainbowQNetworkSpec",
    "ReplayBufferSpec",
    "SelectionStrategySpec",
    "SimbaSpec",
    "StochasticActorSpec",
    "TournamentSelectionSpec",
    "TrainingManifest",
    "TrainingSpec",
    "UnknownAlgorithmError",
    "ValueNetworkSpec",
    "network_arch_is_resolvable",
    "register_algorithm",
    "resolve_env_spec",
    *_ALGORITHM_SPECS,
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif name in _ALGORITHM_SPECS:  # created on first use (see ALGO_REGISTRY)
        value = importlib.import_module("agilerl.models.algo").ALGO_REGISTRY[name.removesuffix("Spec")]
    else:
        raise AttributeError(f"module 'agilerl.models' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover
    from agilerl.core.manifest_errors import (
        ManifestError,
        ManifestIssue,
        UnknownAlgorithmError,
    )
    from agilerl.models.algo import (
        ALGO_REGISTRY,
        AgentType,
        AlgoSpec,
        LLMAlgorithmSpec,
        MultiAgentRLAlgorithmSpec,
        RLAlgorithmSpec,
        register_algorithm,
    )
    from agilerl.models.algorithms import *  # noqa: F403 (generated names)
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
    from agilerl.models.hpo import (
        MultiFrequencySelectionSpec,
        MutationProbabilities,
        MutationSpec,
        RLHyperparameter,
        SelectionStrategySpec,
        TournamentSelectionSpec,
    )
    from agilerl.models.manifest import (
        ManifestWarning,
        TrainingManifest,
    )
    from agilerl.models.networks import (
        DEFERRED_ENCODER_SEEDS,
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
    from agilerl.models.training import (
        NStepBufferArgs,
        PerBufferArgs,
        ReplayBufferSpec,
        TrainingSpec,
    )
