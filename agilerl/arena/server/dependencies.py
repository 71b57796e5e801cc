"""What every route depends on: the app's :class:`Context`, the signed-in user, and the
success envelope (the routes import these, not the app that includes them)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar, TypeVarTuple, Unpack

from fastapi import Request
from fastapi.responses import JSONResponse

from agilerl.arena.server.auth import Authenticator, User
from agilerl.arena.server.catalog import Catalog
from agilerl.arena.server.config import ServerConfig
from agilerl.arena.server.ratelimit import RateLimiter
from agilerl.arena.server.scheduler import Scheduler
from agilerl.arena.server.store import Store

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


@dataclass
class Context:
    """What every route may use; one per app."""

    config: ServerConfig
    store: Store
    auth: Authenticator
    scheduler: Scheduler
    #: uploaded environments and datasets (:mod:`.catalog`).
    catalog: Catalog | None = None
    #: submissions run one at a time, first come first served: they serialise on the
    #: database anyway, and a single worker keeps tail latency flat under bursts.
    submitter: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="arena-submit"))
    #: device logins started per client address (the endpoint needs no credentials).
    device_limiter: RateLimiter = field(init=False)

    def __post_init__(self) -> None:
        self.device_limiter = RateLimiter(self.config.device_rate_per_minute,
                                          self.config.device_rate_burst)

    async def submit_call(self, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.submitter, fn, *args)


def ok(data: object, status: int = 200) -> JSONResponse:
    """The success envelope of spec §9.1."""
    return JSONResponse({"ok": True, "data": data}, status_code=status)


def context(request: Request) -> Context:
    ctx: Context = request.app.state.ctx
    return ctx


async def current_user(request: Request) -> User:
    """Dependency guarding every ``/api`` route.

    Runs on the event loop (a hash and one indexed read, well under a millisecond): a hop
    through the thread pool would cost more than the check and queue unfairly under load.
    """
    return context(request).auth.authenticate(request.headers.get("authorization"))
