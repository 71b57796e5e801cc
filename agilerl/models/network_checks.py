"""Checks of a manifest's ``network`` section (spec §3.4): LLM (finetuning) networks, RL
networks whose architecture is known (eager) and ones left to be inferred (deferred)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel

from agilerl.core.manifest_errors import Location, ManifestIssue, ManifestReport
from agilerl.models.algo import AlgoSpec
from agilerl.models.loading import LocatedDocument, PathKey, format_path
from agilerl.models.networks import (
    DEFERRED_ENCODER_SEEDS,
    ENCODER_SPECS,
    NETWORK_SPECS,
    FinetuningNetworkSpec,
    NetworkSpec,
    RLNetworkSection,
    is_finetuning_network,
    network_arch,
    normalise_network,
    with_default_encoder,
)
from agilerl.models.rules import Violation, encoder_rules, network_rules
from agilerl.models.suggest import closest

if TYPE_CHECKING:
    from agilerl.models.validation import ManifestParts

M = TypeVar("M", bound=BaseModel)


class NetworkChecks:
    """Network-section checks of the manifest checker (which provides the attributes and
    the ``issue``/``validate`` methods declared here)."""

    doc: LocatedDocument
    report: ManifestReport
    parts: ManifestParts

    def issue(self, path: PathKey, message: str, *, kind: str, severity: str = "error",
              suggestion: str | None = None, location: Location | None = None) -> None:
        raise NotImplementedError

    def validate(self, model: type[M], data: object, prefix: PathKey) -> M | None:
        raise NotImplementedError

    def probe(self) -> NetworkChecks:
        """A fresh checker on the same document (to try a candidate without reporting)."""
        raise NotImplementedError

    def _network(self, algorithm_class: type[AlgoSpec], algorithm: AlgoSpec | None,
                 raw: object) -> None:
        if raw is None or (isinstance(raw, Mapping) and not raw):
            return  # no network section: null or {} (the Arena payload's "unset")
        if not isinstance(raw, Mapping):
            self.issue(("network",), f"must be a mapping, got {type(raw).__name__}",
                       kind="schema")
            return
        if is_finetuning_network(raw) or algorithm_class.env_kind == "llm":
            self._finetuning_network(algorithm_class, algorithm, raw)
            return
        known = set(RLNetworkSection.model_fields)
        for key in raw:
            if key not in known:
                self.issue(("network", key), "unknown key", kind="schema",
                           suggestion=closest(str(key), known))
        arch = network_arch(raw)
        if arch is None:
            self._deferred_network(algorithm_class, algorithm, raw)
        elif arch not in ENCODER_SPECS:
            encoder = raw.get("encoder_config")
            written = ("network", "encoder_config", "arch") if isinstance(encoder, Mapping) \
                and "arch" in encoder else ("network", "arch")
            choices = ", ".join(f"'{a}'" for a in ENCODER_SPECS)
            self.issue(written, f"Input should be one of {choices} (got {arch!r})",
                       kind="schema", suggestion=closest(str(arch), ENCODER_SPECS))
        else:
            self._eager_network(algorithm_class, algorithm, raw)

    def _finetuning_network(self, algorithm_class: type[AlgoSpec], algorithm: AlgoSpec | None,
                            raw: Mapping[str, object]) -> None:
        if algorithm_class.env_kind != "llm":
            self.issue(("network", "pretrained_model_name_or_path"), "a pretrained model "
                       f"network only applies to LLM algorithms, not {algorithm_class.algo_name}",
                       kind="schema")
            return
        spec = self.validate(FinetuningNetworkSpec, dict(raw), ("network",))
        if spec is not None:
            self.parts.network = spec.model_dump(mode="json")
            if algorithm is not None:
                _merge_llm_network(algorithm, spec)

    def _eager_network(self, algorithm_class: type[AlgoSpec], algorithm: AlgoSpec | None,
                       raw: Mapping[str, object]) -> None:
        """The architecture is known: validate as the algorithm's network class, whose
        encoder union is chosen by ``arch`` (so each problem is reported once)."""
        network_class = algorithm_class.network_spec or NETWORK_SPECS["NetworkSpec"]
        normalised = normalise_network(with_default_encoder(raw))
        data = {k: v for k, v in normalised.items() if k in network_class.model_fields}
        spec = self.validate(network_class, data, ("network",))
        if spec is None:
            return
        for violation in network_rules(spec):
            self.issue(("network", *violation.path), violation.message, kind="rule")
        assert isinstance(spec, NetworkSpec)  # an RL algorithm's network class is one
        section = spec.to_section()
        if "squash_output" in raw and "squash_output" not in section:
            section["squash_output"] = raw["squash_output"]
        self.parts.network = section
        if algorithm is not None:
            algorithm.net_config = spec  # type: ignore[attr-defined]

    def _deferred_network(self, algorithm_class: type[AlgoSpec], algorithm: AlgoSpec | None,
                          raw: Mapping[str, object]) -> None:
        """No ``arch``: the encoder is inferred from the observation space when the trainer
        is built. Check the rest of the section, then the written encoder keys against the
        encoder kinds they could be."""
        rest = {k: v for k, v in raw.items() if k != "encoder_config"}
        if "encoder_config" in raw:
            rest["encoder_config"] = {}  # an empty (partial) encoder: checked below
        # A problem in the rest of the section (a missing head_config) must not hide the
        # encoder's own problems: both are checked, and the network is kept only if sound.
        rest_ok = self.validate(RLNetworkSection, rest, ("network",)) is not None
        encoder = raw.get("encoder_config") or {}
        if not isinstance(encoder, Mapping):
            self.issue(("network", "encoder_config"), "must be a mapping", kind="schema")
            return
        data = self.doc.data
        assert isinstance(data, Mapping)  # the parsers refuse a document that is not one
        algorithm_section = data.get("algorithm") or {}
        assert isinstance(algorithm_section, Mapping)  # the algorithm was found in it
        recurrent = bool(algorithm_section.get("recurrent"))
        candidates = _deferred_candidates(raw, recurrent)
        errors: list[ManifestIssue] = []
        for arch in candidates:
            seeded = {**copy.deepcopy(DEFERRED_ENCODER_SEEDS[arch]), **encoder, "arch": arch}
            probe = self.probe()
            spec = probe.validate(ENCODER_SPECS[arch], seeded, ("network", "encoder_config"))
            if spec is not None:
                found = [v.under("network", "encoder_config") for v in _encoder_rules(arch, spec)]
                if not found:
                    errors = []
                    break
                errors = errors or [ManifestIssue(format_path(v.path), v.message,
                                                  self.doc.locate(v.path), kind="rule")
                                    for v in found]
            else:
                errors = errors or probe.report.errors
        for issue in errors:
            self.report.add(issue)
        if not errors and rest_ok:
            self.parts.network = copy.deepcopy(dict(raw))
            if algorithm is not None:
                algorithm.net_config = copy.deepcopy(dict(raw))  # type: ignore[attr-defined]


def _merge_llm_network(algorithm: AlgoSpec, network: FinetuningNetworkSpec) -> None:
    """The network section's model name, context length and LoRA settings override the
    algorithm's (spec §3.4)."""
    algorithm.pretrained_model_name_or_path = network.pretrained_model_name_or_path  # type: ignore[attr-defined]
    algorithm.max_model_len = network.max_context_length  # type: ignore[attr-defined]
    if network.lora_config is not None:
        algorithm.lora_config = network.lora_config.model_dump(mode="json")  # type: ignore[attr-defined]


def _deferred_candidates(raw: Mapping[str, object], recurrent: bool) -> list[str]:
    """Encoder kinds a deferred network could resolve to, most likely first."""
    encoder = raw.get("encoder_config") or {}
    keys = set(encoder) if isinstance(encoder, Mapping) else set()
    fits = [arch for arch, cls in ENCODER_SPECS.items() if keys <= set(cls.model_fields)]
    preferred = "simba" if raw.get("simba") else ("lstm" if recurrent else "mlp")
    order = sorted(fits or list(ENCODER_SPECS), key=lambda a: a != preferred)
    if not fits:  # no kind has every key: report against the preferred one (unknown keys)
        return [preferred]
    return order


def _encoder_rules(arch: str, spec: BaseModel) -> list[Violation]:
    return encoder_rules(arch, spec)
