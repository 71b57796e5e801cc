"""``ArenaClient``: the Python API of an Arena training service (hosted or self-hosted).

>>> from agilerl.arena import ArenaClient
>>> client = ArenaClient()                       # ARENA_API_KEY or stored login
>>> ack = client.submit_experiment("dqn.yaml", project="demo")
>>> for event in client.stream_experiment_logs(ack["experiment_name"], follow=True):
...     print(event.text)

The server address comes from ``ARENA_BASE_URL`` (default: the hosted service).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import httpx

from agilerl.arena import config
from agilerl.arena.auth import Authenticator
from agilerl.arena.datasets import DatasetRequests
from agilerl.arena.download import check_new_file, target_path, write_new_file
from agilerl.arena.environments import EnvironmentRequests, close_parts
from agilerl.arena.errors import ArenaAPIError, ArenaConfigError, ArenaError
from agilerl.arena.payload import manifest_payload
from agilerl.arena.retry import RetryPolicy
from agilerl.arena.stream import (
    Event,
    LogEvent,
    NDJsonStream,
    StatusEvent,
    StreamInterrupted,
)
from agilerl.arena.transport import API_PREFIX as _API
from agilerl.arena.transport import IDEMPOTENCY_HEADER, RequestOptions, Transport
from agilerl.arena.upload import file_part

if TYPE_CHECKING:
    from typing import Unpack

    from agilerl.core.value_types import JsonObject, JsonScalar, JsonValue

__all__ = ["TERMINAL_STATES", "ArenaClient"]

logger = logging.getLogger("agilerl.arena.client")

TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "STOPPED"})
_SUBMIT = f"{_API}/experiments/jobs/submit"


def _log_event(event: Event) -> None:
    if isinstance(event, StatusEvent):
        level = logging.WARNING if event.kind == "warning" else logging.INFO
        logger.log(level, "[%s] %s", event.stage or event.status, event.message)


class ArenaClient(EnvironmentRequests, DatasetRequests):
    """A session with an Arena server.

    :param api_key: A personal access token or access token (else ``ARENA_API_KEY``,
        else the stored login).
    :param request_timeout: Seconds allowed for an ordinary request.
    :param upload_timeout: Seconds allowed for uploads and submissions.
    :param verbose: Log the progress events of streamed requests.
    :param base_url: Server address; wins over ``ARENA_BASE_URL`` when given here.
    :param transport: An httpx transport (tests and custom networking).
    :param retry: Retry policy for requests that are safe to repeat.
    """

    BASE_URL = config.DEFAULT_BASE_URL

    def __init__(
        self,
        api_key: str | None = None,
        request_timeout: float = 30.0,
        upload_timeout: float = 300.0,
        *,
        verbose: bool = True,
        base_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if request_timeout <= 0 or upload_timeout <= 0:
            raise ArenaConfigError("Timeouts must be positive numbers of seconds.")
        found = config.settings(base_url)
        self.settings = found
        self._auth = Authenticator(found, api_key, transport=transport, timeout=request_timeout)
        self._transport = Transport(
            found.base_url,
            self._auth,
            request_timeout=request_timeout,
            upload_timeout=upload_timeout,
            transport=transport,
            retry=retry,
            sleep=sleep,
        )
        self._http_transport = transport
        self._sleep = sleep
        self._handler: Callable[[Event], None] | None = _log_event if verbose else None
        self._auth.ensure_fresh()

    # -- lifecycle and settings ------------------------------------------------------
    @classmethod
    def configure(
        cls,
        base_url: str | None = None,
        keycloak_url: str | None = None,
        realm: str | None = None,
        client_id: str | None = None,
    ) -> type[ArenaClient]:
        """Set process-wide defaults (environment variables still win); returns the class."""
        config.configure(
            base_url=base_url, keycloak_url=keycloak_url, realm=realm, client_id=client_id
        )
        return cls

    def __enter__(self) -> ArenaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool."""
        self._transport.close()

    def __repr__(self) -> str:
        state = "authenticated" if self.is_authenticated else "unauthenticated"
        return f"ArenaClient(base_url={self.base_url!r}, {state})"

    @property
    def base_url(self) -> str:
        """The API server address in use."""
        return self.settings.base_url

    @property
    def is_authenticated(self) -> bool:
        """True when an API key or a login token is held (not checked with the server)."""
        return self._auth.is_authenticated

    @property
    def credential_source(self) -> str:
        """Where the credential in use came from: argument, environment, stored or none."""
        return self._auth.source if self.is_authenticated else "none"

    def set_stream_handler(self, handler: Callable[[Event], None] | None) -> None:
        """Call *handler* with every event of streamed requests (``None``: silent)."""
        self._handler = handler

    # -- auth ------------------------------------------------------------------------
    def login(
        self,
        timeout: float = 300.0,
        force: bool = False,
        *,
        open_browser: bool = True,
        prompt: Callable[[str, str | None], None] | None = None,
    ) -> None:
        """Sign in with the device flow (reuses or refreshes a stored login first)."""
        self._auth.login(timeout, force=force, open_browser=open_browser, prompt=prompt)

    def store_api_key(self, api_key: str) -> JsonObject:
        """Check *api_key* with the server, then save it as this machine's credential."""
        probe = Authenticator(self.settings, api_key)
        checker = Transport(
            self.base_url,
            probe,
            request_timeout=self._transport.request_timeout,
            upload_timeout=self._transport.upload_timeout,
            transport=self._http_transport,
            retry=self._transport.retry,
            sleep=self._sleep,
        )
        try:
            profile = checker.request("GET", "/api/users/current")
        finally:
            checker.close()
        self._auth.store_api_key(api_key)
        return profile if isinstance(profile, dict) else {}

    def logout(self) -> None:
        """Revoke the stored login (best effort) and delete the credentials file."""
        self._auth.logout()

    # -- user, resources, projects -----------------------------------------------------
    def get_user_profile(self) -> JsonObject:
        """The signed-in user (``first_name``, ``last_name``, ``email``, ...)."""
        return dict(cast("JsonObject", self._transport.request("GET", "/api/users/current")))

    def get_credits(self) -> JsonValue:
        """The user's remaining credits."""
        return self._transport.request("GET", "/api/users/credits")

    def list_resources(self) -> JsonObject:
        """Compute tiers usable as ``resource_id`` when submitting."""
        return dict(cast("JsonObject", self._transport.request("GET", f"{_API}/resources/list")))

    def list_projects(self) -> list[JsonObject]:
        """The user's projects (``name``, ``type``, ``description``, ...)."""
        return list(cast("list[JsonObject]", self._transport.request("GET", f"{_API}/projects")))

    def create_project(
        self, name: str, description: str | None = None, llm_based: bool = False
    ) -> JsonValue:
        """Create a project."""
        body = {"name": name, "description": description, "llm_based": llm_based}
        return self._transport.request("POST", f"{_API}/projects/create", json=body)

    def delete_project(self, name: str) -> JsonValue:
        """Delete a project."""
        return self._transport.request("DELETE", f"{_API}/projects/delete", json={"name": name})

    @property
    def default_project(self) -> str | None:
        """The project used when none is given (``~/.arena/config.json``)."""
        return config.read_default_project()

    def set_default_project(self, name: str) -> None:
        """Remember *name* as the default project after checking that it exists."""
        if not any(p.get("name") == name for p in self.list_projects() if isinstance(p, dict)):
            raise ArenaConfigError(
                f"Project '{name}' does not exist.",
                cli_hint="List projects with 'arena projects list' or create one with "
                "'arena projects create NAME'.",
            )
        config.write_default_project(name)

    def _resolve_project(self, project: str | None) -> str | None:
        return project or config.read_default_project()

    # -- experiments --------------------------------------------------------------------
    def submit_experiment(
        self,
        manifest: str | os.PathLike[str] | Mapping[str, object],
        *,
        resource_id: str | int | None = None,
        num_nodes: int | None = None,
        project: str | None = None,
        experiment_name: str | None = None,
        reward_file: str | os.PathLike[str] | bytes | None = None,
        completion: str | None = None,
        idempotency_key: str | None = None,
    ) -> JsonObject:
        """Validate *manifest* locally, submit it, and return the server's acknowledgement.

        The request carries an ``Idempotency-Key`` (a fresh UUID unless given), so
        re-sending it after a lost connection never creates a second experiment.

        :returns: e.g. ``{"accepted": True, "experiment_id": 7, "experiment_name": ...}``.
        :raises ManifestError: when the manifest is invalid (nothing is sent).
        :raises ArenaTrainingError: when the server refuses the job.
        """
        payload = manifest_payload(manifest)
        # the job's log then cites this name, not the server's copy of the manifest
        file_name = Path(manifest).name if isinstance(manifest, (str, os.PathLike)) else None
        resolved_project = self._resolve_project(project)
        headers = {IDEMPOTENCY_HEADER: idempotency_key or str(uuid.uuid4())}
        kwargs: RequestOptions = {"headers": headers, "timeout": self._transport.upload_timeout}
        if reward_file is None:
            kwargs["json"] = {
                "manifest": payload,
                "resource_id": resource_id,
                "num_nodes": num_nodes,
                "project": resolved_project,
                "experiment_name": experiment_name,
                **({"manifest_file": file_name} if file_name else {}),
            }
        else:
            fields = {
                "manifest": json.dumps(payload),
                "project": resolved_project,
                "resource_id": None if resource_id is None else str(resource_id),
                "num_nodes": None if num_nodes is None else str(num_nodes),
                "experiment_name": experiment_name,
                "completion": completion,
                "manifest_file": file_name,
            }
            kwargs["data"] = {k: v for k, v in fields.items() if v is not None}
            kwargs["files"] = {"reward_file": file_part(reward_file, "reward.py", "text/x-python")}
        try:
            return self._submit_with_retries(kwargs)
        finally:
            close_parts(kwargs.get("files"))

    def _submit_with_retries(self, kwargs: RequestOptions) -> JsonObject:
        # The transport retries failures before the answer starts; a connection lost
        # while the answer streams is retried here (same key, so still one experiment).
        policy = self._transport.retry
        for attempt in range(policy.retries + 1):
            try:
                return self._stream_result("POST", _SUBMIT, **kwargs)
            except StreamInterrupted:
                if attempt >= policy.retries:
                    raise
                self._sleep(policy.delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def list_experiments(self, project: str | None = None) -> list[JsonObject]:
        """The experiments of *project* (default: the default project)."""
        resolved = self._resolve_project(project)
        if not resolved:
            raise ArenaConfigError(
                "No project specified.",
                sdk_hint="Pass project= or call ArenaClient().set_default_project(name).",
                cli_hint="Use --project or set a default with 'arena projects set-default NAME'.",
            )
        answer = self._transport.request(
            "GET", f"{_API}/experiments/list", params={"project": resolved}
        )
        return list(cast("list[JsonObject]", answer))  # the server's JSON list of rows

    def get_experiment_status(self, experiment_name: str, project: str | None = None) -> JsonObject:
        """One experiment's row: ``state``, ``steps``, ``error``, ``latest_checkpoint``, ..."""
        params = {"experiment_name": experiment_name}
        resolved = self._resolve_project(project)
        if resolved:
            params["project"] = resolved
        answer = self._transport.request("GET", f"{_API}/experiments/jobs/status", params=params)
        return dict(cast("JsonObject", answer))  # the server's JSON object

    def stream_experiment_logs(
        self, experiment_name: str, follow: bool = False, since: int | None = None
    ) -> NDJsonStream:
        """The experiment's log as a stream of events (``LogEvent.text`` is one line).

        With ``follow=True`` the stream stays open until the job ends; its last event
        carries the final ``state`` in ``detail``.
        """
        params: dict[str, JsonScalar] = {"experiment_name": experiment_name}
        if follow:
            params["follow"] = True
        if since is not None:
            params["since"] = since
        return self._transport.open_stream(
            "GET", f"{_API}/experiments/jobs/logs", None, params=params
        )

    def iter_log_lines(
        self, experiment_name: str, follow: bool = False, since: int | None = None
    ) -> Iterator[str]:
        """Just the text of each log line."""
        with self.stream_experiment_logs(experiment_name, follow, since) as stream:
            for event in stream:
                if isinstance(event, LogEvent):
                    yield event.text

    def wait_for_experiment(
        self,
        experiment_name: str,
        *,
        poll_interval: float = 2.0,
        timeout: float | None = None,
        project: str | None = None,
    ) -> JsonObject:
        """Poll the status until the job is COMPLETED, FAILED or STOPPED; return the row.

        :raises ArenaError: when *timeout* seconds pass first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = min(0.5, poll_interval)
        while True:
            row = self.get_experiment_status(experiment_name, project)
            if str(row.get("state", "")).upper() in TERMINAL_STATES:
                return row
            if deadline is not None and time.monotonic() + interval > deadline:
                raise ArenaError(
                    f"Experiment '{experiment_name}' is still {row.get('state')} after "
                    f"{timeout:g}s."
                )
            self._sleep(interval)
            interval = min(poll_interval, interval * 2)

    def stop_experiment(self, experiment_name: str) -> JsonValue:
        """Stop a queued or running experiment (it keeps its checkpoints)."""
        body = {"experiment_name": experiment_name.strip()}
        return self._transport.request("POST", f"{_API}/experiments/jobs/stop", json=body)

    def resume_experiment(self, experiment_name: str, max_steps: int) -> JsonValue:
        """Continue a finished or stopped experiment from its latest checkpoint."""
        body = {"experiment_name": experiment_name, "max_steps": int(max_steps)}
        return self._transport.request("POST", f"{_API}/experiments/jobs/resume", json=body)

    def list_checkpoints(self, experiment_name: str) -> list[JsonObject]:
        """The experiment's checkpoints (``name``, ``steps``, ``size_mb``, scores)."""
        params = {"experiment_name": experiment_name}
        answer = self._transport.request(
            "GET", f"{_API}/experiments/jobs/checkpoints", params=params
        )
        return list(cast("list[JsonObject]", answer))  # the server's JSON list of rows

    def download_checkpoint(
        self,
        experiment_name: str,
        checkpoint: str | None = None,
        output_path: str | os.PathLike[str] | None = None,
    ) -> Path:
        """Download a checkpoint (default: the best) to a new file and return its path.

        *output_path* may be a folder (the server's file name is used) or a file; an
        existing file is never overwritten.
        """
        params = {"experiment_name": experiment_name}
        if checkpoint:
            params["checkpoint"] = checkpoint
        response = self._transport.send(
            "GET",
            f"{_API}/experiments/jobs/checkpoints/download",
            params=params,
            stream=True,
            timeout=self._transport.upload_timeout,
        )
        with contextlib.closing(response):
            fallback = f"{experiment_name}_{checkpoint or 'best'}.ckpt"
            target = target_path(output_path, response.headers.get("content-disposition"), fallback)
            write_new_file(target, response.iter_bytes())
        return target

    def list_experiment_metric_names(
        self, experiment_name: str, *, project: str | None = None, details: bool = False
    ) -> JsonValue:
        """Metric column names recorded for the experiment."""
        params: dict[str, JsonScalar] = {"experiment_name": experiment_name}
        resolved = self._resolve_project(project)
        if resolved:
            params["project"] = resolved
        if details:
            params["details"] = True
        return self._transport.request("GET", f"{_API}/experiments/metrics", params=params)

    def preview_experiment_metrics_csv(
        self,
        experiment_name: str,
        *,
        preview_rows: int,
        metrics: Sequence[str] | None = None,
        project: str | None = None,
    ) -> tuple[bytes, str, str | None]:
        """Up to *preview_rows* rows of the metrics CSV: ``(body, content type, disposition)``."""
        params: list[tuple[str, JsonScalar]] = [
            ("experiment_name", experiment_name),
            ("preview_rows", preview_rows),
        ]
        resolved = self._resolve_project(project)
        if resolved:
            params.append(("project", resolved))
        params.extend(("metric", m) for m in metrics or ())
        return self._transport.request_raw("GET", f"{_API}/experiments/metrics", params=params)

    def download_experiment_metrics(
        self,
        experiment_name: str,
        output_path: str | os.PathLike[str] | None = None,
        metrics: list[str] | None = None,
    ) -> Path:
        """Save the metrics CSV (default ``<experiment>_metrics.csv``); never overwrites."""
        fallback = f"{experiment_name}_metrics.csv"
        if output_path is None or not Path(output_path).is_dir():
            check_new_file(target_path(output_path, None, fallback))
        body, content_type, disposition = self.preview_experiment_metrics_csv(
            experiment_name, preview_rows=50_000, metrics=metrics
        )
        if not content_type.startswith("text/csv"):
            raise ArenaAPIError.from_response_body(body[:500])
        target = target_path(output_path, disposition, fallback)
        write_new_file(target, iter([body]))
        return target

    # -- helpers ------------------------------------------------------------------------
    def _stream_result(
        self, method: str, path: str, **kwargs: Unpack[RequestOptions]
    ) -> JsonObject:
        with self._transport.open_stream(method, path, self._handler, **kwargs) as stream:
            return stream.collect()
