"""Environment catalogue and validation requests (part of :class:`ArenaClient`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from agilerl.arena.stream import Event
from agilerl.arena.transport import API_PREFIX as _API
from agilerl.arena.transport import RequestOptions, Transport
from agilerl.arena.upload import FilePart, discover_sidecars, file_part, pack_source

if TYPE_CHECKING:
    from typing import Unpack

    from agilerl.core.value_types import JsonObject, JsonValue

__all__ = ["EnvironmentRequests"]


class _StreamResult(Protocol):
    """``ArenaClient._stream_result``: send, read the event stream, return its result."""

    def __call__(self, method: str, path: str, **kwargs: Unpack[RequestOptions]) -> JsonObject: ...


class EnvironmentRequests:
    """The ``/api/cli/v1/environments`` endpoints; mixed into ``ArenaClient``."""

    _transport: Transport
    _stream_result: _StreamResult
    _handler: Callable[[Event], None] | None

    def list_environments(self, name: str | None = None, include_arena: bool = False) -> JsonObject:
        """Registered environments: ``{name: {version: {"validated", "profiled"}}}``."""
        params = {"name": name, "include_arena": include_arena}
        answer = self._transport.request("GET", f"{_API}/environments", params=params)
        return dict(cast("JsonObject", answer))  # the server's JSON object

    def environment_exists(self, name: str, version: str | None = None) -> bool:
        """True when the environment (version; default latest) is registered."""
        params = {"name": name, "version": version}
        answer = self._transport.request("GET", f"{_API}/environments/exists", params=params)
        return bool(answer.get("exists", False)) if isinstance(answer, dict) else False

    def list_environment_entrypoints(self, name: str, version: str | None = None) -> list[str]:
        """The ``module:Class`` entry points found in an environment's source."""
        params = {"name": name, "version": version}
        answer = self._transport.request("GET", f"{_API}/environments/entrypoints", params=params)
        return list(cast(list[str], answer))  # the server's JSON list of strings

    def validate_environment(
        self,
        name: str,
        version: str | None = None,
        source: str | os.PathLike[str] | bytes | None = None,
        env_config: str | os.PathLike[str] | None = None,
        requirements: str | os.PathLike[str] | None = None,
        entrypoint: str | None = None,
        description: str | None = None,
        multi_agent: bool = False,
        language_based: bool = False,
        do_rollouts: bool = False,
    ) -> JsonObject:
        """Validate a registered environment, or upload *source* and register + validate it.

        :raises ArenaValidationError: when a check fails (the message names it).
        """
        if source is None:
            body: JsonObject = {"name": name, "version": version, "do_rollouts": do_rollouts}
            if entrypoint:
                body["entrypoint"] = entrypoint
            return self._stream_result(
                "POST",
                f"{_API}/environments/validate",
                json=body,
                timeout=self._transport.upload_timeout,
            )
        req_path, cfg_path = discover_sidecars(source, requirements, env_config)
        data = {
            "name": name,
            "version": version or "v1",
            "multi_agent": str(multi_agent).lower(),
            "language_based": str(language_based).lower(),
            "do_rollouts": str(do_rollouts).lower(),
        }
        if entrypoint:
            data["entrypoint"] = entrypoint
        if description:
            data["description"] = description
        files = {
            "file": pack_source(source),
            "env_config": _config_part(cfg_path),
            "requirements": file_part(req_path, "requirements.txt", "text/plain")
            if req_path
            else ("requirements.txt", b"", "text/plain"),
        }
        try:
            return self._stream_result(
                "POST",
                f"{_API}/environments/create-and-validate",
                data=data,
                files=files,
                timeout=self._transport.upload_timeout,
            )
        finally:
            close_parts(files)

    def profile_environment(self, name: str, version: str | None = None) -> JsonObject:
        """Measure an environment's speed and footprint (server-side)."""
        return self._stream_result(
            "POST",
            f"{_API}/environments/profile",
            json={"name": name, "version": version},
            timeout=self._transport.upload_timeout,
        )

    def delete_environment(self, name: str, version: str | None = None) -> JsonValue:
        """Delete one version of an environment (``version=None``: every version)."""
        body = {"name": name, "version": version}
        return self._transport.request("DELETE", f"{_API}/environments/delete", json=body)

    def duplicate_environment_version(
        self, name: str, new_version: str, version: str | None = None
    ) -> JsonValue:
        """Copy an environment version (default latest) under a new version name."""
        body = {"name": name, "new_version_name": new_version, "version": version}
        return self._transport.request("POST", f"{_API}/environments/duplicate", json=body)


def _config_part(path: Path | None) -> FilePart:
    if path is None:
        return ("env_config.yaml", b"", "application/x-yaml")
    kind = "application/json" if path.suffix.lower() == ".json" else "application/x-yaml"
    return file_part(path, path.name, kind)


def close_parts(files: Mapping[str, FilePart] | None) -> None:
    """Close the file handles of multipart parts."""
    for part in (files or {}).values():
        handle = part[1] if isinstance(part, tuple) else None
        if handle is not None and hasattr(handle, "close"):
            handle.close()
