"""Dataset requests (part of :class:`ArenaClient`): CSV uploads for LLM fine-tuning."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agilerl.arena.environments import close_parts
from agilerl.arena.errors import ArenaConfigError
from agilerl.arena.transport import API_PREFIX as _API
from agilerl.arena.transport import Transport
from agilerl.arena.upload import file_part

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue

__all__ = ["DATASET_CATEGORIES", "DatasetRequests", "load_column_mapping"]

#: dataset categories and the fields their column mapping names.
DATASET_CATEGORIES: dict[str, tuple[str, ...]] = {
    "reasoning": ("question", "answer"),
    "preference": ("prompt", "chosen", "rejected"),
    "sft": ("prompt", "target"),
}


def load_column_mapping(
    text: str | None = None, file: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """The column mapping from JSON text or a JSON file (exactly one of them)."""
    if (text is None) == (file is None):
        raise ArenaConfigError("Give the column mapping as JSON text or as a JSON file.")
    source = "--column-mapping"
    if file is not None:
        source = str(file)
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ArenaConfigError(f"Cannot read the column mapping file {file}: {exc}") from None
    try:
        mapping = json.loads(text or "")
    except ValueError as exc:
        raise ArenaConfigError(f"{source} is not valid JSON: {exc}") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        raise ArenaConfigError(f"{source} must be a JSON object of strings, e.g. "
                               '{"prompt": "question_text", "target": "answer_text"}')
    return mapping


class DatasetRequests:
    """The ``/api/cli/v1/datasets`` endpoints; mixed into ``ArenaClient``."""

    _transport: Transport

    def list_datasets(self, name: str | None = None, search: str | None = None) -> list[JsonValue]:
        """The user's datasets (``search``: a Hugging Face search, where the server has one)."""
        params = {k: v for k, v in (("name", name), ("search", search)) if v}
        answer = self._transport.request("GET", f"{_API}/datasets", params=params)
        return list(cast("list[JsonValue]", answer))  # the server's JSON list

    def dataset_exists(self, name: str) -> JsonObject:
        """``{"exists": bool, "id"?, "datasetType"?}``."""
        answer = self._transport.request("GET", f"{_API}/datasets/exists", params={"name": name})
        return dict(answer) if isinstance(answer, dict) else {"exists": False}

    def create_dataset(
        self,
        name: str,
        category: str,
        column_mapping: dict[str, str],
        *,
        description: str | None = None,
        file: str | os.PathLike[str] | bytes | None = None,
        hf_dataset_name: str | None = None,
        hf_config: str | None = None,
        hf_split: str | None = None,
    ) -> JsonObject:
        """Create a dataset from a CSV file (or, on the hosted service, a Hub dataset).

        :raises ArenaConfigError: for an unknown category (nothing is sent).
        :raises ArenaValidationError: when the server refuses the data.
        """
        kind = category.lower()
        if kind not in DATASET_CATEGORIES:
            raise ArenaConfigError(
                f"Unknown dataset category '{category}'; choose one of "
                + ", ".join(sorted(DATASET_CATEGORIES))
            )
        fields = {"name": name, "category": kind, "column_mapping": json.dumps(column_mapping),
                  "description": description, "hf_dataset_name": hf_dataset_name,
                  "hf_config": hf_config, "hf_split": hf_split}
        data = {k: v for k, v in fields.items() if v is not None}
        files = {"file": file_part(file, "dataset.csv", "text/csv")} if file is not None else None
        try:
            answer = self._transport.request(
                "POST", f"{_API}/datasets/create", data=data, files=files,
                timeout=self._transport.upload_timeout,
            )
        finally:
            close_parts(files)
        return dict(answer) if isinstance(answer, dict) else {"result": answer}

    def delete_dataset(self, name: str) -> JsonValue:
        """Delete a dataset."""
        return self._transport.request("DELETE", f"{_API}/datasets/delete", json={"name": name})
