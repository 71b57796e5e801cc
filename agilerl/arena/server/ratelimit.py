"""Per-client-address rate limiting for the routes that answer without authentication."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    """A token bucket per client address: ``burst`` requests at once, refilled at
    ``per_minute`` requests a minute.

    Memory stays bounded: at most ``max_clients`` addresses are tracked; when that many are,
    the buckets that have refilled completely (which carry no information) are dropped, and
    if every bucket is still draining the oldest one goes.
    """

    def __init__(self, per_minute: int, burst: int, *, max_clients: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.max_clients = max_clients
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, stamp)
        self._lock = threading.Lock()

    def allow(self, address: str) -> float:
        """Take one request from ``address``'s bucket: 0.0 when allowed, otherwise the
        seconds until the next request would be."""
        now = self._clock()
        with self._lock:
            tokens, stamp = self._buckets.pop(address, (self.burst, now))
            tokens = min(self.burst, tokens + (now - stamp) * self.rate)
            if tokens >= 1.0:
                self._remember(address, tokens - 1.0, now)
                return 0.0
            self._remember(address, tokens, now)
            return (1.0 - tokens) / self.rate if self.rate > 0 else float("inf")

    def _remember(self, address: str, tokens: float, now: float) -> None:
        if len(self._buckets) >= self.max_clients:
            full = [a for a, (t, s) in self._buckets.items()
                    if t + (now - s) * self.rate >= self.burst]
            for stale in full:
                del self._buckets[stale]
            if len(self._buckets) >= self.max_clients:  # dicts keep insertion order
                del self._buckets[next(iter(self._buckets))]
        self._buckets[address] = (tokens, now)
