"""Load a manifest file for training, with dotted command-line overrides applied.

The file is parsed, the overrides (if any) applied to its data, and the result validated
like ``agilerl validate`` does; each problem at an overridden path is reported naming the
override (``training.pop_size=0``) instead of a file position, and the others keep their
position in the file. One difference from ``validate``: an environment whose package is not
installed here (``ALE/...`` without ale-py, Box2D) is only a warning for ``validate``, which
may check a manifest meant for another machine, and an error for training, which needs it now.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from agilerl.training.overrides import Override, apply_overrides, override_for_path

if TYPE_CHECKING:
    from agilerl.core.manifest_errors import ManifestError, ManifestIssue
    from agilerl.models.manifest import TrainingManifest


def load_manifest(path: str | os.PathLike[str],
                  overrides: Sequence[Override] = ()) -> TrainingManifest:
    """A validated ``TrainingManifest`` (raises ``ManifestError`` / ``OverrideError``)."""
    import agilerl.models as models
    from agilerl.models.loading import load_file
    from agilerl.models.manifest import _raise_for
    from agilerl.models.validation import check_document

    doc = load_file(path)
    if overrides:
        doc.data = apply_overrides(doc.data, overrides)
    report, parts = check_document(doc)
    for issue in [i for i in report.warnings if i.kind == "missing_package"]:
        report.warnings.remove(issue)
        report.errors.append(replace(issue, severity="error"))
    try:
        _raise_for(report)
    except models.ManifestError as exc:
        raise (_relocated(exc, overrides) if overrides else exc) from None
    return models.TrainingManifest.from_parts(parts, source=doc.file, base_dir=doc.base_dir)


def _relocated(exc: ManifestError, overrides: Sequence[Override]) -> ManifestError:
    """The same error, with problems at overridden paths naming their override."""
    issues = []
    for issue in exc.issues:
        override = override_for_path(issue.path, overrides)
        if override is not None:
            issue = replace(issue, location=None,
                            message=f"{issue.message} (set by override '{override.text}')")
        else:
            related = _related_override(issue, overrides)
            if related is not None:
                issue = replace(issue, message=f"{issue.message} (with override "
                                               f"'{related.text}')")
        issues.append(issue)
    return type(exc)(issues, source=exc.source, warnings=list(getattr(exc, "warnings", [])))


def _related_override(issue: ManifestIssue, overrides: Sequence[Override]) -> Override | None:
    """An override of a sibling field that a cross-field rule's message names
    (``evo_steps ... max_steps`` when ``training.max_steps`` was overridden)."""
    section = issue.path.split(".", 1)[0]
    for override in reversed(overrides):
        if override.path[0] == section and override.path[-1] in issue.message:
            return override
    return None
