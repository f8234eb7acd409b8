"""The guest session: a signed cookie holding the learner id and the CSRF token.

There is no server-side session table: the cookie is signed with the secret key (itsdangerous),
so it cannot be forged, and the learner's row is written with their first attempt. The cookie is
HttpOnly and SameSite=Lax (Secure when ``COOKIE_SECURE`` is set); it is only set on responses
that used the session, so static files and the API docs do not hand out learners.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field

from itsdangerous import BadData, URLSafeSerializer
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.services.learners import new_learner_id

COOKIE_NAME = "infracards_session"
COOKIE_MAX_AGE_S = 400 * 24 * 3600  # the longest browsers keep a cookie
STATE_KEY = "guest_session"
_SALT = "infracards.session.v1"


@dataclass
class GuestSession:
    learner_id: str
    csrf_token: str
    is_new: bool
    used: bool = field(default=False)

    def check_csrf(self, submitted: str | None) -> bool:
        """Whether a form's CSRF token matches this session's (constant-time)."""
        if self.is_new or not submitted:
            return False
        return hmac.compare_digest(submitted.encode(), self.csrf_token.encode())


class GuestSessionCodec:
    def __init__(self, secret_key: str) -> None:
        self._serializer = URLSafeSerializer(secret_key, salt=_SALT)

    def encode(self, session: GuestSession) -> str:
        return str(self._serializer.dumps({"l": session.learner_id, "c": session.csrf_token}))

    def decode(self, value: str | None) -> GuestSession:
        """The session in a cookie value, or a fresh one when absent, tampered or malformed."""
        if value:
            try:
                data = self._serializer.loads(value)
            except BadData:
                data = None
            if (
                isinstance(data, dict)
                and isinstance(data.get("l"), str)
                and isinstance(data.get("c"), str)
                and len(data["l"]) == 32
            ):
                return GuestSession(learner_id=data["l"], csrf_token=data["c"], is_new=False)
        return GuestSession(
            learner_id=new_learner_id(), csrf_token=secrets.token_urlsafe(32), is_new=True
        )


class GuestSessionMiddleware:
    """Puts the guest session on ``request.state``; sets the cookie when a new one was used."""

    def __init__(self, app: ASGIApp, *, codec: GuestSessionCodec, secure: bool) -> None:
        self.app = app
        self.codec = codec
        self.secure = secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = self.codec.decode(HTTPConnection(scope).cookies.get(COOKIE_NAME))
        scope.setdefault("state", {})[STATE_KEY] = session

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and session.is_new and session.used:
                headers = MutableHeaders(scope=message)
                headers.append("set-cookie", self._cookie(session))
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _cookie(self, session: GuestSession) -> str:
        parts = [
            f"{COOKIE_NAME}={self.codec.encode(session)}",
            "Path=/",
            f"Max-Age={COOKIE_MAX_AGE_S}",
            "HttpOnly",
            "SameSite=Lax",
        ]
        if self.secure:
            parts.append("Secure")
        return "; ".join(parts)
