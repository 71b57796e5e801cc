"""Dataset routes (spec arena-api §1.5, §5.2): CSV uploads for LLM fine-tuning, per user.

A dataset is a CSV file plus a column mapping from the fields its category needs to the
file's columns: ``sft`` {prompt, target}, ``preference`` {prompt, chosen, rejected},
``reasoning`` {question, answer}. The mapping may also be given the other way round
(column -> field). The file is checked on upload (UTF-8, a header naming every mapped
column, at least one row, every row as wide as the header) and stored as sent.
This server has no internet access, so Hugging Face imports and searches are refused.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field
from starlette.datastructures import UploadFile

from agilerl.arena.server import nofollow, quota
from agilerl.arena.server.auth import User
from agilerl.arena.server.catalog import Catalog, Row, check_name
from agilerl.arena.server.dependencies import context, current_user, ok
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.routes_catalog import blank

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

router = APIRouter()
DATASETS = "/api/cli/v1/datasets"
#: the fields each category needs, in the order the docs list them.
CATEGORY_FIELDS: dict[str, tuple[str, ...]] = {
    "sft": ("prompt", "target"),
    "preference": ("prompt", "chosen", "rejected"),
    "reasoning": ("question", "answer"),
}
MAX_COLUMNS = 1000
_NO_HUB = ("This server has no internet access, so it cannot import from or search the"
           " Hugging Face Hub; upload the data as a CSV file (--file)")


def _bad(field: str, message: str, code: str = "INVALID_REQUEST") -> ApiError:
    return ApiError(422, code, f"{field}: {message}", errors=[f"{field}: {message}"])


def _catalog(request: Request) -> Catalog:
    catalog = context(request).catalog
    assert catalog is not None
    return catalog


def normalise_mapping(category: str, raw: str | None) -> dict[str, str]:
    """``{field: column}`` for ``category`` from the ``column_mapping`` JSON text."""
    fields = CATEGORY_FIELDS[category]
    try:
        mapping = json.loads(raw or "")
    except ValueError:
        raise _bad("column_mapping", "must be a JSON object") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, str) and v for v in
                                                mapping.values()):
        raise _bad("column_mapping", "must be a JSON object of non-empty strings")
    if not set(fields) <= set(mapping) and set(fields) <= set(mapping.values()):
        mapping = {v: k for k, v in mapping.items()}  # given as column -> field
    missing = [f for f in fields if f not in mapping]
    if missing:
        raise _bad("column_mapping", f"a {category} dataset maps {', '.join(fields)} to CSV"
                   f" columns; missing {', '.join(missing)}")
    return {f: str(mapping[f]) for f in fields}


def read_csv(data: bytes, mapping: dict[str, str]) -> tuple[list[str], int]:
    """Check the CSV against ``mapping``; returns its header and row count."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _bad("file", f"is not UTF-8 text ({exc.reason} at byte {exc.start})",
                   "INVALID_DATASET") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise _bad("file", "has no header row", "INVALID_DATASET")
        if len(header) > MAX_COLUMNS:
            raise _bad("file", f"has more than {MAX_COLUMNS} columns", "INVALID_DATASET")
        absent = [c for c in mapping.values() if c not in header]
        if absent:
            raise _bad("column_mapping", f"column(s) {', '.join(absent)} are not in the CSV"
                       f" header ({', '.join(header[:20])})", "INVALID_DATASET")
        rows = 0
        for row in reader:
            if not row:
                continue
            rows += 1
            if len(row) != len(header):
                raise _bad("file", f"row {rows + 1} has {len(row)} fields, the header has"
                           f" {len(header)}", "INVALID_DATASET")
    except csv.Error as exc:
        raise _bad("file", f"is not valid CSV: {exc}", "INVALID_DATASET") from None
    if rows == 0:
        raise _bad("file", "has a header but no rows", "INVALID_DATASET")
    return header, rows


def _public(row: Row) -> JsonObject:
    return {"id": row["id"], "name": row["name"], "category": row["category"],
            "datasetType": row["category"], "description": row["description"],
            "column_mapping": row["column_mapping"], "columns": row["columns"],
            "rows": row["rows"], "hf_dataset_id": None, "created_at": row["created_at"],
            "is_ready": True, "uploaded": True}


@router.get(DATASETS)
def list_datasets(request: Request, name: str | None = None, search: str | None = None,
                  user: User = Depends(current_user)) -> Response:
    if blank(search) is not None:
        raise ApiError(501, "NOT_SUPPORTED", _NO_HUB)
    wanted = blank(name)
    rows = _catalog(request).datasets(user.id)
    return ok([_public(r) for r in rows if not wanted or wanted.lower() in r["name"].lower()])


@router.get(DATASETS + "/exists")
def dataset_exists(request: Request, name: str, user: User = Depends(current_user)) -> Response:
    row = _catalog(request).dataset(user.id, name)
    if row is None:
        return ok({"exists": False})
    return ok({"exists": True, "id": row["id"], "datasetType": row["category"]})


@router.post(DATASETS + "/create")
async def create_dataset(request: Request, user: User = Depends(current_user)) -> Response:
    form = await request.form()
    text = {k: str(v).strip() for k, v in form.items() if isinstance(v, str)}
    name = check_name(text.get("name"), "name")
    category = text.get("category", "").lower()
    if category not in CATEGORY_FIELDS:
        raise _bad("category", f"must be one of {', '.join(sorted(CATEGORY_FIELDS))}, got"
                   f" '{text.get('category', '')}'")
    if any(text.get(k) for k in ("hf_dataset_name", "hf_config", "hf_split")):
        raise ApiError(422, "NOT_SUPPORTED", _NO_HUB, errors=["hf_dataset_name: not supported"])
    mapping = normalise_mapping(category, text.get("column_mapping"))
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise _bad("file", "a CSV file is required (--file)")
    data = await upload.read()
    header, rows = read_csv(data, mapping)
    ctx = context(request)
    quota.check(ctx.config, ctx.store, user.id, "Upload refused", adding=len(data))
    catalog = _catalog(request)
    target = catalog.dataset_file(user.id, name)
    if catalog.dataset(user.id, name) is not None:
        raise ApiError(409, "DATASET_EXISTS", f"Dataset '{name}' already exists; delete it first")
    nofollow.write_atomic(catalog.dataset_root, target.relative_to(catalog.dataset_root), data)
    row = catalog.add_dataset(user.id, {
        "name": name, "category": category,
        "description": (text.get("description") or "")[:2000] or None,
        "column_mapping": mapping, "columns": header, "rows": rows})
    return ok(_public(row), status=201)


class DatasetDelete(BaseModel):
    name: str = Field(min_length=1, max_length=128)


@router.delete(DATASETS + "/delete")
def delete_dataset(body: DatasetDelete, request: Request,
                   user: User = Depends(current_user)) -> Response:
    catalog = _catalog(request)
    row = catalog.dataset(user.id, body.name.strip())
    if row is None:
        raise ApiError(404, "DATASET_NOT_FOUND", f"Dataset '{body.name.strip()}' not found")
    catalog.delete_dataset(row["id"])
    shutil.rmtree(catalog.dataset_file(user.id, row["name"]).parent, ignore_errors=True)
    return ok({"name": row["name"], "deleted": True})
