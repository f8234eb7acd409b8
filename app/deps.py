"""Request dependencies as ``Annotated`` aliases: the session, the cards, the learner, the language."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import Depends, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.config import Settings
from app.domain.cards import Card
from app.services.errors import Unauthorized
from app.services.learners import GUEST, LearnerRef, learner_for_token
from app.services.questions import QuestionSigner
from app.web.session import STATE_KEY, GuestSession


def get_session(request: Request) -> Iterator[Session]:
    with request.app.state.sessionmaker() as session:
        yield session


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_cards(request: Request) -> dict[str, Card]:
    cards: dict[str, Card] = request.app.state.cards
    return cards


def get_signer(request: Request) -> QuestionSigner:
    signer: QuestionSigner = request.app.state.signer
    return signer


def get_guest_session(request: Request) -> GuestSession:
    """The cookie session (created by GuestSessionMiddleware); marks it as used so it is set."""
    session: GuestSession = getattr(request.state, STATE_KEY)
    session.used = True
    return session


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
CardsDep = Annotated[dict[str, Card], Depends(get_cards)]
SignerDep = Annotated[QuestionSigner, Depends(get_signer)]
GuestSessionDep = Annotated[GuestSession, Depends(get_guest_session)]

Lang = Literal["en", "zh"]
LangQuery = Annotated[Lang, Query(description="Language of the texts: en (default) or zh.")]

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="LearnerToken",
    description=(
        "Opaque learner token from `POST /api/v1/learners`, sent as "
        "`Authorization: Bearer <token>` (stored hashed on the server; revoke it with "
        "`DELETE /api/v1/me/token`). Without an Authorization header, requests act as the "
        "guest learner of the web session cookie (the same one the web pages use)."
    ),
)


def get_api_learner(
    request: Request,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
) -> LearnerRef:
    """The learner of a bearer token, or else the cookie's guest learner."""
    if credentials is not None:
        learner = learner_for_token(session=session, token=credentials.credentials)
        if learner is None:
            raise Unauthorized("unknown or revoked learner token")
        return learner
    if request.headers.get("authorization"):
        raise Unauthorized("the Authorization header must be 'Bearer <token>'")
    return LearnerRef(id=get_guest_session(request).learner_id, kind=GUEST)


def get_bearer_token(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
) -> str:
    if credentials is None:
        raise Unauthorized("this needs 'Authorization: Bearer <token>'")
    return credentials.credentials


def get_web_learner(guest: GuestSessionDep) -> LearnerRef:
    return LearnerRef(id=guest.learner_id, kind=GUEST)


ApiLearner = Annotated[LearnerRef, Depends(get_api_learner)]
BearerToken = Annotated[str, Depends(get_bearer_token)]
WebLearner = Annotated[LearnerRef, Depends(get_web_learner)]
