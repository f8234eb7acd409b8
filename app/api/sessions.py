"""Practice sessions for the app: start one in a mode on a card or on the deck (every card at once,
interleaved), take its questions in order,
answer them, end it, read its summary; an exam's past results. The same services and rules as
the web's sessions (app.practice.sessions, app.practice.session_flow): an exam tells nothing of
its answers before it ends, an answer after a session's end is not counted (409), another
learner's session is unknown (404)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response, status

from app.api import present
from app.api.problem_schemas import AnswerConflictPublic, ProblemPublic, SessionConflictPublic
from app.api.responses import JSONBytesResponse
from app.api.session_schemas import (
    CardScorePublic,
    ExamResultPublic,
    PitfallFallenPublic,
    PointScorePublic,
    SessionCreate,
    SessionPublic,
    SessionQuestionPublic,
    SessionSummaryPublic,
    SummaryQuestionPublic,
)
from app.auth.service import as_utc
from app.deps import ApiLang, ApiLearner, ContextDep, DbDep
from app.domain.messages import Message
from app.practice.answers import answer_question, answer_writer
from app.practice.questions import get_card
from app.practice.session_flow import (
    NoQuestionLeft,
    ResultsWithheld,
    next_question,
    read_session,
    seconds_left,
)
from app.practice.session_starts import start_session_once
from app.practice.sessions import SessionState, finish_session, load_session
from app.practice.summaries import PointScore, QuestionLine, past_exams, summarise
from app.problems import UnprocessableInput
from app.schemas import AnswerCreate, AnswerResultPublic

router = APIRouter(tags=["sessions"], responses={401: {"model": ProblemPublic}})

SessionId = Annotated[str, Path(max_length=64, description="The session_id it started with.")]
UNKNOWN_SESSION: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ProblemPublic,
        "description": "session_not_found: no session of the learner has this id.",
    }
}


def _session(state: SessionState, now: datetime) -> SessionPublic:
    row = state.row
    ended = state.ended_at(now)
    return SessionPublic(
        session_id=row.id,
        scope=row.scope,  # type: ignore[arg-type]
        card_id=row.card_id,
        mode=row.mode,  # type: ignore[arg-type]
        point=row.point,
        typed=row.typed,
        size=state.size,
        answered=len(state.answered),
        started_at=as_utc(row.started_at),
        deadline_at=as_utc(row.deadline_at) if row.deadline_at is not None else None,
        seconds_left=seconds_left(state, now),
        over=ended is not None,
        ended_at=ended,
        results_withheld=state.withholds_feedback(now),
    )


@router.post(
    "/me/sessions",
    response_model=SessionPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        201: {
            "headers": {
                "Location": {
                    "description": "The session's URL.",
                    "required": True,
                    "schema": {"type": "string"},
                }
            }
        },
        200: {
            "model": SessionPublic,
            "description": "The start was sent again (its client_session_id): nothing started, "
            "the session the first one started as it stands now.",
            "headers": {
                "Location": {
                    "description": "The session's URL.",
                    "required": True,
                    "schema": {"type": "string"},
                }
            },
        },
        404: {"model": ProblemPublic, "description": "card_not_found, point_not_found."},
        409: {
            "model": ProblemPublic,
            "description": "nothing_to_practise: a mistakes session without mistakes (or with "
            "those named marked understood), a review with nothing due; session_id_reused: the "
            "client_session_id of another start.",
        },
        422: {
            "model": ProblemPublic,
            "description": "A malformed body: an unknown mode or one its scope lacks, a card_id "
            "missing (scope card) or given (scope deck), a size out of 1 to 100, a point or "
            "templates for another mode.",
        },
    },
)
def create_session(
    body: SessionCreate, response: Response, db: DbDep, ctx: ContextDep, learner: ApiLearner
) -> SessionPublic:
    """Start a practice session on a card, or on the deck (scope deck: every card at once, the
    cards interleaved): its questions are chosen now, after your latest answers (rounds over the
    templates in scope, no key you saw in your last 10 answers). A timed exam has 90 seconds a
    question; its deadline is in the answer."""
    now = ctx.clock()
    started = start_session_once(
        db=db,
        catalog=ctx.catalog,
        learner_id=learner.id,
        client_session_id=body.client_session_id,
        card_id=body.card_id,
        scope=body.scope,
        mode=body.mode,
        seed_secret=ctx.seed_secret,
        point=body.point,
        size=body.size,
        templates=body.templates,
        now=now,
        typed=body.typed,
    )
    response.headers["Location"] = f"/api/v1/me/sessions/{started.row.id}"
    if started.created:
        return _session(SessionState(row=started.row, answered={}), now)
    response.status_code = status.HTTP_200_OK
    state = load_session(db=db, learner_id=learner.id, session_id=started.row.id)
    return _session(state, now)


@router.get("/me/sessions/{session_id}", response_model=SessionPublic, responses=UNKNOWN_SESSION)
def read_my_session(
    session_id: SessionId, db: DbDep, ctx: ContextDep, learner: ApiLearner
) -> SessionPublic:
    """The session's state: questions answered of its size, an exam's time left, whether it is
    over and whether its results are withheld (an exam still running)."""
    now = ctx.clock()
    state = read_session(
        db=db, catalog=ctx.catalog, learner_id=learner.id, session_id=session_id, now=now
    )
    return _session(state, now)


@router.get(
    "/me/sessions/{session_id}/question",
    response_model=SessionQuestionPublic,
    responses={
        **UNKNOWN_SESSION,
        409: {
            "model": SessionConflictPublic,
            "description": "session_over, exam_over: every question is answered, the session "
            "was ended or the exam's time is up; its summary is what is left. question_retired: "
            "the next question's template was retired since the session started (finish it).",
        },
    },
)
def read_session_question(
    session_id: SessionId, db: DbDep, ctx: ContextDep, learner: ApiLearner, lang: ApiLang
) -> SessionQuestionPublic:
    """The session's next question: the first one without an answer (the same one until it is
    answered). An exam's questions come without their seed."""
    now = ctx.clock()
    state = read_session(
        db=db, catalog=ctx.catalog, learner_id=learner.id, session_id=session_id, now=now
    )
    item = next_question(
        catalog=ctx.catalog, signer=ctx.signer, secret=ctx.seed_secret, state=state, now=now
    )
    if item is None or item.position is None:
        raise NoQuestionLeft(state)
    card = ctx.catalog.locate(item.variant.id).card
    point = card.point_by_slug(item.variant.id.point)
    return SessionQuestionPublic(
        session_id=state.row.id,
        position=item.position.position,
        size=state.size,
        seconds_left=seconds_left(state, now),
        question=present.question(
            item, lang, point.number if point else None, typed=state.row.typed
        ),
    )


@router.post(
    "/me/sessions/{session_id}/answers",
    response_model=AnswerResultPublic,
    responses={
        400: {"model": ProblemPublic, "description": "Invalid or tampered question token."},
        **UNKNOWN_SESSION,
        409: {
            "model": AnswerConflictPublic,
            "description": "exam_over, session_over: the session ended before this answer (not "
            "counted); question_expired, question_retired, answer_id_reused.",
        },
        422: {
            "model": ProblemPublic,
            "description": "question_not_in_session: the token is not one of this session's "
            "questions; a malformed body, a choice the question lacks, or an answer that cannot "
            "be graded as sent (as POST /answers).",
        },
    },
)
def create_session_answer(
    session_id: SessionId,
    body: AnswerCreate,
    request: Request,
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
) -> Response:
    """Answer the session's question (its token from GET …/question), as ``POST /answers``
    does: the first answer to a question counts, resending a client_answer_id replays it. In an
    exam that is still running the answer is stored without its result (``feedback`` null)."""
    state = load_session(db=db, learner_id=learner.id, session_id=session_id)
    content = ctx.signer.verify(body.token, ctx.catalog)
    if content.position is None or content.position.session_id != state.row.id:
        raise UnprocessableInput(
            Message("This question is not one of this session's."),
            code="question_not_in_session",
        )
    outcome = answer_question(
        db=db,
        writer=answer_writer(request.app.state),
        ctx=ctx,
        learner=learner,
        token=body.token,
        choice_id=body.choice_id,
        client_answer_id=body.client_answer_id,
        duration_ms=body.duration_ms,
        answered_at=body.answered_at,
        value=body.value,
        unit=body.unit,
    )
    return JSONBytesResponse(present.answer_json(outcome, lang))


@router.post(
    "/me/sessions/{session_id}/finish", response_model=SessionPublic, responses=UNKNOWN_SESSION
)
def finish_my_session(
    session_id: SessionId, db: DbDep, ctx: ContextDep, learner: ApiLearner
) -> SessionPublic:
    """End the session now: the questions left count as unanswered (an exam's results are told
    from now on). A session over already keeps the end it had."""
    now = ctx.clock()
    state = load_session(db=db, learner_id=learner.id, session_id=session_id)
    finish_session(db=db, catalog=ctx.catalog, state=state, now=now)
    state = read_session(
        db=db, catalog=ctx.catalog, learner_id=learner.id, session_id=session_id, now=now
    )
    return _session(state, now)


@router.get(
    "/me/sessions/{session_id}/summary",
    response_model=SessionSummaryPublic,
    responses={
        **UNKNOWN_SESSION,
        409: {
            "model": ProblemPublic,
            "description": "exam_running: an exam's results are told only once it ends.",
        },
    },
)
def read_session_summary(
    session_id: SessionId, db: DbDep, ctx: ContextDep, learner: ApiLearner, lang: ApiLang
) -> SessionSummaryPublic:
    """Right, wrong and unanswered per exam point, the pitfalls fallen for, the time spent, and
    each question with your answer and the key (those answered so far while a session runs;
    an exam's only once it ends)."""
    now = ctx.clock()
    state = read_session(
        db=db, catalog=ctx.catalog, learner_id=learner.id, session_id=session_id, now=now
    )
    if state.withholds_feedback(now):
        raise ResultsWithheld()
    summary = summarise(catalog=ctx.catalog, state=state, now=now, secret=ctx.seed_secret)
    return SessionSummaryPublic(
        session=_session(state, now),
        right=summary.right,
        wrong=summary.wrong,
        unanswered=summary.unanswered,
        seconds=summary.seconds,
        cards=[
            CardScorePublic(
                card_id=c.card_id,
                right=c.right,
                wrong=c.wrong,
                unanswered=c.unanswered,
                points=[_point_score(s) for s in c.points],
            )
            for c in summary.cards
        ],
        points=[_point_score(s) for s in summary.points],
        pitfalls=[
            PitfallFallenPublic(
                card_id=p.card_id,
                template_id=p.template_id,
                pitfall_id=p.pitfall_id,
                title=p.title.get(lang),
                times=p.times,
            )
            for p in summary.pitfalls
        ],
        wrong_templates=summary.wrong_templates,
        questions=[_question_line(line, lang) for line in summary.questions],
    )


def _point_score(score: PointScore) -> PointScorePublic:
    return PointScorePublic(
        card_id=score.card_id,
        point=score.point,
        right=score.right,
        wrong=score.wrong,
        unanswered=score.unanswered,
    )


def _question_line(line: QuestionLine, lang: str) -> SummaryQuestionPublic:
    chosen = line.chosen
    return SummaryQuestionPublic(
        position=line.position,
        card_id=line.card_id,
        point=line.variant.id.point,
        template_id=line.variant.id.template_id,
        stem=line.variant.stem.get(lang),
        answered=line.answered,
        correct=line.correct,
        choice_id=chosen.id if chosen is not None else None,
        choice_text=chosen.text.get(lang) if chosen is not None else None,
        typed=line.typed,
        correct_choice_id=line.key.id,
        correct_text=line.key.text.get(lang),
        pitfall=present.pitfall(
            line.pitfall, chosen.explanation if chosen is not None else None, lang
        ),
        attempt_id=line.attempt_id,
    )


@router.get(
    "/me/exams",
    response_model=list[ExamResultPublic],
    responses={404: {"model": ProblemPublic, "description": "card_not_found."}},
)
def list_my_exams(
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    card_id: Annotated[
        str | None,
        Query(max_length=100, description="The card's id; omitted: your exams on the deck."),
    ] = None,
) -> list[ExamResultPublic]:
    """Your last 10 exams on a card (or, without card_id, on the deck) that are over, newest
    first: when each started, its score and the time it used (an exam still running is not
    listed)."""
    if card_id is not None:
        card_id = get_card(ctx.catalog, card_id, offered=False).id
    return [
        ExamResultPublic(
            session_id=exam.session_id,
            started_at=exam.started_at,
            right=exam.right,
            size=exam.size,
            seconds=exam.seconds,
        )
        for exam in past_exams(db=db, learner_id=learner.id, card_id=card_id, now=ctx.clock())
    ]
