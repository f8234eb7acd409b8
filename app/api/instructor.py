"""The instructor's API: validate, draft, publish, withdraw, retire, preview, versions, audit.

Every route needs an instructor (or admin) bearer token: learners get 403.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Request, Response, status

from app.api.instructor_schemas import (
    ETAG,
    HAS_ERRORS,
    AuditPublic,
    DraftCreatedPublic,
    DraftPublic,
    InstructorCardPublic,
    ProblemsPublic,
    PublishedPublic,
    ValidationPublic,
    VersionPublic,
)
from app.api.preview_schemas import PreviewChoicePublic, PreviewPublic, sides_public
from app.api.problem_schemas import CardProblemPublic, ProblemPublic
from app.api.responses import if_match
from app.authoring import history, service
from app.authoring.preview import preview as make_preview
from app.authoring.revisions import DraftChanged, changed_since_read
from app.deps import ApiInstructor, ApiLang, ContextDep, DbDep
from app.domain.identity import MAX_SEED

router = APIRouter(
    prefix="/instructor",
    tags=["instructor"],
    responses={
        400: {"model": ProblemPublic, "description": "A body that is not JSON, or bad input."},
        401: {"model": ProblemPublic},
        403: {"model": ProblemPublic, "description": "Not an instructor."},
        404: {"model": ProblemPublic},
    },
)
CardId = Annotated[str, Path(max_length=100)]
Document = Annotated[
    dict[str, Any], Body(description="A card document: the structure of cards/*.yaml, as JSON.")
]


def _problems(checked: Any) -> list[CardProblemPublic]:
    return [CardProblemPublic(**p.to_json()) for p in checked.problems]


@router.get("/cards", response_model=list[InstructorCardPublic])
def list_cards(
    ctx: ContextDep, instructor: ApiInstructor, lang: ApiLang
) -> list[InstructorCardPublic]:
    """Every card, offered to learners or withdrawn."""
    return [
        InstructorCardPublic(
            id=c.id,
            title=c.title.get(lang),
            version=c.version,
            offered=c.id not in ctx.catalog.withdrawn,
        )
        for c in ctx.catalog.all_cards()
    ]


@router.post(
    "/cards/validate",
    response_model=ProblemsPublic,
    responses={
        422: {"model": ProblemPublic, "description": "draft_too_large: over a limit."},
        429: {"model": ProblemPublic, "description": "Too many validations at once."},
    },
)
def validate_card(document: Document, instructor: ApiInstructor) -> ProblemsPublic:
    """Every problem of a card document (errors block publishing, warnings do not), answered
    when its validation job finishes (within the job's time bound, VALIDATION_TIMEOUT_S)."""
    return ProblemsPublic(problems=_problems(service.validate(document)))


def _validation(job: Any, lang: str) -> ValidationPublic:
    return ValidationPublic(
        id=job.id,
        status=job.state,
        templates_done=job.done,
        templates_total=job.total,
        seconds=job.seconds,
        problems=None
        if job.state != "done"
        else [CardProblemPublic(**p.to_json(lang)) for p in job.problems or ()],
    )


@router.post(
    "/cards/validations",
    response_model=ValidationPublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        202: {
            "headers": {
                "Location": {
                    "description": "The job's URL, to poll.",
                    "required": True,
                    "schema": {"type": "string"},
                }
            }
        },
        422: {"model": ProblemPublic, "description": "draft_too_large: over a limit."},
        429: {"model": ProblemPublic, "description": "Too many validations at once."},
    },
)
def start_validation(
    document: Document, response: Response, instructor: ApiInstructor, lang: ApiLang
) -> ValidationPublic:
    """Validate a card document in the background: poll the job (its Location) for progress,
    templates done of the total, then its problems."""
    job = service.start_validation(document)
    response.headers["Location"] = f"/api/v1/instructor/validations/{job.id}"
    return _validation(job, lang)


@router.get("/validations/{job_id}", response_model=ValidationPublic)
def read_validation(
    job_id: Annotated[str, Path(max_length=64)], instructor: ApiInstructor, lang: ApiLang
) -> ValidationPublic:
    """A validation job's progress, then its problems (404 once forgotten, or on another
    server process: jobs live in the process that runs them)."""
    return _validation(service.validation_job(job_id), lang)


@router.post("/cards", response_model=DraftCreatedPublic, status_code=status.HTTP_201_CREATED)
def create_card(document: Document, db: DbDep, instructor: ApiInstructor) -> DraftCreatedPublic:
    """A new card, as a draft (409 when the id exists)."""
    card_id = service.create_draft(db=db, actor=instructor, document=document)
    return DraftCreatedPublic(card_id=card_id, problems=_problems(service.validate(document)))


@router.get(
    "/cards/{card_id}/draft", response_model=DraftPublic, responses={200: {"headers": ETAG}}
)
def read_draft(
    card_id: CardId, response: Response, db: DbDep, instructor: ApiInstructor
) -> DraftPublic:
    """The card's draft, or its latest version when there is no draft; its revision is the
    ETag."""
    draft = service.get_draft(db=db, card_id=card_id)
    response.headers["ETag"] = f'"{draft.revision}"'
    return DraftPublic(
        card_id=card_id,
        is_draft=draft.is_draft,
        document=draft.document,
        updated_at=draft.updated_at,
    )


@router.put(
    "/cards/{card_id}/draft",
    response_model=ProblemsPublic,
    responses={
        200: {"headers": ETAG},
        412: {
            "model": ProblemPublic,
            "description": "draft_changed: If-Match does not name the draft's ETag (nothing saved).",
        },
    },
)
def save_draft(
    card_id: CardId,
    document: Document,
    response: Response,
    db: DbDep,
    instructor: ApiInstructor,
    if_match_header: Annotated[
        str | None,
        Header(
            alias="If-Match",
            max_length=2000,
            description="The ETag of the draft read (GET …/draft): saved only over that draft.",
        ),
    ] = None,
) -> ProblemsPublic:
    """Replace the draft (with If-Match: only the draft of that ETag); the answer lists its
    problems and its ETag is the new revision."""
    based_on = None
    if if_match_header is not None:
        based_on = if_match(if_match_header, service.get_draft(db=db, card_id=card_id).revision)
    try:
        revision = service.save_draft(
            db=db, actor=instructor, card_id=card_id, document=document, based_on=based_on
        )
    except DraftChanged:
        raise changed_since_read() from None
    response.headers["ETag"] = f'"{revision}"'
    return ProblemsPublic(problems=_problems(service.validate(document)))


@router.delete("/cards/{card_id}/draft", status_code=status.HTTP_204_NO_CONTENT)
def discard_draft(card_id: CardId, db: DbDep, instructor: ApiInstructor) -> Response:
    service.discard_draft(db=db, actor=instructor, card_id=card_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/cards/{card_id}/publish",
    response_model=PublishedPublic,
    responses={
        **HAS_ERRORS,
        409: {
            "model": ProblemPublic,
            "description": "draft_changed: the draft was saved again while it was being checked"
            " (nothing published, the draft kept).",
        },
    },
)
def publish(
    card_id: CardId, request: Request, db: DbDep, instructor: ApiInstructor
) -> PublishedPublic:
    """Publish the draft as the next version (blocked while errors remain); 404 ``no_draft``
    when there is none (published meanwhile by another request)."""
    version = service.publish(
        db=db, actor=instructor, live=request.app.state.live_catalog, card_id=card_id
    )
    return PublishedPublic(version=version)


@router.post("/cards/{card_id}/withdraw", status_code=status.HTTP_204_NO_CONTENT)
def withdraw(card_id: CardId, request: Request, db: DbDep, instructor: ApiInstructor) -> Response:
    """Stop offering the card to learners (old questions and mistakes still work)."""
    service.set_offered(
        db=db,
        actor=instructor,
        live=request.app.state.live_catalog,
        card_id=card_id,
        offered=False,
    )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/cards/{card_id}/offer", status_code=status.HTTP_204_NO_CONTENT)
def offer(card_id: CardId, request: Request, db: DbDep, instructor: ApiInstructor) -> Response:
    """Offer a withdrawn card again."""
    service.set_offered(
        db=db,
        actor=instructor,
        live=request.app.state.live_catalog,
        card_id=card_id,
        offered=True,
    )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/cards/{card_id}/templates/{template_id}/retire",
    response_model=PublishedPublic,
    responses=HAS_ERRORS,
)
def retire(
    card_id: CardId,
    template_id: Annotated[str, Path(max_length=100)],
    request: Request,
    db: DbDep,
    instructor: ApiInstructor,
) -> PublishedPublic:
    """Publish a version without this template; its old questions keep grading."""
    version = service.retire_template(
        db=db,
        actor=instructor,
        live=request.app.state.live_catalog,
        card_id=card_id,
        template_id=template_id,
    )
    return PublishedPublic(version=version)


@router.get("/cards/{card_id}/versions", response_model=list[VersionPublic])
def list_versions(card_id: CardId, db: DbDep, instructor: ApiInstructor) -> list[VersionPublic]:
    return [
        VersionPublic(version=v.version, created_at=v.created_at, templates=v.templates)
        for v in history.versions(db=db, card_id=card_id)
    ]


@router.get("/cards/{card_id}/diff")
def diff(
    card_id: CardId,
    db: DbDep,
    ctx: ContextDep,
    instructor: ApiInstructor,
    lang: ApiLang,
    from_version: Annotated[int, Query(alias="from", ge=1, le=10**9)],
    to_version: Annotated[int, Query(alias="to", ge=1, le=10**9)],
) -> dict[str, Any]:
    """What changed between two versions: templates, exam points and the card's own fields,
    each changed field before and after; a changed template's revision says whether only its
    wording changed (minor: its questions and statistics go on) or its values (major), and
    which values for which parameters."""
    changes = history.diff(
        db=db, catalog=ctx.catalog, card_id=card_id, old=from_version, new=to_version, lang=lang
    )
    return {"changes": changes}


@router.get("/cards/{card_id}/draft/diff")
def draft_diff(
    card_id: CardId, db: DbDep, instructor: ApiInstructor, lang: ApiLang
) -> dict[str, Any]:
    """What the draft changes since the latest version (``from``), as the version diff says it;
    a changed template's revision says whether publishing keeps its version (minor)."""
    old, changes = history.draft_diff(db=db, card_id=card_id, lang=lang)
    return {"from": old, "changes": changes}


@router.get("/cards/{card_id}/audit", response_model=list[AuditPublic])
def read_audit(card_id: CardId, db: DbDep, instructor: ApiInstructor) -> list[AuditPublic]:
    return [
        AuditPublic(
            at=e.at,
            actor=e.actor_email,
            action=e.action,
            template_id=e.template_id,
            version=e.version,
        )
        for e in history.audit_log(db=db, card_id=card_id)
    ]


@router.get("/cards/{card_id}/preview", response_model=PreviewPublic)
def preview(
    card_id: CardId,
    db: DbDep,
    instructor: ApiInstructor,
    lang: ApiLang,
    template_id: Annotated[str, Query(max_length=100)],
    seed: Annotated[int | None, Query(ge=0, le=MAX_SEED)] = None,
) -> PreviewPublic:
    """A variant of the draft (or latest version) with its key and every pitfall's explanation."""
    variant = make_preview(db=db, card_id=card_id, template_id=template_id, seed=seed)
    return PreviewPublic(
        sides=sides_public(variant.sides, lang),
        template_id=variant.template_id,
        template_version=variant.template_version,
        seed=variant.seed,
        params=dict(variant.params_display),
        stem=variant.stem.get(lang),
        choices=[
            PreviewChoicePublic(
                id=c.id,
                text=c.text.get(lang),
                correct=c.correct,
                pitfall_id=c.pitfall_id,
                pitfall_title=c.pitfall_title.get(lang) if c.pitfall_title else None,
                explanation=c.explanation.get(lang) if c.explanation else None,
            )
            for c in variant.choices
        ],
        correct_choice_id=variant.correct_choice_id,
        solution=[s.get(lang) for s in variant.solution],
    )
