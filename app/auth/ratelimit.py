"""Login rate limits per account and per client address (``limits``, moving windows).

The storage is in-process memory by default; a deployment with several server processes points
``RATE_LIMIT_STORAGE`` at Redis (``redis://127.0.0.1:6379``) so the limits are shared.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, RateLimitItemPerMinute, storage, strategies

PER_ACCOUNT = RateLimitItemPerMinute(5)
PER_ADDRESS = RateLimitItemPerMinute(30)


class LoginLimiter:
    def __init__(self, storage_uri: str = "memory://") -> None:
        self._limiter = strategies.MovingWindowRateLimiter(storage.storage_from_string(storage_uri))

    def hit(self, *, email: str, address: str) -> int | None:
        """Count one login attempt; the seconds to wait when over a limit, else None."""
        waits = []
        for item, key in ((PER_ACCOUNT, f"account:{email}"), (PER_ADDRESS, f"address:{address}")):
            if not self._limiter.hit(item, "login", key):
                waits.append(self._retry_after(item, key))
        return max(waits) if waits else None

    def _retry_after(self, item: RateLimitItem, key: str) -> int:
        stats = self._limiter.get_window_stats(item, "login", key)
        return max(1, math.ceil(stats.reset_time - time.time()))
