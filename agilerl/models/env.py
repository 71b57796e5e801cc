"""Environment specs (fields from ``schemas/environments/``), their source rules (spec §3.2,
X11), and how a manifest's ``environment`` mapping becomes the right spec for an algorithm.

Building environments is the job of :mod:`agilerl.envs`; the ``make_env`` methods here only
delegate to it (imported on call, so this module needs neither gymnasium nor pettingzoo).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeAlias, TypedDict

from pydantic import (
    BaseModel,
    SerializationInfo,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.algo import AgentType, raise_first, skip_rules
from agilerl.models.env_checks import find_file
from agilerl.models.rules import Violation, bandit_env_rules, llm_env_rules, offline_env_rules

if TYPE_CHECKING:
    from typing import Self, Unpack  # Python 3.11

    import gymnasium
    from gymnasium.vector import VectorEnv
    from pettingzoo import ParallelEnv
    from transformers import PreTrainedTokenizerBase

    from agilerl.core.value_types import Options
    from agilerl.envs.pettingzoo_env import AsyncPettingZooVectorEnv, PettingZooVectorEnv
    from agilerl.llm.dataset_envs import PreferenceEnv, SFTEnv
    from agilerl.llm.reasoning import ReasoningEnv
    from agilerl.models.algo import AlgoSpec


class LLMEnvType(str, Enum):
    """Kinds of LLM environment."""

    REASONING = "reasoning"
    PREFERENCE = "preference"
    SFT = "sft"
    MULTITURN = "multiturn"


class EnvSpec:
    """Behaviour shared by the environment specs: rules and building (delegated)."""

    #: Fields that name local files, resolved against the manifest's folder.
    file_fields: ClassVar[tuple[str, ...]] = ()

    def env_rules(self) -> list[Violation]:
        """Cross-field source rules of this kind of environment (none by default)."""
        return []

    @model_validator(mode="after")
    def _check_env_rules(self, info: ValidationInfo) -> Self:
        if not skip_rules(info):
            raise_first(self.env_rules())
        return self

    def with_files_resolved(self, base_dir: str | os.PathLike[str] | None) -> Self:
        """A copy whose relative file fields point at files found under ``base_dir`` (the
        manifest's folder) rather than the working directory; other values unchanged."""
        if base_dir is None:
            return self
        updates = {}
        for name in self.file_fields:
            value = getattr(self, name, None)
            if isinstance(value, str) and not Path(value).is_absolute():
                found = find_file(value, Path(base_dir))
                if found is not None and not (Path.cwd() / value).exists():
                    updates[name] = str(found)
        return self.model_copy(update=updates) if updates else self  # type: ignore[attr-defined]


_PLACEHOLDER = "python-object"
"""Stands in for a Python wrapper while the JSON forms of a list are validated."""


def _is_python_wrapper(entry: object) -> bool:
    """A callable, or a ``(callable, kwargs)`` pair (not the JSON forms of a manifest)."""
    if isinstance(entry, str):
        return False
    if callable(entry):
        return True
    return isinstance(entry, list | tuple) and len(entry) == 2 and callable(entry[0]) \
        and not isinstance(entry[0], str)


def _python_wrapper(entry: Callable[..., object] | Sequence[object]) -> object:
    if callable(entry):
        return entry
    wrapper, kwargs = entry
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"a wrapper pair is (wrapper, {{keyword: value}}), got {entry!r}")
    return (wrapper, dict(kwargs))


def _wrapper_reference(wrapper: object) -> str:
    """A Python wrapper as the dotted import path a manifest would write for it."""
    return f"{getattr(wrapper, '__module__', '?')}.{getattr(wrapper, '__qualname__', wrapper)}"


class PythonWrappers:
    """Lets ``wrappers`` also hold callables and ``(callable, kwargs)`` pairs, as the
    reference allows from Python: ``GymEnvSpec(name=..., wrappers=[Wrapper, (Other,
    {"k": 1})])``. They are kept as given (and applied in order, like the string forms);
    a JSON dump writes each callable as its dotted import path."""

    @field_validator("wrappers", mode="wrap", check_fields=False)
    @classmethod
    def _python_wrappers(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        if not isinstance(value, list | tuple) or not any(map(_is_python_wrapper, value)):
            return handler(value)
        python = {i: _python_wrapper(e) for i, e in enumerate(value) if _is_python_wrapper(e)}
        checked = handler([_PLACEHOLDER if i in python else e for i, e in enumerate(value)])
        return [python.get(i, entry) for i, entry in enumerate(checked)]

    @field_serializer("wrappers", mode="plain", check_fields=False)
    def _dump_wrappers(self, value: Sequence[object] | None, info: SerializationInfo) -> object:
        # A list or None; Pydantic builds the dump's schema from this annotation, and
        # ``object`` keeps it the "any" schema (values dumped as they are).
        if value is None:
            return None
        if info.mode != "json":
            return list(value)
        out: list[object] = []
        for entry in value:
            if not _is_python_wrapper(entry):
                out.append(entry)
            elif callable(entry):
                out.append(_wrapper_reference(entry))
            else:
                assert isinstance(entry, list | tuple)  # a (callable, kwargs) pair
                out.append([_wrapper_reference(entry[0]), dict(entry[1])])
        return out


class _Fields:
    """Attribute access to a mapping (the env builders read spec fields by attribute)."""

    def __init__(self, fields: Mapping[str, object]) -> None:
        self.__dict__.update(fields)


@public
class GymEnvSpec(PythonWrappers, EnvSpec, gen.GymEnvSpec):
    """A Gymnasium environment (single-agent algorithms)."""

    @staticmethod
    def construct_custom_env_fn(entrypoint: str, path: str | None = None,
                                config: Options | None = None,
                                wrappers: Sequence[object] | None = None,
                                ) -> Callable[[], gymnasium.Env]:
        """A zero-argument factory of one custom environment: ``entrypoint(**config)`` with
        ``wrappers`` applied in order (as the reference's). The entrypoint and wrappers are
        resolved when the factory is first called, so a bad reference raises there."""
        from agilerl.envs import make_single_env

        spec = {"entrypoint": entrypoint, "path": path, "config": config, "wrappers": wrappers}
        return lambda: make_single_env(_Fields(spec))

    def make_env(self, extra_wrappers: Sequence[object] | None = None) -> VectorEnv:
        """The vectorised environment (``num_envs`` copies)."""
        from agilerl.envs import make_vector_env

        return make_vector_env(self, extra_wrappers=extra_wrappers)

    def make_single_env(self, extra_wrappers: Sequence[object] | None = None) -> gymnasium.Env:
        """One unvectorised environment."""
        from agilerl.envs import make_single_env

        return make_single_env(self, extra_wrappers=extra_wrappers)


@public
class OfflineEnvSpec(gen.OfflineEnvSpec, GymEnvSpec):
    """An offline dataset plus the Gymnasium environment used to evaluate on."""

    file_fields: ClassVar[tuple[str, ...]] = ("dataset_path",)

    def env_rules(self) -> list[Violation]:
        return offline_env_rules(self)


@public
class PzEnvSpec(PythonWrappers, EnvSpec, gen.PzEnvSpec):
    """A PettingZoo parallel environment (multi-agent algorithms)."""

    @staticmethod
    def construct_custom_env_fn(entrypoint: str, path: str | None = None,
                                config: Options | None = None,
                                wrappers: Sequence[object] | None = None,
                                ) -> Callable[[], ParallelEnv]:
        """A zero-argument factory of one custom parallel environment (see
        :meth:`GymEnvSpec.construct_custom_env_fn`)."""
        from agilerl.envs import make_pz_single_env

        spec = {"entrypoint": entrypoint, "path": path, "config": config, "wrappers": wrappers}
        return lambda: make_pz_single_env(_Fields(spec))

    def make_env(self, extra_wrappers: Sequence[object] | None = None,
                 ) -> PettingZooVectorEnv | AsyncPettingZooVectorEnv:
        """The vectorised environment (``num_envs`` copies)."""
        from agilerl.envs import make_pz_vector_env

        return make_pz_vector_env(self, extra_wrappers=extra_wrappers)

    def make_single_env(self, extra_wrappers: Sequence[object] | None = None) -> ParallelEnv:
        """One unvectorised parallel environment."""
        from agilerl.envs import make_pz_single_env

        return make_pz_single_env(self, extra_wrappers=extra_wrappers)


def _is_table(value: object) -> bool:
    """An in-memory table (DataFrame, Series, numpy array, ...), not a file path."""
    return value is not None and not isinstance(value, str | os.PathLike) \
        and (hasattr(value, "shape") or hasattr(value, "to_numpy"))


def _table_label(value: object) -> str:
    shape = "x".join(str(n) for n in getattr(value, "shape", ()))
    return f"<in-memory {type(value).__name__} {shape}>"


class InMemoryTables:
    """Lets ``features``/``targets`` also hold in-memory tables from Python (pandas
    DataFrames or Series, numpy arrays), as the reference allows: they are kept as given
    and used as they are; a JSON dump (a run's ``manifest.yaml``) writes a label such as
    ``<in-memory DataFrame 150x4>`` in their place, which names no file."""

    @field_validator("features", "targets", mode="wrap", check_fields=False)
    @classmethod
    def _tables(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        if _is_table(value):
            return value
        return handler(os.fspath(value) if isinstance(value, os.PathLike) else value)

    @field_serializer("features", "targets", mode="plain", check_fields=False)
    def _dump_tables(self, value: object, info: SerializationInfo) -> object:
        if info.mode == "json" and _is_table(value):
            return _table_label(value)
        return value


@public
class BanditEnvSpec(InMemoryTables, EnvSpec, gen.BanditEnvSpec):
    """A contextual bandit: a feature/target table (a file, or an in-memory table from
    Python), or a custom environment."""

    file_fields: ClassVar[tuple[str, ...]] = ("features", "targets")

    def env_rules(self) -> list[Violation]:
        return bandit_env_rules(self)

    def make_env(self) -> object:
        """The bandit environment (a ``BanditEnv``, or what the entrypoint builds)."""
        from agilerl.envs import make_bandit_env  # type: ignore[attr-defined]

        return make_bandit_env(self)


class LLMEnvOptions(TypedDict, total=False):
    """What :meth:`LLMEnvSpec.make_env` passes on to the environment."""

    seed: int
    max_context_length: int
    evaluation_interval: int
    base_dir: str | None


@public
class LLMEnvSpec(EnvSpec, gen.LLMEnvSpec):
    """An LLM fine-tuning environment (reasoning, preference, SFT or multi-turn)."""

    file_fields: ClassVar[tuple[str, ...]] = ("reward_file_path", "dataset")

    def env_rules(self) -> list[Violation]:
        return llm_env_rules(self)

    @property
    def name(self) -> str:
        """The dataset, else the multi-turn environment id or entrypoint."""
        return self.dataset or self.env_name or self.entrypoint or "multiturn"

    def make_env(self, tokenizer: PreTrainedTokenizerBase | None = None,
                 accelerator: object = None,
                 **kwargs: Unpack[LLMEnvOptions]) -> ReasoningEnv | PreferenceEnv | SFTEnv:
        """The LLM environment on the model's ``tokenizer`` (reasoning, preference or SFT).

        ``kwargs`` go to the environment (``seed``, ``max_context_length``,
        ``evaluation_interval``, ``base_dir``); ``accelerator`` is accepted for
        compatibility and unused (one process trains every member). Multi-turn
        environments are built per episode by ``make_multiturn_env_factory`` instead.
        """
        del accelerator
        if self.env_type == LLMEnvType.MULTITURN.value:
            raise TypeError("multi-turn LLM environments are not built with make_env(); use "
                            "agilerl.llm.multiturn.make_multiturn_env_factory(spec, ...)")
        if tokenizer is None:
            raise TypeError("an LLM environment needs the model's tokenizer: "
                            "make_env(tokenizer=...)")
        if self.env_type == LLMEnvType.REASONING.value:
            from agilerl.llm.reasoning import ReasoningEnv

            return ReasoningEnv(self, tokenizer, **kwargs)
        if kwargs.get("max_context_length") is None:
            raise TypeError(f"a {self.env_type} environment needs "
                            "make_env(tokenizer=..., max_context_length=N)")
        from agilerl.llm.dataset_envs import make_dataset_env

        return make_dataset_env(self, tokenizer, **kwargs)


EnvSpecModel: TypeAlias = GymEnvSpec | PzEnvSpec | BanditEnvSpec | LLMEnvSpec
"""An environment spec model (``OfflineEnvSpec`` is a ``GymEnvSpec``)."""

ENV_SPECS: dict[str, type[EnvSpecModel]] = {
    "gym": GymEnvSpec,
    "pettingzoo": PzEnvSpec,
    "offline": OfflineEnvSpec,
    "bandit": BanditEnvSpec,
    "llm": LLMEnvSpec,
}
"""Environment kind (the registry's ``environment``) → public spec class."""

AGENT_TYPE_ENV: dict[AgentType, str] = {
    AgentType.SingleAgent: "gym",
    AgentType.MultiAgent: "pettingzoo",
    AgentType.OfflineAgent: "offline",
    AgentType.BanditAgent: "bandit",
    AgentType.LLMAgent: "llm",
}


def env_spec_class(algorithm: AlgoSpec | type[AlgoSpec]) -> type[EnvSpecModel]:
    """The environment spec class of an algorithm (spec object or class)."""
    kind = getattr(algorithm, "env_kind", None) or AGENT_TYPE_ENV[AgentType(algorithm.agent_type)]
    return ENV_SPECS[kind]


def environment_input(algorithm: AlgoSpec | type[AlgoSpec],
                      environment: Mapping[str, object]) -> dict[str, object]:
    """The mapping the env spec is validated from: null values dropped (they mean "default")
    and, for LLM algorithms, the algorithm's ``env_type`` filled in when omitted."""
    data = {k: v for k, v in environment.items() if v is not None}
    env_type = getattr(algorithm, "env_type", None)
    if env_spec_class(algorithm) is LLMEnvSpec and env_type and "env_type" not in data:
        data["env_type"] = env_type
    return data


def resolve_env_spec(
    algorithm: AlgoSpec | type[AlgoSpec],
    environment: Mapping[str, object] | BaseModel | str,
    base_dir: str | os.PathLike[str] | None = None,
) -> EnvSpecModel:
    """Turn a manifest ``environment`` (mapping, spec object, or a Gym/PettingZoo name) into
    the spec class the algorithm needs. Relative data files found in ``base_dir`` (the
    manifest's folder) are made absolute. Raises ``ValueError``/``TypeError`` on bad input."""
    cls = env_spec_class(algorithm)
    if isinstance(environment, str):
        if cls not in (GymEnvSpec, PzEnvSpec):
            raise ValueError("Only Gym and PettingZoo-based environments support passing a "
                             "string for the environment.")
        return cls(name=environment)
    if isinstance(environment, cls):
        return environment.with_files_resolved(base_dir)
    if isinstance(environment, BaseModel):
        environment = environment.model_dump(mode="json", by_alias=False)
    if not isinstance(environment, Mapping):
        raise TypeError(f"Expected a dict or environment spec, got {type(environment).__name__}")
    spec = cls.model_validate(environment_input(algorithm, environment))
    return spec.with_files_resolved(base_dir)


__all__ = [
    "BanditEnvSpec", "ENV_SPECS", "EnvSpec", "GymEnvSpec", "LLMEnvSpec", "LLMEnvType",
    "OfflineEnvSpec", "PzEnvSpec", "env_spec_class", "environment_input", "resolve_env_spec",
]
