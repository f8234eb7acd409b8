"""The browser's session cookie and the CSRF token derived from it.

The cookie holds a random session secret (the database keeps its SHA-256, see
:mod:`app.auth.identity`) and the server's signature of it (:class:`SessionCookie`): a value the
server never issued is a new browser, so nobody can choose another browser's session for it
(session fixation: a cookie planted before the victim's first answer would otherwise become
the victim's guest session). A browser without one gets a new secret, set as a cookie only when a
page used it (a form needs its CSRF token); nothing is written to the database until the browser
stores something. The CSRF token of a form is an HMAC of the session secret, so it needs no
storage and changes whenever the session does (log in, log out).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth.identity import new_secret
from app.auth.visitors import forget_visitor
from app.auth.web_sessions import SESSION_LIFETIME

COOKIE_NAME = "infracards_session"
# Requests that change nothing: pages may show their browser's remembered visitor
# (app.auth.visitors); any other request forgets it.
READ_METHODS = frozenset({"GET", "HEAD"})
STATE_KEY = "browser_session"
_MAX_VALUE = 200
_MAC_HEX = 32  # 128 bits of HMAC-SHA256


@dataclass
class BrowserSession:
    """This request's session secret; ``replace`` or ``clear`` change the cookie sent back."""

    secret: str
    is_new: bool
    used: bool = False
    new_secret: str | None = field(default=None)
    cleared: bool = False

    def replace(self, secret: str) -> None:
        self.new_secret = secret
        self.used = True

    def clear(self) -> None:
        self.cleared = True


class SessionCookie:
    """The cookie value of a session secret: ``<secret>.<HMAC of it>``; only values this
    server signed (with its secret key) are read back."""

    def __init__(self, secret_key: str) -> None:
        self._key = hashlib.sha256(f"session:{secret_key}".encode()).digest()

    def _mac(self, secret: str) -> str:
        return hmac.new(self._key, secret.encode(), hashlib.sha256).hexdigest()[:_MAC_HEX]

    def value(self, secret: str) -> str:
        return f"{secret}.{self._mac(secret)}"

    def secret(self, value: str | None) -> str | None:
        """The secret of a cookie value this server issued; None for anything else."""
        if not value or len(value) > _MAX_VALUE or not value.isascii():
            return None
        secret, dot, mac = value.rpartition(".")
        if not dot or len(secret) < 20 or not hmac.compare_digest(mac, self._mac(secret)):
            return None
        return secret


class CsrfSigner:
    def __init__(self, secret_key: str) -> None:
        self._key = hashlib.sha256(f"csrf:{secret_key}".encode()).digest()

    def token(self, session_secret: str) -> str:
        return hmac.new(self._key, session_secret.encode(), hashlib.sha256).hexdigest()

    def check(self, session: BrowserSession, submitted: str | None) -> bool:
        if session.is_new or not submitted:
            return False
        return hmac.compare_digest(submitted.encode(), self.token(session.secret).encode())


# Paths that never use the browser session: the JSON API takes bearer tokens only (a cookie is
# not a credential there), and static files, health, metrics and the OpenAPI document need none.
SESSIONLESS_PREFIXES = (
    "/api/",
    "/static/",
    "/docs-assets/",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
)


class BrowserSessionMiddleware:
    """Puts the browser session on ``request.state``; sets or clears the cookie as needed (on
    pages only: see ``SESSIONLESS_PREFIXES``)."""

    def __init__(self, app: ASGIApp, *, secure: bool, cookie: SessionCookie) -> None:
        self.app = app
        self.secure = secure
        self.cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(SESSIONLESS_PREFIXES):
            await self.app(scope, receive, send)
            return
        secret = self.cookie.secret(HTTPConnection(scope).cookies.get(COOKIE_NAME))
        if secret is not None:
            browser = BrowserSession(secret=secret, is_new=False)
        else:
            browser = BrowserSession(secret=new_secret(), is_new=True)
        scope.setdefault("state", {})[STATE_KEY] = browser
        writes = scope["method"] not in READ_METHODS

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                if writes and not browser.is_new:
                    # What it changed is committed: its next page reads its session afresh.
                    forget_visitor(browser.secret)
                headers = MutableHeaders(scope=message)
                if browser.cleared:
                    headers.append("set-cookie", self._cookie("", max_age=0))
                elif browser.new_secret is not None:
                    headers.append(
                        "set-cookie", self._cookie(self.cookie.value(browser.new_secret))
                    )
                elif browser.is_new and browser.used:
                    headers.append("set-cookie", self._cookie(self.cookie.value(browser.secret)))
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _cookie(self, value: str, *, max_age: int | None = None) -> str:
        age = int(SESSION_LIFETIME.total_seconds()) if max_age is None else max_age
        parts = [f"{COOKIE_NAME}={value}", "Path=/", f"Max-Age={age}", "HttpOnly", "SameSite=Lax"]
        if self.secure:
            parts.append("Secure")
        return "; ".join(parts)
