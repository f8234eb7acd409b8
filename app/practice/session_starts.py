"""Starting a practice session once, however often the start is sent.

An app that loses the response to its start (a train's tunnel, a killed app) sends it again. It
names each start with an id of its own (``client_session_id``, a UUID): the first request with
that id starts the session, any later one gets that same session back, however far it has got,
and starts nothing. Two requests with one id arriving together start one session (the id is
unique in the table; the one that loses the race reads the winner's). An id sent again with
another card, mode or typed setting, or one another learner used, is refused (409
``session_id_reused``): it names another start. A page's start forms work the same way
(:func:`start_session_from_page`), so that a double click starts one session.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.auth.service import now_utc
from app.domain.messages import Message
from app.models import PracticeSession
from app.practice.sessions import load_session, start_session
from app.problems import Conflict


@dataclass(frozen=True)
class Started:
    row: PracticeSession
    created: bool  # False: the start was sent again; ``row`` is the session the first one started


def session_id_reused() -> Conflict:
    return Conflict(
        Message(
            "This client_session_id was already used to start another session: send a new one "
            "for each session you start."
        ),
        code="session_id_reused",
    )


def start_session_once(
    *,
    db: Session,
    learner_id: str,
    client_session_id: str | None,
    card_id: str | None,
    mode: str,
    typed: bool = False,
    **start: Any,
) -> Started:
    """:func:`app.practice.sessions.start_session`, unless ``client_session_id`` started one
    already: then that session (``created`` False), or 409 when it was another start."""
    found = _started_by(db, client_session_id) if client_session_id is not None else None
    if found is None:
        try:
            row = start_session(
                db=db,
                learner_id=learner_id,
                card_id=card_id,
                mode=mode,
                typed=typed,
                client_session_id=client_session_id,
                **start,
            )
            return Started(row, created=True)
        except IntegrityError:  # the same start, sent twice at once: the other one stored it
            if client_session_id is None:
                raise
            found = _started_by(db, client_session_id)
            if found is None:
                raise
    same = (
        found.learner_id == learner_id
        and found.mode == mode
        and found.typed == typed
        and (found.card_id is None) == (card_id is None)
        and (card_id is None or found.card_id == card_id)
    )
    if not same:
        raise session_id_reused()
    return Started(found, created=False)


def start_session_from_page(
    *, db: Session, learner_id: str, client_session_id: str | None, **start: Any
) -> PracticeSession:
    """A start form sent from a page (its ``client_session_id`` drawn when the page was shown):
    a double click starts one session, the second click going to the same one. The same form
    sent once its session has an answer or has ended (the browser's back button, a page kept
    open) starts a new one, as the learner asks."""
    try:
        started = start_session_once(
            db=db, learner_id=learner_id, client_session_id=client_session_id, **start
        )
    except Conflict:  # not the id this form was shown with
        started = None
    if started is not None and (
        started.created or not _under_way(db, started.row, start.get("now") or now_utc())
    ):
        return started.row
    return start_session(db=db, learner_id=learner_id, **start)


def _under_way(db: Session, row: PracticeSession, now: datetime) -> bool:
    """Whether the session has an answer or is over (SessionState's rule of its end)."""
    state = load_session(db=db, learner_id=row.learner_id, session_id=row.id)
    return bool(state.answered) or state.over(now)


def _started_by(db: Session, client_session_id: str) -> PracticeSession | None:
    return db.scalar(
        select(PracticeSession).where(PracticeSession.client_session_id == client_session_id)
    )
