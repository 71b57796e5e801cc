"""Fixtures for the Arena client tests: an isolated HOME and a scripted HTTP server."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agilerl.arena import config
from agilerl.arena.client import ArenaClient
from agilerl.arena.retry import RetryPolicy

BASE = "http://arena.test"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every test gets its own HOME and no Arena settings from the outside."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("ARENA_API_KEY", "ARENA_BASE_URL", "ARENA_KEYCLOAK_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ARENA_BASE_URL", BASE)
    monkeypatch.setattr(config, "_overrides", {})
    return home


def make_jwt(exp: float, sub: str = "user") -> str:
    """An unsigned JWT with the given expiry (the client never checks signatures)."""

    def part(obj: dict[str, Any]) -> str:
        raw = base64.urlsafe_b64encode(json.dumps(obj).encode()).decode()
        return raw.rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'exp': int(exp), 'sub': sub})}.sig"


def fresh_jwt(sub: str = "user") -> str:
    return make_jwt(time.time() + 3600, sub)


def ok(data: Any, status: int = 200, **kw: Any) -> httpx.Response:
    return httpx.Response(status, json={"ok": True, "data": data}, **kw)


def fail(status: int, message: str, **extras: Any) -> httpx.Response:
    return httpx.Response(status, json={"ok": False, "error": message, **extras})


def ndjson(*events: dict[str, Any], status: int = 200) -> httpx.Response:
    body = "".join(json.dumps(e) + "\n" for e in events)
    return httpx.Response(status, content=body, headers={"content-type": "application/x-ndjson"})


class Recorder:
    """A scripted server: routes map (method, path) to a handler or a queue of answers."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.routes: dict[tuple[str, str], Any] = {}

    def add(self, method: str, path: str, *answers: Any) -> None:
        self.routes[(method, path)] = list(answers)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        key = (request.method, request.url.path)
        if key not in self.routes:
            return fail(404, f"no route {key}")
        answers = self.routes[key]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer

    def last(self, path: str | None = None) -> httpx.Request:
        matching = [r for r in self.requests if path is None or r.url.path == path]
        return matching[-1]


@pytest.fixture
def server() -> Recorder:
    return Recorder()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_client(server: Recorder, sleeps: list[float]) -> Iterator[Callable[..., ArenaClient]]:
    made: list[ArenaClient] = []

    def build(api_key: str | None = "arena_pat_test_secret", **kw: Any) -> ArenaClient:
        kw.setdefault("retry", RetryPolicy(retries=3, base=0.5, cap=8.0))
        client = ArenaClient(
            api_key=api_key,
            transport=httpx.MockTransport(server),
            sleep=sleeps.append,
            verbose=False,
            **kw,
        )
        made.append(client)
        return client

    yield build
    for client in made:
        client.close()
