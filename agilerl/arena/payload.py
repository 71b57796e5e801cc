"""The training manifest as Arena receives it: validated with the light Arena models.

Validation happens on the user's machine first, so a mistake is reported against the
user's own file (with line numbers when it came from YAML) before anything is sent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject


__all__ = ["manifest_payload"]


def manifest_payload(manifest: object) -> JsonObject:
    """Validate *manifest* with the Arena ``TrainingManifest`` and return its JSON payload.

    :param manifest: A YAML/JSON file path, a plain mapping, an Arena manifest, or a local
        (core) manifest object, which is converted first.
    :raises ManifestError: (a ``ValueError``) listing every problem, located in the file.
    :raises FileNotFoundError: when the manifest file does not exist.
    """
    from agilerl.arena.models import TrainingManifest

    to_json = getattr(manifest, "to_json_dict", None)
    if callable(to_json) and not isinstance(manifest, TrainingManifest):
        manifest = to_json(by_alias=True)  # a local TrainingManifest object
    source = Path(manifest) if isinstance(manifest, (str, os.PathLike)) else manifest
    return dict(TrainingManifest.get_validated(source, mode="json"))
