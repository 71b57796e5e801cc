"""When and how long to wait before re-sending a request that failed in transit.

Only requests that are safe to repeat are retried: GET, PUT and DELETE, and a submit
carrying an ``Idempotency-Key`` (the server answers a repeated key with the job the
first attempt created). Delays follow exponential backoff with full jitter: attempt
``n`` waits a uniformly random time in ``[0, min(cap, base * 2**n))``, which spreads
out clients that failed together.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import httpx

__all__ = ["IDEMPOTENT_METHODS", "RETRY_STATUSES", "RetryPolicy"]

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({500, 502, 503, 504})


@dataclass
class RetryPolicy:
    """Retry settings.

    :param retries: Re-sends after the first try (0 disables retrying).
    :param base: Backoff base in seconds.
    :param cap: Longest single wait in seconds.
    """

    retries: int = 3
    base: float = 0.5
    cap: float = 8.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def should_retry_status(self, status_code: int) -> bool:
        """True for the server errors worth another try (500, 502, 503, 504)."""
        return status_code in RETRY_STATUSES

    def should_retry_error(self, exc: Exception) -> bool:
        """True for transport failures (refused connection, reset, timeout)."""
        return isinstance(exc, httpx.TransportError)

    def delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        """Seconds to wait before re-send number ``attempt + 1`` (0-based *attempt*)."""
        ceiling = min(self.cap, self.base * (2**attempt))
        wait = self.rng.uniform(0.0, ceiling)
        retry_after = _retry_after(response)
        return max(wait, min(retry_after, self.cap)) if retry_after is not None else wait


def _retry_after(response: httpx.Response | None) -> float | None:
    if response is None:
        return None
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
