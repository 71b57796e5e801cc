"""LLM jobs on uploaded datasets.

A manifest for an LLM algorithm whose ``environment.dataset`` (or its alias ``name``)
names one of the submitter's datasets gets a copy of that CSV in its experiment folder:
``dataset`` becomes ``dataset.csv`` (a path inside the folder, where the job runs), and
``columns``, unless the manifest sets it, renames the CSV's columns to the fields of the
dataset's category (``{"q": "question", "a": "answer"}``); for ``sft`` the target column
is also named ``response_column``. Only the submitter's own datasets are looked up.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agilerl.arena.server import nofollow
from agilerl.arena.server.catalog import Catalog
from agilerl.arena.server.policy import section

DATASET_FILE = "dataset.csv"
#: datasets are uploads, far below this (``max_upload_bytes``); a cap on what is copied.
MAX_DATASET_BYTES = 1 << 30


def _is_llm(manifest: Mapping[str, object]) -> bool:
    from agilerl.arena.models import _generated as gen

    entry = gen.REGISTRY.get(str(section(manifest, "algorithm").get("name")))
    return entry is not None and entry.environment == "llm"


def resolve(catalog: Catalog, user_id: int, manifest: Mapping[str, object]) -> Path | None:
    """Rewrite ``manifest`` in place for the user's dataset it names; return the CSV to
    copy into the experiment folder (None: it names none)."""
    env = manifest.get("environment")
    if not isinstance(env, dict) or not _is_llm(manifest):
        return None
    key = "dataset" if isinstance(env.get("dataset"), str) else "name"
    name = env.get(key)
    if not isinstance(name, str):
        return None
    row = catalog.dataset(user_id, name)
    if row is None:
        return None
    env.pop("name", None)
    env["dataset"] = DATASET_FILE
    if not env.get("columns"):
        renames = {col: field for field, col in row["column_mapping"].items() if col != field}
        if renames:
            env["columns"] = renames
    if row["category"] == "sft":
        env.setdefault("response_column", "target")
    return catalog.dataset_file(user_id, name)


def copy_into(run_root: Path, source: Path) -> None:
    """Copy the dataset ``source`` (``datasets/<user>/<name>/data.csv``) into the new
    experiment folder, neither end through a link."""
    data = nofollow.read_bytes(source.parent, source.name, limit=MAX_DATASET_BYTES)
    nofollow.write_atomic(run_root, DATASET_FILE, data)
