"""Reading an environment upload (spec arena-api §5.1): the multipart form of
``create-and-validate`` into checked values, each problem a 422 naming its field."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import yaml
from starlette.datastructures import FormData, UploadFile

from agilerl.arena.server import environments
from agilerl.arena.server.catalog import check_name
from agilerl.arena.server.env_install import InstallError, parse_requirements
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.routes_catalog import flag
from agilerl.core.manifest_errors import ManifestError
from agilerl.models.loading import MAX_MANIFEST_BYTES, parse_value

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

#: an env config is read as a manifest is; requirements files get the same size limit.
MAX_SIDECAR_BYTES = MAX_MANIFEST_BYTES
_ENTRYPOINT_MAX = 300


@dataclass
class Upload:
    """A checked upload, not yet stored."""

    name: str
    version: str
    archive: bytes
    env_config: JsonObject
    requirements: list[str]
    multi_agent: bool
    do_rollouts: bool
    entrypoint: str | None
    description: str | None


def _text(form: FormData, key: str, default: str | None = None) -> str | None:
    value = form.get(key)
    if value is None or isinstance(value, UploadFile):
        return default
    return str(value).strip() or default


def _bool(form: FormData, key: str) -> bool:
    return flag(_text(form, key), key)


async def _sidecar(form: FormData, key: str) -> bytes:
    part = form.get(key)
    if part is None:
        return b""
    data = await part.read() if isinstance(part, UploadFile) else str(part).encode()
    if len(data) > MAX_SIDECAR_BYTES:
        raise ApiError(422, "INVALID_REQUEST", f"{key} is larger than {MAX_SIDECAR_BYTES} bytes",
                       errors=[f"{key}: too large"])
    return data


def _finite(node: object) -> bool:
    if isinstance(node, float):
        return math.isfinite(node)
    if isinstance(node, dict):
        return all(_finite(v) for v in node.values())
    if isinstance(node, list):
        return all(_finite(v) for v in node)
    return True


def _config_error(message: str, short: str) -> ApiError:
    return ApiError(422, "INVALID_REQUEST", f"env_config {message}",
                    errors=[f"env_config: {short}"])


def parse_env_config(data: bytes) -> JsonObject:
    """Constructor keyword arguments from a YAML or JSON mapping (empty: none).

    Read by the manifest reader (:func:`agilerl.models.loading.parse_value`), within the
    same bounds: an alias bomb is refused from its node graph, before anything is built.
    """
    text = data.decode("utf-8", errors="replace").strip()
    if not text:
        return {}
    try:
        loaded = parse_value(text)
    except ManifestError as exc:
        reason = exc.issues[0].message if exc.issues else str(exc)
        raise _config_error(f"is refused: {reason}", "expands too far") from None
    except yaml.YAMLError as exc:
        raise _config_error(f"is not valid YAML or JSON: {exc}", "not YAML or JSON") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict) or not all(isinstance(k, str) for k in loaded):
        raise _config_error("must be a mapping of constructor argument names to values",
                            "expected a mapping")
    try:
        dumped = json.loads(json.dumps(loaded))
    except (TypeError, ValueError):
        raise _config_error("holds values JSON cannot carry (dates, sets, ...)",
                            "not JSON-compatible") from None
    if not _finite(dumped):
        raise _config_error("holds a non-finite number", ".inf or .nan")
    return dict(dumped)


def check_entrypoint(value: str | None) -> str | None:
    if value is None:
        return None
    module, sep, attr = value.rpartition(":")
    if not sep or not module or not attr or len(value) > _ENTRYPOINT_MAX:
        raise ApiError(422, "INVALID_REQUEST", "entrypoint must read module:Class",
                       errors=[f"entrypoint: '{value[:100]}' is not module:Class"])
    return value


async def read_upload(form: FormData) -> Upload:
    """The upload's fields, checked (nothing is stored)."""
    name = check_name(_text(form, "name"), "name")
    version = check_name(_text(form, "version", "v1"), "version")
    if _bool(form, "language_based"):
        raise ApiError(422, "NOT_SUPPORTED", "Language-based (GEM) environments cannot be"
                       " validated on this server; upload Gymnasium or PettingZoo environments",
                       errors=["language_based: not supported"])
    if name in environments.gym_ids():
        raise ApiError(409, "ENVIRONMENT_EXISTS",
                       f"'{name}' is a built-in environment of this server; choose another name")
    archive = form.get("file")
    if not isinstance(archive, UploadFile):
        raise ApiError(422, "INVALID_REQUEST", "The upload needs a 'file' part (the"
                       " environment's source as a .tar.gz)", errors=["file: required"])
    env_config = parse_env_config(await _sidecar(form, "env_config"))
    try:
        requirements = parse_requirements((await _sidecar(form, "requirements")).decode(
            "utf-8", errors="replace"))
    except InstallError as exc:
        raise ApiError(422, "INVALID_REQUIREMENTS", str(exc),
                       errors=[f"requirements: {exc}"]) from None
    description = (_text(form, "description") or "")[:2000] or None
    return Upload(name=name, version=version, archive=await archive.read(),
                  env_config=env_config, requirements=requirements,
                  multi_agent=_bool(form, "multi_agent"), do_rollouts=_bool(form, "do_rollouts"),
                  entrypoint=check_entrypoint(_text(form, "entrypoint")),
                  description=description)
