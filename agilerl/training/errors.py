"""The training errors under the module users have imported them from; they live in
:mod:`agilerl.core.errors` (imported by every floor, so they sit below all of them)."""

from agilerl.core.errors import (
    EXTRAS,
    ArgumentError,
    DeviceUnavailableError,
    EnvironmentSetupError,
    InsufficientMemoryError,
    MissingExtraError,
    TrainingAborted,
    TrainingInterrupted,
    TrainingSetupError,
    UnsupportedAlgorithmError,
    UnsupportedSettingError,
    memory_exhausted,
    missing_extra,
    resource_shortage,
    storage_exhausted,
)

__all__ = [
    "EXTRAS",
    "ArgumentError",
    "DeviceUnavailableError",
    "EnvironmentSetupError",
    "InsufficientMemoryError",
    "MissingExtraError",
    "TrainingAborted",
    "TrainingInterrupted",
    "TrainingSetupError",
    "UnsupportedAlgorithmError",
    "UnsupportedSettingError",
    "memory_exhausted",
    "missing_extra",
    "resource_shortage",
    "storage_exhausted",
]
