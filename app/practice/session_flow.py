"""A practice session as it runs, the same for the web pages and the API: the session read (its
end stored once it is over), its next question, the time an exam has left, and when its summary
may be shown.

The rules themselves are app.practice.sessions' (when a session is over, whether its feedback is
withheld); this module says what each front end serves from them, so that a page and an app
asking the same thing get the same question and the same refusal.
"""

from __future__ import annotations

import math
from datetime import datetime

from sqlalchemy.orm import Session

from app.auth.service import as_utc
from app.domain.catalog import Catalog
from app.domain.messages import Message
from app.practice.questions import Question, QuestionSigner
from app.practice.sessions import (
    SessionState,
    load_session,
    question_at,
    settle_session,
    summary_path,
)
from app.problems import Conflict


class NoQuestionLeft(Conflict):
    """A question asked of a session that is over (every question answered, ended by the learner,
    an exam past its deadline): its summary is what is left to see."""

    def __init__(self, state: SessionState) -> None:
        if state.is_exam:
            text = Message("The exam is over: see your results.")
            code = "exam_over"
        else:
            text = Message("This session is over: see its summary.")
            code = "session_over"
        super().__init__(text, code=code, members={"summary_url": summary_path(state.row.id)})


class ResultsWithheld(Conflict):
    """The summary of an exam that is still running: nothing of its results is told before its
    end (SessionState.withholds_feedback)."""

    def __init__(self) -> None:
        super().__init__(
            Message("This exam is still running: its results show when it ends."),
            code="exam_running",
        )


def read_session(
    *, db: Session, catalog: Catalog, learner_id: str, session_id: str, now: datetime
) -> SessionState:
    """The learner's session (NotFound for anyone else's or an unknown id), its end stored once
    it is over (settle_session: an exam's answers are rated then)."""
    state = load_session(db=db, learner_id=learner_id, session_id=session_id[:64])
    return settle_session(db=db, catalog=catalog, state=state, now=now)


def next_question(
    *,
    catalog: Catalog,
    signer: QuestionSigner,
    secret: bytes,
    state: SessionState,
    now: datetime,
) -> Question | None:
    """The session's next question (its first position without an answer, with the token that
    answers it there); None once the session is over."""
    position = state.next_position
    if position is None or state.over(now):
        return None
    return question_at(
        catalog=catalog, signer=signer, secret=secret, state=state, position=position
    )


def seconds_left(state: SessionState, now: datetime) -> int | None:
    """Whole seconds to an exam's deadline, rounded up (0: at or past it); None without one."""
    if state.row.deadline_at is None:
        return None
    return max(0, math.ceil((as_utc(state.row.deadline_at) - now).total_seconds()))
