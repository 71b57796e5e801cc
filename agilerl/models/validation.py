"""Validate a whole manifest and report every problem at once, each with its location.

The checks, in order: document shape (duplicate keys, unknown sections), the algorithm
(registry lookup, then its spec), each optional section with its model, the network
(finetuning vs RL, eager vs deferred, §3.4), the environment (its spec for the algorithm,
source rules, then cheap local checks: Gymnasium ids, PettingZoo modules, data files), and
what needs the environment's spaces (the algorithm can act in them; the replay buffer or
rollout fits in memory), and finally the rules across sections (MF-PBT layout, SimBa vs
recurrent, LLM model name, tournament size vs population).
Every problem becomes a :class:`ManifestIssue`; nothing stops at the first one.
"""

from __future__ import annotations

import copy
import os
import types
import typing
from collections.abc import Mapping
from typing import NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from agilerl.core.environment_facts import LLM_DATASET_FORMATS
from agilerl.core.manifest_errors import Location, ManifestError, ManifestIssue, ManifestReport
from agilerl.models import budget, env_checks, env_spaces
from agilerl.models.algo import ALGO_REGISTRY, AlgoSpec
from agilerl.models.env import (
    EnvSpecModel,
    GymEnvSpec,
    LLMEnvSpec,
    env_spec_class,
    environment_input,
)
from agilerl.models.hpo import (
    SELECTION_SPECS,
    MultiFrequencySelectionSpec,
    MutationSpec,
    TournamentSelectionSpec,
    probability_sum_note,
    zero_left_out_kinds,
)
from agilerl.models.loading import (
    LocatedDocument,
    PathKey,
    format_path,
    load_file,
    non_finite_paths,
)
from agilerl.models.network_checks import NetworkChecks
from agilerl.models.pydantic_issues import field_names, issues_from_validation_error
from agilerl.models.rules import (
    Violation,
    algorithm_rules,
    frequency_ratio_rules,
    llm_model_rule,
    llm_training_rules,
    max_wall_seconds_warning,
    mf_layout,
    mutation_rules,
    replay_buffer_rules,
    simba_recurrent_rule,
    tournament_rule,
    training_rules,
)
from agilerl.models.suggest import closest
from agilerl.models.training import ReplayBufferSpec, TrainingSpec

SECTIONS = ("algorithm", "environment", "training", "network", "mutation", "replay_buffer",
            "selection_strategy")
LEGACY_SELECTION_KEY = "tournament_selection"
_COLLECT = {"collect_rules": True}

M = TypeVar("M", bound=BaseModel)


class ManifestParts:
    """The validated pieces of a manifest (what ``TrainingManifest`` is built from)."""

    def __init__(self) -> None:
        self.algorithm: AlgoSpec | None = None
        self.environment: dict[str, object] | None = None
        self.env_spec: EnvSpecModel | None = None
        self.training: TrainingSpec | None = None
        self.network: dict[str, object] | None = None
        self.mutation: MutationSpec | None = None
        self.replay_buffer: ReplayBufferSpec | None = None
        self.selection_strategy: TournamentSelectionSpec | MultiFrequencySelectionSpec | None = None
        self.selection_key: str = "selection_strategy"


class CheckedFile(NamedTuple):
    """A manifest file that could be read: its document and the parts checked from it."""

    document: LocatedDocument
    parts: ManifestParts


class _Checker(NetworkChecks):
    """Collects issues for one document."""

    def __init__(self, doc: LocatedDocument, *, check_environment: bool = True) -> None:
        self.doc = doc
        self.report = ManifestReport(source=doc.file)
        self.check_environment = check_environment
        self.parts = ManifestParts()
        self.algorithm_class: type[AlgoSpec] | None = None

    # ------------------------------------------------------------------ reporting
    def issue(self, path: PathKey, message: str, *, kind: str, severity: str = "error",
              suggestion: str | None = None, location: Location | None = None) -> None:
        self.report.add(ManifestIssue(
            path=format_path(path), message=message,
            location=location or self.doc.locate(path),
            severity=severity, suggestion=suggestion, kind=kind,  # type: ignore[arg-type]
        ))

    def violations(self, found: list[Violation], prefix: PathKey, data: object = None,
                   model: type[BaseModel] | None = None) -> None:
        for violation in found:
            path = self._written((*prefix, *violation.path), data, model, len(prefix))
            self.issue(path, violation.message, kind="rule", severity=violation.severity)

    def _written(self, path: PathKey, data: object, model: type[BaseModel] | None,
                 depth: int) -> PathKey:
        """Swap a canonical field name for the alias spelling the user wrote."""
        if model is None or not isinstance(data, Mapping) or len(path) <= depth:
            return path
        field = path[depth]
        info = model.model_fields.get(field) if isinstance(field, str) else None
        if info is None or field in data:
            return path
        for spelling in field_names(model):
            if spelling in data and model.model_fields.get(spelling) is None:
                choices = getattr(info.validation_alias, "choices", ()) or ()
                if spelling in choices:
                    return (*path[:depth], spelling, *path[depth + 1:])
        return path

    def probe(self) -> _Checker:
        return _Checker(self.doc, check_environment=False)

    def validate(self, model: type[M], data: object, prefix: PathKey) -> M | None:
        """``model.model_validate(data)``; errors become located issues (returns None)."""
        try:
            return model.model_validate(data, context=_COLLECT)
        except ValidationError as exc:
            for issue in issues_from_validation_error(exc, data=data, prefix=prefix,
                                                      doc=self.doc, model=model):
                self.report.add(issue)
            return None

    # ------------------------------------------------------------------ pipeline
    def run(self) -> ManifestParts:
        data = self.doc.data
        assert isinstance(data, Mapping)  # the parsers refuse a document that is not one
        for path, first_line, _ in self.doc.duplicates:
            self.issue(path, f"duplicate key: already written at line {first_line}; YAML "
                       "would silently keep only this last value", kind="syntax")
        self._top_level(data)
        non_finite = self._non_finite(data)
        algorithm = self._algorithm(data.get("algorithm"))
        self.parts.algorithm = algorithm
        algorithm_class = self.algorithm_class
        self.parts.training = self._section("training", TrainingSpec, data.get("training"), {})
        self.parts.mutation = self._section("mutation", MutationSpec, data.get("mutation"))
        zero_left_out_kinds(self.parts.mutation)
        self.violations(probability_sum_note(self.parts.mutation), ("mutation",))
        self.parts.replay_buffer = self._section("replay_buffer", ReplayBufferSpec,
                                                 data.get("replay_buffer"))
        self._selection(data)
        if algorithm_class is not None:
            self._mutation_names(algorithm_class)
            self._network(algorithm_class, algorithm, data.get("network"))
            self._environment(algorithm_class, data.get("environment"))
        else:
            self._environment_of_any_algorithm(data.get("environment"))
        self._cross_section(algorithm)
        if non_finite:  # each such number is reported once, by _non_finite
            self.report.errors = [i for i in self.report.errors
                                  if i.path not in non_finite or i.message.startswith("must be a finite")]
        return self.parts

    def _non_finite(self, data: Mapping[str, object]) -> set[str]:
        paths = set()
        for path, value in non_finite_paths(data):
            paths.add(format_path(path))
            self.issue(path, f"must be a finite number, got {value}", kind="schema")
        return paths

    def _top_level(self, data: Mapping[str, object]) -> None:
        allowed = (*SECTIONS, LEGACY_SELECTION_KEY)
        for key in data:
            if key not in allowed:
                self.issue((key,), "unknown section", kind="schema",
                           suggestion=closest(str(key), allowed))
        for key in ("algorithm", "environment"):
            if key not in data:
                self.issue((key,), "required section is missing", kind="schema",
                           location=Location(self.doc.file, 1, 1) if self.doc.file else None)
            elif data[key] is None:
                self.issue((key,), "must be a mapping, got null", kind="schema")
        if "selection_strategy" in data and LEGACY_SELECTION_KEY in data:
            self.issue((LEGACY_SELECTION_KEY,), "give the selection block once: "
                       "'selection_strategy' and its legacy spelling 'tournament_selection' "
                       "are both present", kind="schema")

    def _algorithm(self, raw: object) -> AlgoSpec | None:
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            self.issue(("algorithm",), "must be a mapping with a 'name' key and the "
                       f"algorithm's hyperparameters, got {type(raw).__name__}", kind="schema")
            return None
        registered = sorted(ALGO_REGISTRY)
        name = raw.get("name")
        if name is None:
            self.issue(("algorithm", "name"), "required key is missing; registered "
                       f"algorithms: {', '.join(registered)}", kind="schema")
            return None
        if not isinstance(name, str) or name not in ALGO_REGISTRY:
            self.issue(("algorithm", "name"), f"unknown algorithm {name!r}; registered "
                       f"algorithms: {', '.join(registered)}", kind="unknown_algorithm",
                       suggestion=closest(str(name), registered, cutoff=0.6))
            return None
        spec_class = ALGO_REGISTRY[name]
        self.algorithm_class = spec_class
        spec = self.validate(spec_class, dict(raw), ("algorithm",))
        if spec is not None:
            self.violations(algorithm_rules(name, spec), ("algorithm",))
        return spec

    def _section(self, key: str, model: type[M], raw: object,
                 default: Mapping[str, object] | None = None) -> M | None:
        if raw is None:
            raw = default
            if raw is None:
                return None
        if not isinstance(raw, Mapping):
            self.issue((key,), f"must be a mapping, got {type(raw).__name__}", kind="schema")
            return None
        spec = self.validate(model, dict(raw), (key,))
        if model is TrainingSpec:
            # When a field is wrong, the rules still run on the fields that are fine, so one
            # run reports every problem (absent fields skip their rule: no false alarms).
            subject = spec if spec is not None else self._sound_fields(model, raw, (key,))
            self.violations(training_rules(subject), (key,), raw, model)
        if model is MutationSpec:
            self.violations(mutation_rules(spec if spec is not None else raw), (key,))
        return spec

    def _sound_fields(self, model: type[BaseModel], raw: Mapping[str, object],
                      prefix: PathKey) -> dict[str, object]:
        """The numeric fields of ``raw`` written without a problem, under canonical names
        (the first spelling written wins, as in the models); absent fields take the
        model's default, as they would in a valid section."""
        flagged = {issue.path for issue in self.report.errors}
        sound: dict[str, object] = {}
        for name, info in model.model_fields.items():
            choices = getattr(info.validation_alias, "choices", None) or [name]
            written = next((c for c in choices if isinstance(c, str) and c in raw), None)
            if written is None:
                if not info.is_required() and info.default is not None:
                    sound[name] = info.default
                continue
            value = raw[written]
            path = format_path((*prefix, written))
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if numeric and not any(p == path or p.startswith(path + ".") for p in flagged):
                sound[name] = value
        return sound

    def _selection(self, data: Mapping[str, object]) -> None:
        key = "selection_strategy" if "selection_strategy" in data else (
            LEGACY_SELECTION_KEY if LEGACY_SELECTION_KEY in data else None)
        if key is None:
            return
        self.parts.selection_key = key
        raw = data[key]
        if raw is None:
            return
        if not isinstance(raw, Mapping):
            self.issue((key,), f"must be a mapping, got {type(raw).__name__}", kind="schema")
            return
        tag = raw.get("strategy", "tournament")
        model = SELECTION_SPECS.get(tag) if isinstance(tag, str) else None
        if model is None:
            tags = ", ".join(f"'{t}'" for t in SELECTION_SPECS)
            self.issue((key, "strategy"), f"Input tag {tag!r} found using 'strategy' does not "
                       f"match any of the expected tags: {tags}", kind="schema",
                       suggestion=closest(str(tag), SELECTION_SPECS))
            return
        spec = self.validate(model, dict(raw), (key,))
        if tag == "tournament":
            training = data.get("training")
            sound = self._sound_fields(TrainingSpec, training, ("training",)) \
                if isinstance(training, Mapping) else {"pop_size": None}
            self.violations(tournament_rule(raw, sound.get("pop_size")), (key,))
        if spec is not None and tag == "multi_frequency":

            self.violations(frequency_ratio_rules(spec), (key,))
        self.parts.selection_strategy = spec

    def _mutation_names(self, algorithm_class: type[AlgoSpec]) -> None:
        mutation = self.parts.mutation
        if mutation is None:
            return
        fields = [n for n, f in algorithm_class.model_fields.items() if _is_number(f.annotation)]
        for name in mutation.rl_hp_selection:
            if name not in fields:
                self.issue(("mutation", "rl_hp_selection", name), f"{name!r} is not a numeric "
                           f"hyperparameter of {algorithm_class.algo_name}", kind="rule",
                           suggestion=closest(name, fields))

    # ------------------------------------------------------------------ network
    # ------------------------------------------------------------------ environment
    def _environment(self, algorithm: type[AlgoSpec], raw: object) -> None:
        if raw is None:
            return  # reported with the top-level sections
        if not isinstance(raw, Mapping):
            self.issue(("environment",), f"must be a mapping, got {type(raw).__name__}",
                       kind="schema")
            return
        self.parts.environment = copy.deepcopy(dict(raw))
        cls = env_spec_class(algorithm)
        spec = self.validate(cls, environment_input(algorithm, raw), ("environment",))
        if spec is None:
            return
        self.violations(spec.env_rules(), ("environment",))
        self.parts.env_spec = spec
        if self.check_environment:
            self._local_environment_checks(spec)
            self._gym_spaces_checks(algorithm, spec)

    def _environment_of_any_algorithm(self, raw: object) -> None:
        """Without a known algorithm the environment's kind is unknown: report its problems
        only when it fits no kind, as the kind it comes closest to (fewest problems)."""
        if not isinstance(raw, Mapping):
            return  # reported with the top-level sections
        closest_errors: list[ManifestIssue] | None = None
        by_kind = {env_spec_class(a): a for a in ALGO_REGISTRY.values()}
        for algorithm in sorted(by_kind.values(), key=lambda a: a.env_kind != "gym"):
            probe = self.probe()
            spec = probe.validate(env_spec_class(algorithm), environment_input(algorithm, raw),
                                  ("environment",))
            if spec is not None:
                return
            if closest_errors is None or len(probe.report.errors) < len(closest_errors):
                closest_errors = probe.report.errors
        for issue in closest_errors or []:
            self.report.add(issue)

    def _gym_spaces_checks(self, algorithm: type[AlgoSpec], spec: EnvSpecModel) -> None:
        """The algorithm can act in the environment, and its replay buffer or rollout fits in
        memory (both need the environment's spaces, read only when one of them applies)."""
        registered = type(spec).__name__ in ("GymEnvSpec", "OfflineEnvSpec") and \
            isinstance(spec, GymEnvSpec) and not spec.entrypoint and not spec.wrappers and \
            not any(i.path.startswith("environment") for i in self.report.errors) and \
            not any(i.path == "environment.name" for i in self.report.warnings)
        network = algorithm.network_spec.__name__ if algorithm.network_spec else ""
        # Only algorithms limited to some action spaces need them checked.
        restricted = network in env_spaces.ACTION_SPACES and \
            set(env_spaces.ACTION_SPACES[network]) != set(env_spaces.ANY_ACTION_SPACE)
        rollout = not algorithm.off_policy and algorithm.env_kind == "gym" and \
            "learn_step" in algorithm.model_fields
        spaces = None
        if registered and (restricted or algorithm.off_policy or rollout):
            spaces = env_spaces.gym_spaces(spec.name)
        if spaces is not None and restricted:
            others = [name for name, cls in sorted(ALGO_REGISTRY.items())
                      if cls.env_kind == algorithm.env_kind and cls.network_spec is not None
                      and spaces.action in env_spaces.ACTION_SPACES.get(
                          cls.network_spec.__name__, ())]
            self._finding(("environment", "name"), env_spaces.check_action_space(
                algorithm.algo_name, network, spec.name, spaces, others))
        if algorithm.off_policy:
            buffer = self.parts.replay_buffer
            max_size = buffer.max_size if buffer is not None else \
                ReplayBufferSpec.model_fields["max_size"].default
            self._finding(("replay_buffer", "max_size"), budget.check_replay_memory(
                max_size, spaces, getattr(spec, "name", None)))
        learn_step = getattr(self.parts.algorithm, "learn_step", None)
        if rollout and isinstance(learn_step, int):
            self._finding(("algorithm", "learn_step"), budget.check_rollout_memory(
                learn_step, spaces, getattr(spec, "name", None)))

    def _local_environment_checks(self, spec: EnvSpecModel) -> None:
        base = self.doc.base_dir
        kind = type(spec).__name__
        if kind in ("GymEnvSpec", "OfflineEnvSpec") and not spec.entrypoint:
            algo = getattr(self.parts.algorithm, "algo_name", "") or "this algorithm"
            self._finding(("environment", "name"),
                          env_checks.check_single_agent_env(spec.name, algo)
                          or env_checks.check_gym_id(spec.name))
        if kind == "PzEnvSpec" and not spec.entrypoint:
            self._finding(("environment", "name"), env_checks.check_module_path(spec.name))
        entrypoint = getattr(spec, "entrypoint", None)
        if isinstance(entrypoint, str):
            self._finding(("environment", "entrypoint"), env_checks.check_reference(entrypoint))
        for index, wrapper in enumerate(getattr(spec, "wrappers", None) or []):
            ref = wrapper[0] if isinstance(wrapper, list | tuple) else wrapper
            if isinstance(ref, str):
                self._finding(("environment", "wrappers", index),
                              env_checks.check_reference(ref, dotted_ok=True))
        for field in ("features", "targets", "dataset_path"):
            value = getattr(spec, field, None)
            refused = any(i.path == format_path(("environment", field)) for i in self.report.errors)
            if isinstance(value, str) and not refused:  # (a file of a type no reader takes)
                self._finding(("environment", field), env_checks.check_file(value, base))
        if isinstance(spec, LLMEnvSpec):
            if spec.dataset and spec.dataset.lower().endswith(
                    tuple(LLM_DATASET_FORMATS)):
                self._finding(("environment", "dataset"), env_checks.check_file(spec.dataset, base))
            if spec.reward_file_path:
                found = env_checks.check_file(spec.reward_file_path, base)
                if found is not None:  # read when training starts, from the working directory
                    self._finding(("environment", "reward_file_path"),
                                  env_checks.Finding("warning", found.message))

    def _finding(self, path: PathKey, finding: env_checks.Finding | None) -> None:
        if finding is not None:
            self.issue(path, finding.message, kind=finding.kind, severity=finding.severity,
                       suggestion=finding.suggestion)

    # ------------------------------------------------------------------ across sections
    def _cross_section(self, algorithm: AlgoSpec | None) -> None:
        data = self.doc.data
        assert isinstance(data, Mapping)  # the parsers refuse a document that is not one
        selection = self.parts.selection_strategy
        training = self.parts.training
        if selection is not None and training is not None and \
                selection.strategy == "multi_frequency":
            key = self.parts.selection_key
            layout, found = mf_layout(selection, training.pop_size, training.pop_size_given)
            found = [Violation((key, *v.path[1:]) if v.path[:1] == ("selection",) else v.path,
                               v.message) for v in found]
            self.violations(found, (), data.get("training") or {}, None)
            if layout is not None:
                selection.n_winners = layout.n_winners
                selection.n_survivors = layout.n_survivors
                selection.n_open_for_migration = layout.n_open_for_migration
                selection.n_losers = layout.n_losers
        if algorithm is None:
            return
        self.violations(simba_recurrent_rule(algorithm, data.get("network")), ())
        self.violations(replay_buffer_rules(algorithm, self.parts.replay_buffer), ())
        if type(algorithm).env_kind == "llm":
            self.violations(llm_model_rule(algorithm), ())
            if training is not None:
                env = self.parts.env_spec
                multiturn = getattr(env, "env_type", None) == "multiturn"
                self.violations(llm_training_rules(training, multiturn), (),
                                data.get("training") or {}, None)
        elif training is not None and training.max_wall_seconds is not None:
            self.violations([max_wall_seconds_warning()], ())


def _is_number(annotation: object) -> bool:
    """int or float (optionally nullable), not bool."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)
    return any(a in (int, float) for a in args)


# ---------------------------------------------------------------------- entry points


def check_document(doc: LocatedDocument, *, check_environment: bool = True) -> tuple[ManifestReport, ManifestParts]:
    """Validate a parsed document; the report lists every error and warning."""
    checker = _Checker(doc, check_environment=check_environment)
    parts = checker.run()
    return checker.report, parts


def validate_path(path: str | os.PathLike[str]) -> ManifestReport:
    """Validate a manifest file (never raises for a bad file: everything is in the report)."""
    return check_path(path)[0]


def check_path(path: str | os.PathLike[str]) -> tuple[ManifestReport, CheckedFile | None]:
    """:func:`validate_path`'s report, with the document and its checked parts when the
    file could be read (what a caller needs to build the manifest without checking again)."""
    source = os.fspath(path)
    report = ManifestReport(source=source)
    try:
        doc = load_file(source)
    except FileNotFoundError:
        report.add(ManifestIssue("", "file not found", None, kind="file"))
        return report, None
    except ManifestError as exc:
        for issue in exc.issues:
            report.add(issue)
        return report, None
    except OSError as exc:
        report.add(ManifestIssue("", f"cannot read the file: {exc.strerror or exc}", None,
                                 kind="file"))
        return report, None
    report, parts = check_document(doc)
    return report, CheckedFile(doc, parts)
