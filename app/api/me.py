"""The learner's own data: attempts, mistakes, pitfalls, progress and reviews due."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from app.api import present
from app.api.problem_schemas import ProblemPublic
from app.api.responses import conditional_responses, not_modified
from app.api.sync_schemas import DismissCreate, DismissedPublic
from app.auth.service import LearnerRef
from app.deps import ApiLang, ApiLearner, ContextDep, DbDep
from app.domain.messages import Message
from app.domain.numerals import is_digits
from app.practice.choosing import practise_again, review_question
from app.practice.mistakes import (
    MAX_PAGE,
    dismiss,
    list_attempts,
    mistake_book,
    results_told,
)
from app.practice.recent import recent_answers
from app.problems import InvalidInput
from app.review.habits import pitfall_mastery
from app.review.service import MAX_DUE_PAGE, DueCursor, due_items, progress
from app.schemas import (
    AttemptPagePublic,
    CardProgressPublic,
    DueItemPublic,
    DuePagePublic,
    PitfallCountPublic,
    PitfallMasteryPublic,
    PointProgressPublic,
    ProgressPublic,
    QuestionPublic,
)

router = APIRouter(tags=["me"], responses={401: {"model": ProblemPublic}})
BAD_CURSOR: dict[int | str, dict[str, Any]] = {
    400: {"model": ProblemPublic, "description": "invalid_cursor: not a next_cursor."}
}
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Cursor = Annotated[str | None, Query(max_length=20, description="next_cursor of the last page")]
DueCursorQuery = Annotated[
    str | None, Query(max_length=40, description="next_cursor of the last page")
]


def _cursor(value: str | None) -> int | None:
    if value is None:
        return None
    if not is_digits(value) or len(value) > 18:
        raise InvalidInput(Message("invalid cursor"), code="invalid_cursor")
    return int(value)


def _page(
    db: DbDep,
    ctx: ContextDep,
    learner: LearnerRef,
    lang: str,
    limit: int,
    cursor: str | None,
    wrong_only: bool,
) -> AttemptPagePublic:
    views, after = list_attempts(
        db=db,
        catalog=ctx.catalog,
        learner_id=learner.id,
        now=ctx.clock(),
        limit=limit,
        before_id=_cursor(cursor),
        wrong_only=wrong_only,
    )
    return AttemptPagePublic(
        items=[present.attempt(v, lang) for v in views],
        next_cursor=str(after) if after is not None else None,
    )


@router.get("/me/attempts", response_model=AttemptPagePublic, responses=BAD_CURSOR)
def read_my_attempts(
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> AttemptPagePublic:
    """Every answer of the learner, each with its client_answer_id, the one that reached the
    server last first (an answer sent later from offline comes before those stored while it
    waited: its answered_at says when it was answered)."""
    return _page(db, ctx, learner, lang, limit, cursor, wrong_only=False)


@router.get("/me/mistakes", response_model=AttemptPagePublic, responses=BAD_CURSOR)
def read_my_mistakes(
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> AttemptPagePublic:
    """The learner's wrong answers, newest first, paginated like /me/attempts."""
    return _page(db, ctx, learner, lang, limit, cursor, wrong_only=True)


@router.post("/me/mistakes/dismiss", response_model=DismissedPublic)
def dismiss_my_mistake(body: DismissCreate, db: DbDep, learner: ApiLearner) -> DismissedPublic:
    """ "I understand this now": hide a group of the mistake book (the pitfall's wrong answers
    on the exam point; without a pitfall, the template's); statistics keep them."""
    count = dismiss(
        db=db,
        learner_id=learner.id,
        card_id=body.card_id,
        point=body.point,
        pitfall_id=body.pitfall_id,
        template_id=body.template_id,
    )
    return DismissedPublic(dismissed=count)


@router.get("/me/pitfalls", response_model=list[PitfallCountPublic])
def read_my_pitfalls(
    db: DbDep, ctx: ContextDep, learner: ApiLearner, lang: ApiLang
) -> list[PitfallCountPublic]:
    """How often the learner fell for each pitfall (not dismissed), most frequent first."""
    book = mistake_book(db=db, catalog=ctx.catalog, learner_id=learner.id, now=ctx.clock())
    return [
        PitfallCountPublic(
            card_id=g.card_id,
            point=g.point,
            pitfall_id=g.pitfall_id,
            title=g.title.get(lang),
            count=g.times,
        )
        for g in book
        if g.pitfall_id is not None
    ]


@router.get(
    "/me/attempts/{attempt_id}/again",
    response_model=QuestionPublic,
    responses={
        404: {"model": ProblemPublic, "description": "No such answer of the learner."},
        409: {
            "model": ProblemPublic,
            "description": "question_retired: the answer's template no longer exists.",
        },
    },
)
def read_practise_again(
    attempt_id: Annotated[int, Path(ge=1, description="The attempt_id of one of your answers.")],
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
) -> QuestionPublic:
    """Practise again with new numbers: a question on the template of one of your answers, with
    new values for every parameter its key depends on and a key you did not see in your last 10
    answers. A template with a single key (a statement) gives way to another template of the
    same exam point. Its token is bound to you."""
    item = practise_again(
        db=db,
        catalog=ctx.catalog,
        signer=ctx.signer,
        learner_id=learner.id,
        attempt_id=attempt_id,
    )
    card = ctx.catalog.latest(item.variant.id.card_id)
    point = card.point_by_slug(item.variant.id.point) if card else None
    return present.question(item, lang, point.number if point else None)


@router.get(
    "/me/progress",
    response_model=ProgressPublic,
    responses=conditional_responses("The learner's progress"),
)
def read_my_progress(
    request: Request,
    response: Response,
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
) -> Any:
    """Per card, in the card's exam-point order: first answers, share right, reviews due, FSRS
    retention of the questions answered right (none yet: null); and mastery per pitfall. Sends
    an ``ETag``: an app refreshing with ``If-None-Match`` gets a 304 while nothing changed."""
    now = ctx.clock()
    told = results_told(db=db, catalog=ctx.catalog, learner_id=learner.id, now=now)
    cards: dict[str, list[PointProgressPublic]] = {}
    for item in progress(db=db, learner_id=learner.id, now=now, catalog=ctx.catalog, told=told):
        cards.setdefault(item.card_id, []).append(
            PointProgressPublic(
                point=item.point,
                attempts=item.attempts,
                share_right=item.right / item.attempts if item.attempts else None,
                due=item.due,
                # to a tenth of a percent: the ETag stays while nothing else changes
                retention=None if item.retention is None else round(item.retention, 3),
                reviewed=item.reviewed,
                learning=item.learning,
            )
        )
    pitfalls: dict[str, list[PitfallMasteryPublic]] = {}
    for row in pitfall_mastery(db=db, catalog=ctx.catalog, learner_id=learner.id, told=told):
        pitfalls.setdefault(row.card_id, []).append(
            PitfallMasteryPublic(
                pitfall_id=row.pitfall_id,
                point=row.point,
                title=row.title_pitfall.title.get(lang),
                state=row.state,  # type: ignore[arg-type]
                offered=row.offered,
                chosen=row.fell,
            )
        )
    body = ProgressPublic(
        cards=[
            CardProgressPublic(card_id=c, points=points, pitfalls=pitfalls.get(c, []))
            for c, points in cards.items()
        ]
    )
    vary = "Authorization, Accept-Language"
    return not_modified(request, response, body, vary=vary, private=True) or body


@router.get("/me/review/due", response_model=DuePagePublic, responses=BAD_CURSOR)
def read_my_due_reviews(
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
    limit: Annotated[int, Query(ge=1, le=MAX_DUE_PAGE)] = 20,
    cursor: DueCursorQuery = None,
) -> DuePagePublic:
    """Review items due now, most overdue first, each with a fresh variant of its template (new
    numbers, and no key of your last 10 answers, where the template has more than one). Only
    templates offered to learners have items due: a withdrawn card's wait until it is offered
    again, and a template its card's latest version dropped until it comes back, as
    ``/me/today`` counts them."""
    results_told(db=db, catalog=ctx.catalog, learner_id=learner.id, now=ctx.clock())
    items = due_items(
        db=db,
        catalog=ctx.catalog,
        learner_id=learner.id,
        now=ctx.clock(),
        limit=limit + 1,
        after=_due_cursor(cursor),
    )
    more = len(items) > limit
    items = items[:limit]
    out = []
    seen = recent_answers(db=db, catalog=ctx.catalog, learner_id=learner.id)
    for item in items:
        card = ctx.catalog.latest(item.card_id)
        if card is None or card.template(item.template_id) is None:
            continue
        question = review_question(
            catalog=ctx.catalog,
            signer=ctx.signer,
            card_id=item.card_id,
            template_id=item.template_id,
            learner_id=learner.id,
            seen=seen,
        )
        point = card.point_by_slug(question.variant.id.point)
        out.append(
            DueItemPublic(
                card_id=item.card_id,
                point=item.point,
                template_id=item.template_id,
                due_at=item.due_at,
                question=present.question(question, lang, point.number if point else None),
            )
        )
    last = DueCursor(items[-1].id, items[-1].due_at) if more and items else None
    return DuePagePublic(items=out, next_cursor=last.text() if last else None)


def _due_cursor(value: str | None) -> DueCursor | None:
    if value is None:
        return None
    try:
        return DueCursor.read(value)
    except ValueError:
        raise InvalidInput(Message("invalid cursor"), code="invalid_cursor") from None
