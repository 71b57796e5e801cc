"""Manifest problems reported to users: one exception carrying every issue found.

Each issue names the dotted path of the offending key (``algorithm.lr``,
``network.encoder_config.hidden_size[0]``), says what is wrong, and, when the manifest
came from a file, where the key is written (``file:line:col``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic_core import PydanticCustomError, ValidationError

from agilerl.core.value_types import JsonObject

if TYPE_CHECKING:
    from agilerl.models.manifest import TrainingManifest

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Location:
    """Where a key or value is written in a manifest file (1-based line and column)."""

    file: str | None
    line: int
    column: int

    def __str__(self) -> str:
        prefix = f"{self.file}:" if self.file else "line "
        return f"{prefix}{self.line}:{self.column}"


@dataclass(frozen=True)
class ManifestIssue:
    """One problem (or warning) found in a manifest."""

    path: str
    message: str
    location: Location | None = None
    severity: Severity = "error"
    suggestion: str | None = None
    kind: str = "invalid"

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        path = self.path or "<manifest>"
        hint = f" (did you mean '{self.suggestion}'?)" if self.suggestion else ""
        return f"{where}{path}: {self.message}{hint}"

    def to_dict(self) -> JsonObject:
        """Plain form for ``--json`` output."""
        loc = self.location
        return {
            "path": self.path,
            "message": self.message,
            "severity": self.severity,
            "kind": self.kind,
            "suggestion": self.suggestion,
            "file": loc.file if loc else None,
            "line": loc.line if loc else None,
            "column": loc.column if loc else None,
        }


@dataclass
class ManifestReport:
    """Everything found while validating one manifest: errors and warnings."""

    source: str | None = None
    errors: list[ManifestIssue] = field(default_factory=list)
    warnings: list[ManifestIssue] = field(default_factory=list)
    manifest: TrainingManifest | None = None
    """The validated ``TrainingManifest`` (when valid and requested)."""
    resolved: dict[str, object] | None = None
    """JSON-mode dump of the validated manifest (when valid and requested)."""

    def add(self, issue: ManifestIssue) -> None:
        (self.errors if issue.severity == "error" else self.warnings).append(issue)

    @property
    def ok(self) -> bool:
        return not self.errors


def in_file_order(issue: ManifestIssue) -> tuple[int, int]:
    """Sort key: where the issue is written (unlocated issues first)."""
    loc = issue.location
    return (loc.line, loc.column) if loc else (0, 0)


class ManifestError(ValidationError):
    """A manifest is invalid. ``issues`` lists every problem found, not just the first.

    It is a Pydantic ``ValidationError`` (so also a ``ValueError``) because the reference
    library raises those for a bad manifest: code that catches either keeps catching this,
    and ``errors()`` gives one Pydantic-style entry (``loc``, ``msg``, ``type``) per issue.
    """

    issues: list[ManifestIssue]
    source: str | None
    warnings: list[ManifestIssue]

    def __new__(cls, *args: Any, **kwargs: Any) -> ManifestError:
        if args and isinstance(args[0], str):
            # Pydantic's own constructor (title, line errors): ``from_exception_data``
            # below builds the instance through it.
            return super().__new__(cls, *args, **kwargs)
        issues = list(args[0] if args else kwargs["issues"])
        line_errors = [
            {
                "type": PydanticCustomError("manifest", issue.message),
                "loc": tuple(issue.path.split(".")) if issue.path else (),
                "input": None,
            }
            for issue in issues
        ]
        build = _FROM_EXCEPTION_DATA.__get__(None, cls)
        instance: ManifestError = build("TrainingManifest", line_errors)
        return instance

    def __init__(
        self,
        issues: list[ManifestIssue] | str,
        *args: object,
        source: str | None = None,
        warnings: list[ManifestIssue] | None = None,
    ) -> None:
        if isinstance(issues, str):
            return  # Pydantic's constructor, called on the way through __new__
        self.issues = list(issues)
        self.source = source
        self.warnings = list(warnings or [])
        self.args = (self._render(),)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pydantic would rebuild from its line errors and lose the issues and locations.
        return (_rebuild_manifest_error, (type(self), self.issues, self.source, self.warnings))

    @property
    def paths(self) -> list[str]:
        """Dotted paths of every error, in report order."""
        return [issue.path for issue in self.issues]

    def _render(self) -> str:
        count = len(self.issues)
        head = f"{self.source}: " if self.source else ""
        noun = "problem" if count == 1 else "problems"
        lines = [f"{head}invalid manifest ({count} {noun})"]
        lines += [f"  {issue}" for issue in sorted(self.issues, key=in_file_order)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._render()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._render()!r})"

    def to_dict(self) -> JsonObject:
        return {
            "source": self.source,
            "valid": False,
            "errors": [issue.to_dict() for issue in self.issues],
            "warnings": [issue.to_dict() for issue in self.warnings],
        }


_FROM_EXCEPTION_DATA = ValidationError.__dict__["from_exception_data"]


def _rebuild_manifest_error(
    cls: type[ManifestError],
    issues: list[ManifestIssue],
    source: str | None,
    warnings: list[ManifestIssue],
) -> ManifestError:
    return cls(issues, source=source, warnings=warnings)


class UnknownAlgorithmError(ManifestError, KeyError):
    """``algorithm.name`` is not a registered algorithm.

    Also a ``KeyError``: the reference library raises a bare ``KeyError`` for an unknown
    name, so callers catching ``KeyError`` still catch this, while everything else about
    it (all problems listed, file positions) is a :class:`ManifestError`.
    """

    def __str__(self) -> str:  # KeyError would otherwise print the repr of the message
        return self._render()
