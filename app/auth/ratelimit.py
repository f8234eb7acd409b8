"""Login rate limits per account and per client address (``limits``, moving windows).

The storage is in-process memory by default; a deployment with several server processes sets
``REDIS_URL`` (or ``RATE_LIMIT_STORAGE``) to Redis (``redis://127.0.0.1:6379/0``) so that the
limits are shared: five wrong passwords are five whichever process answered them. Redis needs
the ``redis`` package. When Redis cannot be reached, attempts are counted in this process's
memory until it answers again (logged): the limits stay on, per process, rather than failing
every login.
"""

from __future__ import annotations

import logging
import math
import time

from limits import RateLimitItem, RateLimitItemPerMinute, storage, strategies

log = logging.getLogger(__name__)

PER_ACCOUNT = RateLimitItemPerMinute(5)
PER_ADDRESS = RateLimitItemPerMinute(30)
# How long to count in memory after the shared storage failed, before trying it again.
FALLBACK_FOR_S = 5.0


class LoginLimiter:
    def __init__(self, storage_uri: str = "memory://") -> None:
        self.storage_uri = storage_uri
        self.shared = not storage_uri.startswith("memory://")
        self._memory = strategies.MovingWindowRateLimiter(storage.MemoryStorage())
        self._limiter = (
            strategies.MovingWindowRateLimiter(
                storage.storage_from_string(storage_uri, **_timeouts(storage_uri))
            )
            if self.shared
            else self._memory
        )
        self._fallback_until = 0.0

    def hit(self, *, email: str, address: str) -> int | None:
        """Count one login attempt; the seconds to wait when over a limit, else None."""
        limiter = self._current()
        try:
            return self._hit(limiter, email, address)
        except Exception as exc:  # noqa: BLE001 - redis errors: count here for a while
            if limiter is self._memory:
                raise
            log.warning(
                "login limits: %s unreachable (%s); counting in this process for %.0f s",
                _safe(self.storage_uri),
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                FALLBACK_FOR_S,
            )
            self._fallback_until = time.monotonic() + FALLBACK_FOR_S
            return self._hit(self._memory, email, address)

    def _current(self) -> strategies.MovingWindowRateLimiter:
        if self._limiter is not self._memory and time.monotonic() < self._fallback_until:
            return self._memory
        return self._limiter

    def _hit(
        self, limiter: strategies.MovingWindowRateLimiter, email: str, address: str
    ) -> int | None:
        waits = []
        for item, key in ((PER_ACCOUNT, f"account:{email}"), (PER_ADDRESS, f"address:{address}")):
            if not limiter.hit(item, "login", key):
                waits.append(self._retry_after(limiter, item, key))
        return max(waits) if waits else None

    @staticmethod
    def _retry_after(
        limiter: strategies.MovingWindowRateLimiter, item: RateLimitItem, key: str
    ) -> int:
        stats = limiter.get_window_stats(item, "login", key)
        return max(1, math.ceil(stats.reset_time - time.time()))


def _timeouts(uri: str) -> dict[str, float]:
    """Redis answers in milliseconds: a second without one means it is down (no hanging login)."""
    if uri.startswith(("redis://", "rediss://")):
        return {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}
    return {}


def _safe(uri: str) -> str:
    """The storage URI without a password."""
    scheme, sep, rest = uri.partition("://")
    if "@" in rest:
        rest = "***@" + rest.split("@", 1)[1]
    return f"{scheme}{sep}{rest}"
