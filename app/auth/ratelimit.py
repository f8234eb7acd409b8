"""Rate limits on wrong passwords and password reset requests (``limits``, moving windows).

The storage is in-process memory by default; a deployment with several server processes sets
``REDIS_URL`` (or ``RATE_LIMIT_STORAGE``) to Redis (``redis://127.0.0.1:6379/0``) so that the
limits are shared: ten wrong passwords are ten whichever process answered them. Redis needs
the ``redis`` package. When Redis cannot be reached, attempts are counted in this process's
memory until it answers again (logged): the limits stay on, per process, rather than failing
every login.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TypeVar

from limits import (
    RateLimitItem,
    RateLimitItemPerHour,
    RateLimitItemPerMinute,
    storage,
    strategies,
)

log = logging.getLogger(__name__)

# Wrong passwords are counted, not logins: a learner who mistypes a few times is not locked out,
# and a right password clears the failures of its (account, address) pair. Guessing stays
# throttled: per pair, per account across addresses, per address across accounts.
PER_PAIR = RateLimitItemPerMinute(10, 10)  # 10 wrong passwords per 10 minutes
PER_ACCOUNT = RateLimitItemPerMinute(20, 10)  # from every address together
PER_ADDRESS = RateLimitItemPerMinute(30)  # for every account together
# Password reset emails: per address asked for, and per client address.
RESETS_PER_EMAIL = RateLimitItemPerHour(3)
RESETS_PER_ADDRESS = RateLimitItemPerHour(10)
# Emails to an account's owner that someone tried to sign up with its address.
SIGNUP_NOTICES_PER_EMAIL = RateLimitItemPerHour(3)
# How long to count in memory after the shared storage failed, before trying it again.
FALLBACK_FOR_S = 5.0

Limiter = strategies.MovingWindowRateLimiter
Result = TypeVar("Result")


class LoginLimiter:
    """Counts wrong passwords and reset requests (moving windows), in memory or shared storage."""

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

    def check(self, *, email: str, address: str) -> int | None:
        """The seconds to wait before trying a password for ``email`` from ``address``, or None."""
        return self._run(lambda limiter: _waits(limiter, _login_keys(email, address), count=False))

    def failed(self, *, email: str, address: str) -> None:
        """Count one wrong password (or unknown email)."""
        self._run(lambda limiter: _waits(limiter, _login_keys(email, address), count=True))

    def succeeded(self, *, email: str, address: str) -> None:
        """A right password: the pair's failures are forgotten (the others' stay counted)."""
        self._run(lambda limiter: limiter.clear(PER_PAIR, "login", f"pair:{email}|{address}"))

    def reset_requested(self, *, email: str, address: str) -> int | None:
        """Count one password reset request; the seconds to wait when over a limit, else None."""
        keys = ((RESETS_PER_EMAIL, f"email:{email}"), (RESETS_PER_ADDRESS, f"address:{address}"))
        return self._run(lambda limiter: _waits(limiter, keys, count=True, namespace="reset"))

    def signup_notice(self, *, email: str) -> bool:
        """Count one sign-up with ``email``; whether its owner may still be emailed about it (a
        few times an hour: nobody can fill an inbox by signing up with its address)."""
        keys = ((SIGNUP_NOTICES_PER_EMAIL, f"email:{email}"),)
        return (
            self._run(lambda limiter: _waits(limiter, keys, count=True, namespace="signup")) is None
        )

    def _run(self, work: Callable[[Limiter], Result]) -> Result:
        limiter = self._current()
        try:
            return work(limiter)
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
            return work(self._memory)

    def _current(self) -> Limiter:
        if self._limiter is not self._memory and time.monotonic() < self._fallback_until:
            return self._memory
        return self._limiter


def _login_keys(email: str, address: str) -> tuple[tuple[RateLimitItem, str], ...]:
    return (
        (PER_PAIR, f"pair:{email}|{address}"),
        (PER_ACCOUNT, f"account:{email}"),
        (PER_ADDRESS, f"address:{address}"),
    )


def _waits(
    limiter: Limiter,
    keys: tuple[tuple[RateLimitItem, str], ...],
    *,
    count: bool,
    namespace: str = "login",
) -> int | None:
    """Count a hit on every key (``count``) or only test them; the longest wait when one is full."""
    waits = []
    for item, key in keys:
        allowed = limiter.hit(item, namespace, key) if count else limiter.test(item, namespace, key)
        if not allowed:
            stats = limiter.get_window_stats(item, namespace, key)
            waits.append(max(1, math.ceil(stats.reset_time - time.time())))
    return max(waits) if waits else None


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
