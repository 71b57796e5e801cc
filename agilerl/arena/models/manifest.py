"""The Arena ``TrainingManifest``: the payload the hosted service accepts (spec §6).

Validated with the light generated Arena models and the same cross-field rules as local
manifests (:mod:`agilerl.models.rules`). Differences from the local manifest: unknown keys
are dropped with a logged warning instead of failing, the environment is one generic
``EnvSpec``, selection is tournament only, the network is passed through as written, and
the JSON payload always carries ``mutation``, ``tournament_selection`` and ``network``.
Imports pydantic and PyYAML only (no torch, no gymnasium).
"""

from __future__ import annotations

import copy
import logging
import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypedDict, TypeVar, overload

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    SkipValidation,
    ValidationError,
    model_serializer,
)

# The generated models themselves, not the package facade (whose __init__ imports this module).
import agilerl.arena.models._generated as gen
from agilerl.arena.models._generated.registry import LOCAL_ONLY
from agilerl.core.manifest_errors import (
    ManifestError,
    ManifestIssue,
    ManifestReport,
    UnknownAlgorithmError,
)
from agilerl.models.loading import (
    LocatedDocument,
    Location,
    PathKey,
    format_path,
    load_file,
    non_finite_paths,
)
from agilerl.models.pydantic_issues import issues_from_validation_error, unknown_keys
from agilerl.models.rules import Violation, algorithm_rules, llm_model_rule, training_rules
from agilerl.models.suggest import closest

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

logger = logging.getLogger(__name__)

ARENA_REGISTRY: dict[str, type[gen.SpecModel]] = {name: entry.spec_class for name, entry in gen.REGISTRY.items()}
"""Algorithm name → Arena spec class (the algorithms the hosted service can train)."""

SECTIONS = ("algorithm", "environment", "training", "network", "mutation", "replay_buffer",
            "selection_strategy")
LEGACY_SELECTION_KEY = "tournament_selection"
_NOT_SENT = {"hp_config", "net_config"}

M = TypeVar("M", bound=BaseModel)


class _Sections(TypedDict):
    """The validated sections a :class:`TrainingManifest` is built from (None: absent or
    invalid; an invalid one is also an error in the report)."""

    algorithm: gen.SpecModel | None
    environment: gen.EnvSpec | None
    training: gen.TrainingSpec | None
    mutation: gen.MutationSpec | None
    replay_buffer: gen.ReplayBufferSpec | None
    selection_strategy: gen.TournamentSelectionSpec | None
    network: dict[str, object] | None


class TrainingManifest(BaseModel):
    """A validated Arena manifest. ``model_dump(mode="json", by_alias=True)`` is the payload."""

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True,
                              defer_build=True)

    # Stored as built by the checker (model_construct), never validated again.
    algorithm: SkipValidation[gen.SpecModel]
    environment: SkipValidation[gen.EnvSpec]
    training: SkipValidation[gen.TrainingSpec | None] = None
    network: SkipValidation[dict[str, object] | None] = None
    mutation: SkipValidation[gen.MutationSpec | None] = None
    replay_buffer: SkipValidation[gen.ReplayBufferSpec | None] = None
    selection_strategy: SkipValidation[gen.TournamentSelectionSpec | None] = Field(
        default=None,
        validation_alias=AliasChoices("selection_strategy", "tournament_selection"),
        serialization_alias="tournament_selection",
    )

    @overload
    @classmethod
    def get_validated(cls, manifest: object, mode: Literal["json"] = "json") -> JsonObject: ...

    @overload
    @classmethod
    def get_validated(cls, manifest: object, mode: Literal["python"]) -> TrainingManifest: ...

    @classmethod
    def get_validated(cls, manifest: object,
                      mode: Literal["json", "python"] = "json") -> JsonObject | TrainingManifest:
        """Validate a file (a string is a path) or mapping; ``json`` returns the payload."""
        validated: TrainingManifest
        if isinstance(manifest, TrainingManifest):
            validated = manifest
        elif isinstance(manifest, str | os.PathLike):
            validated = cls.from_document(load_file(manifest))
        elif isinstance(manifest, Mapping):
            validated = cls.from_document(LocatedDocument(data=copy.deepcopy(dict(manifest))))
        else:
            raise TypeError("Arena expects a serialized manifest (a path or a mapping), not a "
                            f"{type(manifest).__name__}")
        return validated.model_dump(mode="json", by_alias=True) if mode == "json" else validated

    @classmethod
    def model_validate(cls, obj: object, *, strict: bool | None = None, extra: object = None,
                       from_attributes: bool | None = None, context: object = None,
                       by_alias: bool | None = None, by_name: bool | None = None) -> TrainingManifest:
        """Validate a mapping; raises :class:`ManifestError` listing every problem."""
        if isinstance(obj, cls):
            return obj
        if not isinstance(obj, Mapping):
            raise ManifestError([ManifestIssue("", "the manifest must be a mapping of "
                                               f"sections, got {type(obj).__name__}")])
        return cls.from_document(LocatedDocument(data=copy.deepcopy(dict(obj))))

    @classmethod
    def from_document(cls, doc: LocatedDocument) -> TrainingManifest:
        checker = _ArenaChecker(doc)
        fields = checker.run()
        report = checker.report
        ignored = [i.path for i in report.warnings if i.kind == "unknown_key"]
        if ignored:
            where = f"{report.source}: " if report.source else ""
            logger.warning("%sIgnoring unrecognized manifest field(s): %s", where, ignored)
        for issue in report.warnings:
            if issue.kind != "unknown_key":
                logger.warning("%s", issue)
        if report.errors:
            unknown = any(i.kind == "unknown_algorithm" for i in report.errors)
            error_cls = UnknownAlgorithmError if unknown else ManifestError
            raise error_cls(report.errors, source=report.source, warnings=report.warnings)
        return cls.model_construct(**fields)

    @property
    def tournament_selection(self) -> gen.TournamentSelectionSpec | None:
        """Deprecated: the tournament selection spec (None when unset)."""
        warnings.warn("TrainingManifest.tournament_selection is deprecated; use "
                      "selection_strategy", DeprecationWarning, stacklevel=2)
        return self.selection_strategy

    @model_serializer(mode="wrap")
    def _payload(self, handler: SerializerFunctionWrapHandler,
                 info: SerializationInfo) -> dict[str, object]:
        def dump(value: BaseModel, exclude: set[str] | None = None) -> JsonObject:
            return value.model_dump(mode="json", exclude_none=True, exclude=exclude)

        selection_key = "tournament_selection" if info.by_alias else "selection_strategy"
        out: dict[str, object] = {
            "algorithm": {**dump(self.algorithm, _NOT_SENT), "name": _name_of(self.algorithm)},
            "environment": dump(self.environment),
        }
        if self.training is not None:
            out["training"] = dump(self.training)
        out["mutation"] = dump(self.mutation) if self.mutation is not None else {}
        out[selection_key] = dump(self.selection_strategy) if self.selection_strategy is not None else {}
        out["network"] = copy.deepcopy(self.network) if self.network is not None else {}
        if self.replay_buffer is not None:
            out["replay_buffer"] = dump(self.replay_buffer)
        return out


def _name_of(spec: object) -> str:
    return str(getattr(spec, "name", type(spec).__name__.removesuffix("Spec")))


class _ArenaChecker:
    """Collects errors (and unknown-key warnings) for one document."""

    def __init__(self, doc: LocatedDocument) -> None:
        self.doc = doc
        self.report = ManifestReport(source=doc.file)

    def issue(self, path: PathKey, message: str, *, kind: str, severity: str = "error",
              suggestion: str | None = None) -> None:
        self.report.add(ManifestIssue(format_path(path), message, self.doc.locate(path),
                                      severity=severity, suggestion=suggestion,  # type: ignore[arg-type]
                                      kind=kind))

    def violations(self, found: list[Violation], prefix: PathKey) -> None:
        for violation in found:
            self.issue((*prefix, *violation.path), violation.message, kind="rule")

    def validate(self, model: type[M], data: dict[str, object], prefix: PathKey) -> M | None:
        """Validate; unknown keys (which the Arena models ignore) are reported as warnings
        and left out of the payload."""
        for path in unknown_keys(model, data):
            self._ignored(format_path((*prefix, *path)), self.doc.locate((*prefix, *path)))
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for issue in issues_from_validation_error(exc, data=data, prefix=prefix,
                                                      doc=self.doc, model=model):
                self.report.add(issue)
            return None

    def _ignored(self, path: str, location: Location | None) -> None:
        self.report.add(ManifestIssue(path, "Ignoring unrecognized manifest field", location,
                                      severity="warning", kind="unknown_key"))

    def run(self) -> _Sections:
        data = self.doc.data
        assert isinstance(data, Mapping)  # the parsers refuse a document that is not one
        for key in list(data):
            if key not in (*SECTIONS, LEGACY_SELECTION_KEY):
                self.issue((key,), "Ignoring unrecognized manifest field", kind="unknown_key",
                           severity="warning", suggestion=closest(str(key), SECTIONS))
        for path, value in non_finite_paths(data):  # JSON has no such numbers
            self.issue(path, f"must be a finite number, got {value}", kind="schema")
        for key in ("algorithm", "environment"):
            if not isinstance(data.get(key), Mapping):
                what = "required section is missing" if key not in data else "must be a mapping"
                self.issue((key,), what, kind="schema")
        algorithm = self._algorithm(data.get("algorithm"))
        environment = self._section("environment", gen.EnvSpec, data.get("environment"))
        training = self._section("training", gen.TrainingSpec, data.get("training") or {})
        if training is not None:
            self.violations(training_rules(training), ("training",))
        fields: _Sections = {
            "algorithm": algorithm, "environment": environment, "training": training,
            "mutation": self._section("mutation", gen.MutationSpec, data.get("mutation")),
            "replay_buffer": self._section("replay_buffer", gen.ReplayBufferSpec,
                                           data.get("replay_buffer")),
            "selection_strategy": self._selection(data),
            "network": self._network(algorithm, data.get("network")),
        }
        if isinstance(algorithm, gen.LLMAlgorithmSpec):
            self.violations(llm_model_rule(algorithm), ())
        finite = {i.path for i in self.report.errors if i.message.startswith("must be a finite")}
        self.report.errors = [i for i in self.report.errors if i.path not in finite
                              or i.message.startswith("must be a finite")]
        return fields

    def _algorithm(self, raw: object) -> gen.SpecModel | None:
        if not isinstance(raw, Mapping):
            return None
        name = raw.get("name")
        registered = sorted(ARENA_REGISTRY)
        if name is None:
            self.issue(("algorithm", "name"), "required key is missing; Arena algorithms: "
                       f"{', '.join(registered)}", kind="schema")
            return None
        if name not in ARENA_REGISTRY:
            local_only = name in LOCAL_ONLY
            why = "runs locally only (not eligible for Arena)" if local_only else "is not registered"
            self.issue(("algorithm", "name"), f"No registry entry for algorithm {name!r}: it {why}. "
                       f"Registered: {registered}", kind="unknown_algorithm",
                       suggestion=None if local_only else closest(str(name), registered, 0.6))
            return None
        spec = self.validate(ARENA_REGISTRY[name], dict(raw), ("algorithm",))
        if spec is not None:
            self.violations(algorithm_rules(name, spec), ("algorithm",))
        return spec

    def _section(self, key: str, model: type[M], raw: object) -> M | None:
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            if key != "environment" and key != "algorithm":
                self.issue((key,), f"must be a mapping, got {type(raw).__name__}", kind="schema")
            return None
        return self.validate(model, dict(raw), (key,))

    def _selection(self, data: Mapping[str, object]) -> gen.TournamentSelectionSpec | None:
        key = "selection_strategy" if "selection_strategy" in data else LEGACY_SELECTION_KEY
        raw = data.get(key)
        if isinstance(raw, Mapping) and raw.get("strategy", "tournament") != "tournament":
            self.issue((key, "strategy"), "Arena only supports tournament selection "
                       f"(got {raw.get('strategy')!r}); multi-frequency selection runs locally",
                       kind="schema")
            return None
        return self._section(key, gen.TournamentSelectionSpec, raw)

    def _network(self, algorithm: gen.SpecModel | None, raw: object) -> dict[str, object] | None:
        if raw is None or (isinstance(raw, Mapping) and not raw):
            return None  # `network: {}` is what the payload carries when no network is set
        if not isinstance(raw, Mapping):
            self.issue(("network",), f"must be a mapping, got {type(raw).__name__}", kind="schema")
            return None
        is_llm = isinstance(algorithm, gen.LLMAlgorithmSpec)
        model = gen.FinetuningNetworkSpec if "pretrained_model_name_or_path" in raw or is_llm \
            else gen.RLNetworkSection
        spec = self.validate(model, dict(raw), ("network",))
        if algorithm is not None and is_llm and spec is not None:
            # The network names the model; LoRA settings stay under network on Arena.
            assert isinstance(algorithm, gen.LLMAlgorithmSpec)  # is_llm
            assert isinstance(spec, gen.FinetuningNetworkSpec)  # chosen for an LLM above
            algorithm.pretrained_model_name_or_path = spec.pretrained_model_name_or_path
            algorithm.max_model_len = spec.max_context_length
        if algorithm is not None and getattr(algorithm, "recurrent", False) and raw.get("simba"):
            self.issue(("algorithm", "recurrent"), "recurrent and SimBa (network.simba) cannot "
                       "both be set", kind="rule")
        return copy.deepcopy(dict(raw))


__all__ = ["ARENA_REGISTRY", "TrainingManifest"]
