"""Generated spec models of agilerl (``python -m codegen`` from ``schemas/``; do not edit).

Public classes are re-exported by :mod:`agilerl.models`; import them from there.

Conventions shared with the hand-written facade:

* Every class derives from ``SpecModel``: unknown keys are rejected (``extra="forbid"``),
  validation is strict (no string-to-number coercion; booleans are not numbers; integral
  floats are accepted for integers, as in JSON Schema) and schemas are built on first use.
  YAML files should be loaded with a YAML 1.2 float rule so that ``1e-6`` is a number.
* Field aliases: ``validation_alias=AliasChoices(...)``, one spelling per field (two are
  refused, naming both) (``TrainingSpec.pop_size`` <- ``population_size``/``pop_size``, ``evo_steps`` <-
  ``metrics_interval``/``evo_steps``, ``ReplayBufferSpec.max_size`` <- ``max_size``/
  ``memory_size``, ``LLMEnvSpec.dataset`` <- ``dataset``/``name``). Dumps use canonical names.
  The legacy top-level ``tournament_selection`` key is listed in ``MANIFEST_KEY_ALIASES``.
* Runtime-only fields (``actor_network(s)``, ``critic_network(s)``, ``net_config``,
  ``hp_config``) accept what the schema allows a manifest to write (null; for
  ``net_config`` a network-section mapping, for ``hp_config`` a mapping name ->
  ``RLHyperparameter``) or, from Python, any non-JSON object (``RuntimeObject``: a torch
  module, a spec object); they are excluded from dumps and the trainer may assign them by
  attribute. ``LLMAlgorithmSpec.lora_config`` also takes objects (a peft config) but is
  dumped.
* ``ALGORITHMS`` / ``REGISTRY`` (module ``registry``) is the algorithm registry: one frozen
  ``AlgorithmEntry`` per algorithm with its spec class, agent type, flags, default
  ``evo_steps``, network spec class, environment spec class and Arena eligibility.
* ``AlgorithmSpecUnion`` validates an ``algorithm`` mapping by its ``name``;
  ``SelectionStrategy`` validates a selection block (``strategy`` defaults to tournament).
* The bundled JSON Schema for editors is ``agilerl/schemas/manifest.schema.json``.
"""


from ._base import NOT_NULL, Integer, RuntimeObject, SpecModel, tag_of
from .models import (
    AlgoSpec,
    BanditEnvSpec,
    CISPOSpec,
    CQNSpec,
    CnnSpec,
    ContinuousQNetworkSpec,
    DDPGSpec,
    DPOSpec,
    DQNSpec,
    DeterministicActorSpec,
    FinetuningNetworkSpec,
    GRPOSpec,
    GSPOSpec,
    GymEnvSpec,
    IPPOSpec,
    LLMAlgorithmSpec,
    LLMEnvSpec,
    LLMPPOSpec,
    LLMREINFORCESpec,
    LoraConfigDict,
    LstmSpec,
    MADDPGSpec,
    MATD3Spec,
    MlpSpec,
    MultiAgentRLAlgorithmSpec,
    MultiFrequencySelectionSpec,
    MultiInputSpec,
    MutationProbabilities,
    MutationSpec,
    NStepBufferArgs,
    NetworkSection,
    NetworkSpec,
    NeuralBanditSpec,
    NeuralTSSpec,
    NeuralUCBSpec,
    OfflineEnvSpec,
    PPOSpec,
    PerBufferArgs,
    PzEnvSpec,
    QNetworkSpec,
    RLAlgorithmSpec,
    RLHyperparameter,
    RLNetworkSection,
    RainbowDQNSpec,
    RainbowQNetworkSpec,
    ReplayBufferSpec,
    SFTSpec,
    SelectionStrategy,
    SimbaSpec,
    StochasticActorSpec,
    TD3Spec,
    TournamentSelectionSpec,
    TrainingSpec,
    ValueNetworkSpec,
)
from .registry import (
    ALGORITHMS,
    ENVIRONMENT_SPECS,
    DEFERRED_ENCODER_SEEDS,
    NULL_MEANS,
    REGISTRY,
    AgentType,
    AlgorithmEntry,
    AlgorithmSpecUnion,
)

MANIFEST_KEYS: tuple[str, ...] = ('algorithm', 'environment', 'training', 'network', 'mutation', 'replay_buffer', 'selection_strategy')
"""Top-level manifest keys (canonical spellings)."""

MANIFEST_KEY_ALIASES: dict[str, str] = {'tournament_selection': 'selection_strategy'}
"""Accepted alternative top-level keys -> canonical key."""

__all__ = [
    "ALGORITHMS",
    "AgentType",
    "AlgoSpec",
    "AlgorithmEntry",
    "AlgorithmSpecUnion",
    "BanditEnvSpec",
    "CISPOSpec",
    "CQNSpec",
    "CnnSpec",
    "ContinuousQNetworkSpec",
    "DDPGSpec",
    "DEFERRED_ENCODER_SEEDS",
    "DPOSpec",
    "DQNSpec",
    "DeterministicActorSpec",
    "ENVIRONMENT_SPECS",
    "FinetuningNetworkSpec",
    "GRPOSpec",
    "GSPOSpec",
    "GymEnvSpec",
    "IPPOSpec",
    "Integer",
    "LLMAlgorithmSpec",
    "LLMEnvSpec",
    "LLMPPOSpec",
    "LLMREINFORCESpec",
    "LoraConfigDict",
    "LstmSpec",
    "MADDPGSpec",
    "MANIFEST_KEYS",
    "MANIFEST_KEY_ALIASES",
    "MATD3Spec",
    "MlpSpec",
    "MultiAgentRLAlgorithmSpec",
    "MultiFrequencySelectionSpec",
    "MultiInputSpec",
    "MutationProbabilities",
    "MutationSpec",
    "NOT_NULL",
    "NStepBufferArgs",
    "NULL_MEANS",
    "NetworkSection",
    "NetworkSpec",
    "NeuralBanditSpec",
    "NeuralTSSpec",
    "NeuralUCBSpec",
    "OfflineEnvSpec",
    "PPOSpec",
    "PerBufferArgs",
    "PzEnvSpec",
    "QNetworkSpec",
    "REGISTRY",
    "RLAlgorithmSpec",
    "RLHyperparameter",
    "RLNetworkSection",
    "RainbowDQNSpec",
    "RainbowQNetworkSpec",
    "ReplayBufferSpec",
    "RuntimeObject",
    "SFTSpec",
    "SelectionStrategy",
    "SimbaSpec",
    "SpecModel",
    "StochasticActorSpec",
    "TD3Spec",
    "TournamentSelectionSpec",
    "TrainingSpec",
    "ValueNetworkSpec",
    "tag_of",
]
