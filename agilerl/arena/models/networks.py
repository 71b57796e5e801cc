"""Arena network specs: encoders, network classes and the LLM fine-tuning settings."""

from agilerl.arena.models._generated import (
    CnnSpec,
    ContinuousQNetworkSpec,
    CosineLRScheduleConfig,
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
    VLLMConfig,
)

__all__ = [
    "CnnSpec", "ContinuousQNetworkSpec", "CosineLRScheduleConfig", "DeterministicActorSpec",
    "FinetuningNetworkSpec", "LoraConfigDict", "LstmSpec", "MlpSpec", "MultiInputSpec",
    "NetworkSpec", "QNetworkSpec", "RainbowQNetworkSpec", "SimbaSpec", "StochasticActorSpec",
    "ValueNetworkSpec", "VLLMConfig",
]
