"""The feedback page of one stored answer: every choice with its pitfall, the worked solution,
the next review; before an exam ends, no feedback at all."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from app.deps import ContextDep, DbDep, VisitorDep
from app.domain.messages import Message
from app.models import Attempt
from app.practice.questions import regenerate
from app.practice.sessions import load_session, summary_path
from app.practice.storing import regrade, stored_question
from app.problems import NotFound
from app.web.templating import link, render_page
from app.web.today import next_review_view

router = APIRouter(include_in_schema=False)


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


@router.get("/answers/{attempt_id}")
def feedback_page(
    request: Request,
    attempt_id: int,
    db: DbDep,
    ctx: ContextDep,
    visitor: VisitorDep,
    again: Annotated[int | None, Query(ge=0, le=1)] = None,
) -> Response:
    """The feedback of one stored answer: every choice with its pitfall, the worked solution
    (``again``: the question was answered again, and this first answer counts)."""
    attempt = db.get(Attempt, attempt_id) if 0 < attempt_id < 2**62 else None
    db.commit()
    if attempt is None or visitor.learner is None or attempt.learner_id != visitor.learner.id:
        raise NotFound(Message("There is no such answer."), code="attempt_not_found")
    state = None
    if attempt.practice_session_id is not None:
        state = load_session(
            db=db, learner_id=attempt.learner_id, session_id=attempt.practice_session_id
        )
        if state.withholds_feedback(ctx.clock()):  # no feedback before the exam ends
            return _see_other(link(f"/sessions/{state.row.id}", visitor.lang))
    variant = regenerate(ctx.catalog, stored_question(attempt))
    card = ctx.catalog.locate(variant.id).card
    result = regrade(variant, attempt.choice_id, attempt.typed_value, attempt.typed_unit)
    if state is not None and not state.over(ctx.clock()):
        next_url = link(f"/sessions/{state.row.id}", visitor.lang)
    elif state is not None:
        next_url = link(summary_path(state.row.id), visitor.lang)
    else:
        next_url = link(f"/cards/{card.id}/points/{variant.id.point}/practice", visitor.lang)
    context = {
        "card": card,
        "point": card.point_by_slug(variant.id.point),
        "variant": variant,
        "grade": result,
        "next_url": next_url,
        "state": state,
        "attempt": attempt,
        "csrf_token": visitor.csrf_token,
        "again_template": variant.id.template_id,
        "position": attempt.position,
        "seconds_left": None,
        "answered_again": bool(again),
        "next_review": next_review_view(db=db, attempt=attempt, now=ctx.clock(), visitor=visitor),
    }
    return render_page(request, "feedback.html", context, lang=visitor.lang)
