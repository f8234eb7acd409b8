"""Delta sync: what changed in the learner's attempts and review state since a cursor."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api import present
from app.api.problem_schemas import ProblemPublic
from app.api.sync_schemas import ChangesPublic, ReviewStatePublic
from app.deps import ApiLang, ApiLearner, ContextDep, DbDep
from app.practice.sync import MAX_CHANGES_PAGE, changes_since, read_cursor

router = APIRouter(tags=["me"], responses={401: {"model": ProblemPublic}})


@router.get(
    "/me/changes",
    response_model=ChangesPublic,
    responses={400: {"model": ProblemPublic, "description": "invalid_cursor: not a next_cursor."}},
)
def read_my_changes(
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
    cursor: Annotated[
        str | None,
        Query(max_length=120, description="next_cursor of the last call; none: from the start"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_CHANGES_PAGE)] = 200,
) -> ChangesPublic:
    """The learner's attempts and review items changed since ``cursor``, oldest change first,
    so that an app that was offline refreshes in one call (repeat while ``more``).

    Apply attempts by ``attempt_id`` and review items by card and template: a row changed again
    (a mistake dismissed, an exam's answers told at its end, an install's history claimed) comes
    again, and the last one sent wins. A running exam's answers come once it ends. ``reset``:
    the cursor was another learner's (an install since claimed by this account): drop what was
    synced and apply this page as the start."""
    start, reset = read_cursor(cursor, learner.id)
    changes = changes_since(
        db=db,
        catalog=ctx.catalog,
        learner_id=learner.id,
        now=ctx.clock(),
        cursor=start,
        reset=reset,
        limit=limit,
    )
    return ChangesPublic(
        attempts=[present.attempt(view, lang) for view in changes.attempts],
        review_items=[
            ReviewStatePublic(
                card_id=item.card_id,
                point=item.point,
                template_id=item.template_id,
                due_at=item.due_at,
                reviews=item.reviews,
                lapses=item.lapses,
                last_review_at=item.last_review_at,
                stability=item.state.get("stability"),
                difficulty=item.state.get("difficulty"),
            )
            for item in changes.review_items
        ],
        next_cursor=changes.cursor.text(learner.id),
        more=changes.more,
        reset=changes.reset,
    )
