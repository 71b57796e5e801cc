"""Turn spec objects given to a trainer back into a manifest mapping (``from_trainer_specs``).

Spec objects may be ours, foreign Pydantic models with the same fields (e.g. the light
Arena models) or plain mappings; each is dumped to JSON form and validated again as a
manifest, so one set of rules applies whatever the input.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

from pydantic import BaseModel

from agilerl.core.algorithm_spec import RUNTIME_ONLY_FIELDS
from agilerl.models.networks import lora_settings

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11



class _DumpOptions(TypedDict, total=False):
    exclude: set[str]


def _dump(value: object, **kwargs: Unpack[_DumpOptions]) -> dict[str, object] | None:
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True, **kwargs)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Expected a spec object or a mapping, got {type(value).__name__}")


def _network_of(algorithm: BaseModel) -> dict[str, object] | None:
    """The manifest ``network`` section an algorithm spec implies."""
    if getattr(algorithm, "pretrained_model_name_or_path", None) \
            and hasattr(algorithm, "pretrained_model_name_or_path") \
            and hasattr(algorithm, "max_model_len"):
        network: dict[str, object] = {
            "pretrained_model_name_or_path": algorithm.pretrained_model_name_or_path,
            "max_context_length": algorithm.max_model_len,
        }
        lora = getattr(algorithm, "lora_config", None)
        if lora is not None:
            network["lora_config"] = _lora_dict(lora)
        return network
    net_config = getattr(algorithm, "net_config", None)
    if net_config is None:
        return None
    if hasattr(net_config, "to_section"):
        return net_config.to_section()
    if isinstance(net_config, BaseModel):
        data = net_config.model_dump(mode="json")
        arch = getattr(getattr(net_config, "encoder_config", None), "arch", None)
        if arch:
            data["encoder_config"]["arch"] = arch
        return data
    if isinstance(net_config, Mapping):
        return dict(net_config)
    return None


def _lora_dict(lora: object) -> dict[str, object]:
    """LoRA settings as manifest keys (a peft config object is converted back)."""
    if isinstance(lora, Mapping):
        return dict(lora)
    if isinstance(lora, BaseModel):
        return lora.model_dump(mode="json")
    return lora_settings(lora)


def manifest_mapping(algorithm: object, environment: object, training: object, mutation: object,
                     replay_buffer: object, selection_strategy: object) -> dict[str, object]:
    """A manifest mapping from trainer specs (runtime-only fields left out)."""
    if isinstance(algorithm, BaseModel):
        algo = algorithm.model_dump(mode="json", exclude_none=True, exclude=set(RUNTIME_ONLY_FIELDS))
        algo["name"] = getattr(algorithm, "algo_name", None) or algo.get("name")
        if hasattr(algorithm, "lora_config") and "lora_config" in algo:
            algo.pop("lora_config")  # carried by the network section
    elif isinstance(algorithm, Mapping):
        algo = dict(algorithm)
    else:
        raise TypeError(f"Expected a dict or AlgorithmSpec, got {type(algorithm).__name__}")
    data: dict[str, object] = {"algorithm": algo, "environment": _environment(environment)}
    network = _network_of(algorithm) if isinstance(algorithm, BaseModel) else None
    for key, value in (("training", training), ("network", network), ("mutation", mutation),
                       ("replay_buffer", replay_buffer),
                       ("selection_strategy", selection_strategy)):
        dumped = _dump(value) if key != "network" else value
        if dumped is not None:
            data[key] = dumped
    return data


def _environment(environment: object) -> dict[str, object]:
    if isinstance(environment, str):
        return {"name": environment}
    if isinstance(environment, BaseModel):
        return environment.model_dump(mode="json", exclude_none=True)
    if isinstance(environment, Mapping):
        return dict(environment)
    name = getattr(environment, "name", None)
    if isinstance(name, str):  # a duck-typed environment object: keep its name
        return {"name": name}
    raise TypeError(f"Expected a dict or environment spec, got {type(environment).__name__}")


def selection_from_kwargs(selection_strategy: object, kwargs: Mapping[str, object]) -> object:
    """Fold the deprecated ``tournament_selection=`` keyword into ``selection_strategy``."""
    unexpected = sorted(k for k in kwargs if k != "tournament_selection")
    if unexpected:
        names = ", ".join(repr(k) for k in unexpected)
        raise TypeError(f"from_trainer_specs() got unexpected keyword argument(s): {names}")
    if "tournament_selection" not in kwargs:
        return selection_strategy
    warnings.warn("The 'tournament_selection' argument is deprecated; use "
                  "'selection_strategy' instead", DeprecationWarning, stacklevel=3)
    legacy = kwargs["tournament_selection"]
    if legacy is None:
        return selection_strategy
    if selection_strategy is not None and _dump(selection_strategy) != _dump(legacy):
        raise ValueError("conflicting selection strategies: 'selection_strategy' and the "
                         "deprecated 'tournament_selection' differ")
    return selection_strategy if selection_strategy is not None else legacy
