"""Load a manifest file for training, with dotted command-line overrides applied.

Without overrides the file is validated as is (errors carry ``file:line:col``). With
overrides, the file is parsed, the overrides applied to its data, and the result validated
the same way; each problem at an overridden path is reported naming the override
(``training.pop_size=0``) instead of a file position, and the others keep their position in
the file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agilerl.training.overrides import Override, apply_overrides, override_for_path


def load_manifest(path: str | os.PathLike[str], overrides: Sequence[Override] = ()) -> Any:
    """A validated ``TrainingManifest`` (raises ``ManifestError`` / ``OverrideError``)."""
    import agilerl.models as models
    from agilerl.models.loading import load_file

    if not overrides:
        return models.TrainingManifest.get_validated(os.fspath(path), mode="python")
    doc = load_file(path)
    doc.data = apply_overrides(doc.data, overrides)
    try:
        return models.TrainingManifest.from_document(doc)
    except models.ManifestError as exc:
        raise _relocated(exc, overrides) from None


def _relocated(exc: Any, overrides: Sequence[Override]) -> Any:
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


def _related_override(issue: Any, overrides: Sequence[Override]) -> Override | None:
    """An override of a sibling field that a cross-field rule's message names
    (``evo_steps ... max_steps`` when ``training.max_steps`` was overridden)."""
    section = issue.path.split(".", 1)[0]
    for override in reversed(overrides):
        if override.path[0] == section and override.path[-1] in issue.message:
            return override
    return None
