"""An instructor's classes as pages (:mod:`app.analytics.classes`): ``/instructor/classes`` lists
them and creates one (a join code); ``/instructor/classes/{id}`` shows each member's progress (the
owner or an admin; 404 for anyone else); learners with an account join at ``/classes/join``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.responses import RedirectResponse, Response

from app.analytics.classes import class_progress, classes_of, create_class, join_class
from app.deps import CatalogDep, ContextDep, DbDep, InstructorVisitor, VisitorDep
from app.domain.analytics import percent
from app.domain.messages import Message
from app.problems import Problem
from app.web.forms import check_csrf
from app.web.templating import link, render_page

router = APIRouter(include_in_schema=False)

FormText = Annotated[str, Form(max_length=200)]
CsrfField = Annotated[str | None, Form()]


def _classes_page(
    request: Request,
    visitor: InstructorVisitor,
    db: DbDep,
    *,
    error: str | None = None,
    name: str = "",
    status_code: int = 200,
) -> Response:
    assert visitor.learner is not None
    context = {
        "classes": classes_of(db=db, owner_id=visitor.learner.id),
        "csrf_token": visitor.csrf_token,
        "error": error,
        "name": name,
    }
    return render_page(
        request,
        "instructor_analytics_classes.html",
        context,
        lang=visitor.lang,
        status_code=status_code,
    )


@router.get("/instructor/classes")
def classes_page(request: Request, visitor: InstructorVisitor, db: DbDep) -> Response:
    """The instructor's classes, their join codes and member counts; a form for a new one."""
    return _classes_page(request, visitor, db)


@router.post("/instructor/classes")
def new_class(
    request: Request,
    visitor: InstructorVisitor,
    db: DbDep,
    csrf_token: CsrfField = None,
    name: FormText = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    assert visitor.learner is not None
    try:
        created = create_class(db=db, owner_id=visitor.learner.id, name=name)
    except Problem as problem:
        return _classes_page(
            request,
            visitor,
            db,
            error=problem.text.get(visitor.lang),
            name=name,
            status_code=problem.status_code,
        )
    return RedirectResponse(link(f"/instructor/classes/{created.id}", visitor.lang), 303)


def _point_label(catalog: CatalogDep, card_id: str, slug: str) -> tuple[int, str]:
    point = catalog.point_title_card(card_id, slug)
    return (point.number, point.title.en) if point is not None else (10**6, slug)


@router.get("/instructor/classes/{class_id}")
def class_page(
    request: Request,
    class_id: int,
    visitor: InstructorVisitor,
    db: DbDep,
    catalog: CatalogDep,
    context: ContextDep,
) -> Response:
    """Each member's progress: first answers, share right, per exam point, reviews due, last
    answer."""
    assert visitor.learner is not None
    progress = class_progress(
        db=db,
        class_id=class_id,
        viewer=visitor.learner,
        now=context.clock(),
        offered=catalog.offered_templates,
    )
    columns = sorted(
        progress.columns, key=lambda c: (c[0], _point_label(catalog, c[0], c[1])[0], c[1])
    )
    points = {column: catalog.point_title_card(column[0], column[1]) for column in progress.columns}
    # The columns by card, in order: a heading over each card's exam points (two cards' points
    # were both headed "Exam point 1").
    groups: list[tuple[str, object, int]] = []
    for card_id, _slug in columns:
        if groups and groups[-1][0] == card_id:
            groups[-1] = (card_id, groups[-1][1], groups[-1][2] + 1)
        else:
            card = catalog.latest(card_id)
            groups.append((card_id, card.title if card is not None else None, 1))
    join_url = request.url_for("join_page").include_query_params(code=progress.summary.code_display)
    return render_page(
        request,
        "instructor_analytics_class.html",
        {
            "progress": progress,
            "columns": columns,
            "points": points,
            "groups": groups,
            "join_url": str(join_url),
            "pct": percent,
        },
        lang=visitor.lang,
    )


def _join_page(
    request: Request,
    visitor: VisitorDep,
    *,
    joined: object = None,
    error: str | None = None,
    code: str = "",
    status_code: int = 200,
) -> Response:
    context = {
        "csrf_token": visitor.csrf_token,
        "joined": joined,
        "error": error,
        "code": code,
        "signed_in": visitor.signed_in,
    }
    return render_page(
        request,
        "instructor_analytics_join.html",
        context,
        lang=visitor.lang,
        status_code=status_code,
    )


@router.get("/classes/join")
def join_page(request: Request, visitor: VisitorDep) -> Response:
    """The form where a learner enters a class's join code (an account is needed)."""
    return _join_page(request, visitor, code=request.query_params.get("code", "")[:20])


@router.post("/classes/join")
def join(
    request: Request,
    visitor: VisitorDep,
    db: DbDep,
    csrf_token: CsrfField = None,
    code: FormText = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    if visitor.learner is None or not visitor.learner.has_account:
        return _join_page(
            request,
            visitor,
            error=Message("Joining a class needs an account:").get(visitor.lang),
            code=code,
            status_code=403,
        )
    try:
        joined = join_class(db=db, learner=visitor.learner, code=code)
    except Problem as problem:
        return _join_page(
            request,
            visitor,
            error=problem.text.get(visitor.lang),
            code=code,
            status_code=problem.status_code,
        )
    return _join_page(request, visitor, joined=joined)
