"""The training manifest as Arena receives it: validated with the light Arena models.

Validation happens on the user's machine first, so a mistake is reported against the
user's own file (with line numbers when it came from YAML) before anything is sent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["manifest_payload"]


def manifest_payload(manifest: str | os.PathLike[str] | dict[str, Any] | Any) -> dict[str, Any]:
    """Validate *manifest* with the Arena ``TrainingManifest`` and return its JSON payload.

    :param manifest: A YAML/JSON file path, a plain mapping, or an Arena manifest model.
    :raises ManifestError: (a ``ValueError``) listing every problem, located in the file.
    :raises TypeError: for a core (local) ``TrainingManifest`` object.
    """
    from agilerl.arena.models import TrainingManifest

    if isinstance(manifest, TrainingManifest):
        return dict(manifest.model_dump(mode="json", by_alias=True, exclude_none=True))
    if hasattr(manifest, "model_dump") and not isinstance(manifest, dict):
        raise TypeError(
            "Arena expects a serialized manifest (a path or a dict), not a "
            f"{type(manifest).__name__} object; pass manifest.model_dump(by_alias=True)."
        )
    source = Path(manifest) if isinstance(manifest, (str, os.PathLike)) else manifest
    return dict(TrainingManifest.get_validated(source, mode="json"))
