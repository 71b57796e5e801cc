"""``TrainingManifest``: a whole validated manifest (spec §1, §4).

Construct it with :meth:`TrainingManifest.get_validated` (a file path or a mapping),
:meth:`model_validate` (a mapping) or :meth:`from_trainer_specs` (spec objects). Every
problem found is reported at once in one :class:`~agilerl.core.manifest_errors.ManifestError`.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict, overload

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr

from agilerl.core.algorithm_spec import RUNTIME_ONLY_FIELDS
from agilerl.core.manifest_errors import (
    ManifestError,
    ManifestIssue,
    ManifestReport,
    UnknownAlgorithmError,
)
from agilerl.models.algo import AlgoSpec
from agilerl.models.env import EnvSpecModel, resolve_env_spec
from agilerl.models.hpo import MultiFrequencySelectionSpec, MutationSpec, TournamentSelectionSpec
from agilerl.models.loading import LocatedDocument, load_file
from agilerl.models.trainer_specs import manifest_mapping, selection_from_kwargs
from agilerl.models.training import ReplayBufferSpec, TrainingSpec
from agilerl.models.validation import ManifestParts, check_document, check_path

if TYPE_CHECKING:
    from agilerl.arena.models import TrainingManifest as ArenaManifest
    from agilerl.core.value_types import JsonObject

    _Algorithm = AlgoSpec
    _Training = TrainingSpec | None
    _Mutation = MutationSpec | None
    _ReplayBuffer = ReplayBufferSpec | None
    _Selection = TournamentSelectionSpec | MultiFrequencySelectionSpec | None
else:
    # The sections are validated by check_document before the model is built; Pydantic
    # stores them as given (``object`` is Pydantic's "any" schema, so a spec is dumped by
    # its own class, subclass fields included).
    _Algorithm = _Training = _Mutation = _ReplayBuffer = _Selection = object


class ManifestWarning(UserWarning):
    """Something in a manifest could not be checked locally or looks suspicious."""


def _raise_for(report: ManifestReport) -> None:
    """Emit the report's warnings; raise its errors as one exception."""
    for issue in report.warnings:
        warnings.warn(str(issue), ManifestWarning, stacklevel=4)
    if report.errors:
        unknown_algorithm = any(i.kind == "unknown_algorithm" for i in report.errors)
        cls = UnknownAlgorithmError if unknown_algorithm else ManifestError
        raise cls(report.errors, source=report.source, warnings=report.warnings)


def _check(doc: LocatedDocument, check_environment: bool = True) -> ManifestParts:
    report, parts = check_document(doc, check_environment=check_environment)
    _raise_for(report)
    return parts


class TrainingManifest(BaseModel):
    """A validated training manifest: algorithm spec, raw environment mapping, training
    budget, and the optional network, mutation, replay buffer and selection sections."""

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True,
                              defer_build=True)

    algorithm: _Algorithm
    """The algorithm spec object (class chosen by ``algorithm.name``)."""
    environment: dict[str, object]
    """The environment mapping as written; see :attr:`env_spec` for the parsed spec."""
    training: _Training = None
    """``TrainingSpec`` (all defaults when the section is omitted)."""
    network: dict[str, object] | None = None
    """Normalised network section (eager), the raw one (deferred), or None."""
    mutation: _Mutation = None
    replay_buffer: _ReplayBuffer = None
    selection_strategy: _Selection = Field(
        default=None,
        validation_alias=AliasChoices("selection_strategy", "tournament_selection"),
        serialization_alias="tournament_selection",
    )

    _source: str | None = PrivateAttr(default=None)
    _base_dir: Path | None = PrivateAttr(default=None)
    _env_spec: EnvSpecModel | None = PrivateAttr(default=None)

    def __init__(self, **data: object) -> None:
        parts = _check(LocatedDocument(data=_plain_sections(data)))
        super().__init__(**_fields_of(parts))
        self._env_spec = parts.env_spec
        _keep_algorithm_object(self, data.get("algorithm"))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_parts(cls, parts: ManifestParts, *, source: str | None = None,
                   base_dir: Path | None = None) -> TrainingManifest:
        """Assemble a manifest from already validated pieces (no re-validation)."""
        manifest = cls.model_construct(**_fields_of(parts))
        manifest._source = source
        manifest._base_dir = base_dir
        manifest._env_spec = parts.env_spec
        return manifest

    @classmethod
    def model_validate(cls, obj: object, *, strict: bool | None = None, extra: object = None,
                       from_attributes: bool | None = None, context: object = None,
                       by_alias: bool | None = None, by_name: bool | None = None) -> TrainingManifest:
        """Validate a mapping (or return an existing manifest); raises ``ManifestError``."""
        if isinstance(obj, cls):
            return obj
        if not isinstance(obj, Mapping):
            raise ManifestError([ManifestIssue("", "the manifest must be a mapping of "
                                               f"sections, got {type(obj).__name__}")])
        manifest = cls.from_document(LocatedDocument(data=_plain_sections(obj)))
        _keep_algorithm_object(manifest, obj.get("algorithm"))
        return manifest

    @classmethod
    def from_document(cls, doc: LocatedDocument, *, check_environment: bool = True) -> TrainingManifest:
        """Validate a parsed document (keeps its file positions for error messages)."""
        parts = _check(doc, check_environment)
        return cls.from_parts(parts, source=doc.file, base_dir=doc.base_dir)

    @classmethod
    def load(cls, manifest: str | os.PathLike[str] | Mapping[str, object]) -> TrainingManifest:
        """Validate a manifest file or mapping into a ``TrainingManifest``."""
        if isinstance(manifest, TrainingManifest):
            return manifest
        if isinstance(manifest, str | os.PathLike):
            return cls.from_document(load_file(manifest))
        if isinstance(manifest, Mapping):
            return cls.model_validate(manifest)
        raise TypeError(f"Expected a manifest path or mapping, got {type(manifest).__name__}")

    @overload
    @classmethod
    def get_validated(cls, manifest: str | os.PathLike[str] | Mapping[str, object],
                      mode: Literal["json"] = "json") -> dict[str, object]: ...

    @overload
    @classmethod
    def get_validated(cls, manifest: str | os.PathLike[str] | Mapping[str, object],
                      mode: Literal["python"]) -> TrainingManifest: ...

    @classmethod
    def get_validated(cls, manifest: str | os.PathLike[str] | Mapping[str, object],
                      mode: Literal["json", "python"] = "json",
                      ) -> dict[str, object] | TrainingManifest:
        """Validate a manifest file (a string is always a path) or mapping.

        ``mode="json"``: a JSON-ready dict with every default filled in (spec §4.6);
        ``mode="python"``: the :class:`TrainingManifest`. Raises ``FileNotFoundError`` for a
        missing file and :class:`ManifestError` listing every problem otherwise.
        """
        if mode not in ("json", "python"):
            raise ValueError(f"mode must be 'json' or 'python', got {mode!r}")
        validated = cls.load(manifest)
        return validated.to_json_dict() if mode == "json" else validated

    @classmethod
    def from_trainer_specs(cls, *, algorithm: object, environment: object,
                           training: object = None, mutation: object = None,
                           replay_buffer: object = None, selection_strategy: object = None,
                           **kwargs: object) -> TrainingManifest:
        """Build a validated manifest from spec objects (or plain mappings). The network
        section comes from the algorithm's ``net_config`` (LLMs: model name, context length
        and LoRA settings). ``tournament_selection=`` is a deprecated spelling of
        ``selection_strategy=``."""
        selection_strategy = selection_from_kwargs(selection_strategy, kwargs)
        data = manifest_mapping(algorithm, environment, training, mutation, replay_buffer,
                                selection_strategy)
        manifest = cls.from_document(LocatedDocument(data=data), check_environment=False)
        _keep_algorithm_object(manifest, algorithm)
        return manifest

    @staticmethod
    def to_arena_manifest(
        manifest: TrainingManifest | str | os.PathLike[str] | Mapping[str, object],
        *, mode: Literal["json", "python"] = "json",
    ) -> JsonObject | ArenaManifest:
        """Validate a core manifest object, mapping or file with the Arena models (the
        payload the hosted service accepts)."""
        try:
            from agilerl.arena.models import TrainingManifest as ArenaManifest
        except ImportError as exc:  # pragma: no cover - the light models ship with agilerl
            raise ImportError("Arena dependencies are not installed: the agilerl.arena "
                              "package is needed for to_arena_manifest") from exc
        if isinstance(manifest, TrainingManifest):
            data = manifest.to_json_dict(by_alias=True)
            algorithm = data["algorithm"]
            assert isinstance(algorithm, dict)  # to_json_dict writes it as a dict
            # Only what was set: local-only defaults (e.g. cudagraphs) are not Arena's business.
            data["algorithm"] = {**manifest.algorithm.model_dump(
                mode="json", exclude_unset=True, exclude_none=True, exclude=set(RUNTIME_ONLY_FIELDS)),
                "name": algorithm["name"]}
            manifest = data
        return ArenaManifest.get_validated(manifest, mode=mode)

    # ------------------------------------------------------------------ views
    @property
    def source(self) -> str | None:
        """The file this manifest was read from (None when built from a mapping)."""
        return self._source

    @property
    def base_dir(self) -> Path | None:
        """Folder of the manifest file: relative data files are looked up there first."""
        return self._base_dir

    @property
    def env_spec(self) -> EnvSpecModel:
        """The environment parsed into the spec class the algorithm needs (relative data
        files resolved against :attr:`base_dir`)."""
        spec = self._env_spec if self._env_spec is not None else self.environment
        return resolve_env_spec(self.algorithm, spec, self._base_dir)

    @property
    def tournament_selection(self) -> TournamentSelectionSpec | None:
        """Deprecated: the tournament selection spec (None under MF-PBT or when unset)."""
        warnings.warn("TrainingManifest.tournament_selection is deprecated; use "
                      "selection_strategy", DeprecationWarning, stacklevel=2)
        spec = self.selection_strategy
        return spec if isinstance(spec, TournamentSelectionSpec) else None

    def to_json_dict(self, *, by_alias: bool = False) -> dict[str, object]:
        """JSON form (spec §4.6): defaults filled in, nulls dropped from the typed sections,
        the environment and network as stored, absent optional sections omitted."""
        out: dict[str, object] = {"algorithm": _dump_algorithm(self.algorithm),
                               "environment": copy.deepcopy(self.environment)}
        if self.training is not None:
            out["training"] = self.training.model_dump(mode="json", exclude_none=True)
        if self.network is not None:
            out["network"] = copy.deepcopy(self.network)
        for key in ("mutation", "replay_buffer"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value.model_dump(mode="json", exclude_none=True)
        if self.selection_strategy is not None:
            key = "tournament_selection" if by_alias else "selection_strategy"
            out[key] = self.selection_strategy.model_dump(mode="json", exclude_none=True)
        return out


def _plain_sections(data: Mapping[str, object]) -> dict[str, object]:
    """A deep copy of a manifest mapping whose sections may be spec objects (ours or
    foreign models with the same fields): objects are dumped to their manifest form."""
    if not any(isinstance(value, BaseModel) for value in data.values()):
        return copy.deepcopy(dict(data))
    selection = data.get("selection_strategy", data.get("tournament_selection"))
    plain = manifest_mapping(data.get("algorithm"), data.get("environment", {}),
                             data.get("training"), data.get("mutation"),
                             data.get("replay_buffer"), selection)
    if data.get("network") is not None:
        network = data["network"]
        plain["network"] = network.model_dump(mode="json") if isinstance(network, BaseModel) \
            else copy.deepcopy(network)
    extra = {k: copy.deepcopy(v) for k, v in data.items() if k not in plain and k not in (
        "selection_strategy", "tournament_selection", "network")}
    return {**plain, **extra}


def _keep_algorithm_object(manifest: TrainingManifest, given: object) -> None:
    """When the caller passed one of our algorithm spec objects, the manifest keeps that very
    object (with its runtime-only fields), gaining the network the manifest resolved."""
    if not isinstance(given, AlgoSpec) or type(given) is not type(manifest.algorithm):
        return
    if "net_config" in type(given).model_fields and given.net_config is None:  # type: ignore[attr-defined]
        given.net_config = manifest.algorithm.net_config  # type: ignore[attr-defined]
    manifest.algorithm = given


def _dump_algorithm(spec: BaseModel) -> JsonObject:
    data = spec.model_dump(mode="json", exclude_none=True, exclude=set(RUNTIME_ONLY_FIELDS))
    name = getattr(spec, "algo_name", None) or data.pop("name", None)
    data.pop("name", None)
    return {"name": name, **data}


class _Fields(TypedDict):
    """The model's fields, as the checked parts give them."""

    algorithm: AlgoSpec | None
    environment: dict[str, object]
    training: TrainingSpec | None
    network: dict[str, object] | None
    mutation: MutationSpec | None
    replay_buffer: ReplayBufferSpec | None
    selection_strategy: TournamentSelectionSpec | MultiFrequencySelectionSpec | None


def _fields_of(parts: ManifestParts) -> _Fields:
    return {
        "algorithm": parts.algorithm,
        "environment": parts.environment if parts.environment is not None else {},
        "training": parts.training,
        "network": parts.network,
        "mutation": parts.mutation,
        "replay_buffer": parts.replay_buffer,
        "selection_strategy": parts.selection_strategy,
    }


def validate_path_keeping_manifest(path: str | os.PathLike[str]) -> ManifestReport:
    """:func:`~agilerl.models.validation.validate_path`; a valid file's report also holds
    the manifest (``manifest``) and its JSON form (``resolved``), built from the parts
    already checked."""
    report, checked = check_path(path)
    if report.ok and checked is not None:
        manifest = TrainingManifest.from_parts(checked.parts, source=checked.document.file,
                                               base_dir=checked.document.base_dir)
        report.manifest = manifest
        report.resolved = manifest.to_json_dict()
    return report


__all__ = ["ManifestWarning", "TrainingManifest"]
