"""Where the Arena client finds its server, its auth server and its files.

The base URL comes from ``ARENA_BASE_URL`` (which wins over anything set in code or
on the command line), else :func:`configure`, else the hosted service. The auth
(Keycloak-style) server comes from ``ARENA_KEYCLOAK_URL``, else :func:`configure`;
when neither is set and the API base URL is not the hosted one, the API server itself
is the auth server, which is what a self-hosted ``arena-server`` expects.

Files live in ``~/.arena/`` (``HOME`` is honoured): ``credentials.json`` (mode 0600,
folder 0700) and ``config.json`` (the default project).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agilerl.arena.errors import ArenaConfigError

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_CLIENT_ID",
    "DEFAULT_KEYCLOAK_URL",
    "DEFAULT_REALM",
    "ArenaSettings",
    "arena_dir",
    "configure",
    "credentials_path",
    "read_default_project",
    "settings",
    "write_default_project",
    "write_private_json",
]

DEFAULT_BASE_URL = "https://arena.agilerl.com"
DEFAULT_KEYCLOAK_URL = "https://auth.arena.agilerl.com"
DEFAULT_REALM = "arena"
DEFAULT_CLIENT_ID = "arena-cli"


@dataclass(frozen=True)
class ArenaSettings:
    """Resolved connection settings."""

    base_url: str
    keycloak_url: str
    realm: str
    client_id: str


# Process-wide overrides set by configure(); environment variables still win.
_overrides: dict[str, str] = {}


def configure(
    *,
    base_url: str | None = None,
    keycloak_url: str | None = None,
    realm: str | None = None,
    client_id: str | None = None,
) -> None:
    """Set process-wide defaults (``ARENA_BASE_URL``/``ARENA_KEYCLOAK_URL`` still win)."""
    for key, value in (
        ("base_url", base_url),
        ("keycloak_url", keycloak_url),
        ("realm", realm),
        ("client_id", client_id),
    ):
        if value:
            _overrides[key] = value


def settings(base_url: str | None = None) -> ArenaSettings:
    """The connection settings in force now (an explicit *base_url* wins over everything)."""
    base = (
        base_url
        or os.environ.get("ARENA_BASE_URL")
        or _overrides.get("base_url")
        or DEFAULT_BASE_URL
    )
    base = _check_url(base.rstrip("/"), "ARENA_BASE_URL")
    keycloak = os.environ.get("ARENA_KEYCLOAK_URL") or _overrides.get("keycloak_url")
    if not keycloak:
        keycloak = DEFAULT_KEYCLOAK_URL if base == DEFAULT_BASE_URL else base
    keycloak = _check_url(keycloak.rstrip("/"), "ARENA_KEYCLOAK_URL")
    return ArenaSettings(
        base_url=base,
        keycloak_url=keycloak,
        realm=_overrides.get("realm", DEFAULT_REALM),
        client_id=_overrides.get("client_id", DEFAULT_CLIENT_ID),
    )


def _check_url(url: str, name: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ArenaConfigError(
            f"{name} must start with http:// or https://, got {url!r}.",
            cli_hint="Pass a full URL, e.g. --base-url http://127.0.0.1:8000",
        )
    return url


def arena_dir() -> Path:
    """The client's folder, ``~/.arena`` (read at call time so ``HOME`` changes apply)."""
    return Path.home() / ".arena"


def credentials_path() -> Path:
    """The stored-credentials file."""
    return arena_dir() / "credentials.json"


def _config_path() -> Path:
    return arena_dir() / "config.json"


def _ensure_private_dir(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask, and an existing folder keeps its mode.
    os.chmod(folder, 0o700)


def write_private_json(path: Path, payload: Mapping[str, JsonValue]) -> None:
    """Write *payload* to *path* readable by the owner only, replacing it atomically.

    The temporary file is created with ``O_CREAT | O_EXCL`` and mode 0600 and then
    ``fchmod``-ed, so the data is never readable by anyone else, whatever the umask,
    even for an instant; ``os.replace`` makes the switch atomic.
    """
    _ensure_private_dir(path.parent)
    data = (json.dumps(payload, indent=2) + "\n").encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json_object(path: Path) -> JsonObject | None:
    """Read a JSON object from *path*; ``None`` when missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def read_default_project() -> str | None:
    """The default project from ``~/.arena/config.json``, if one is set."""
    config = read_json_object(_config_path()) or {}
    value = config.get("default_project")
    return value if isinstance(value, str) and value.strip() else None


def write_default_project(name: str) -> None:
    """Remember *name* as the default project (other config keys are kept)."""
    name = name.strip()
    if not name:
        raise ArenaConfigError("A project name cannot be empty.")
    config = read_json_object(_config_path()) or {}
    config["default_project"] = name
    write_private_json(_config_path(), config)
