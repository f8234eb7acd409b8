"""What removes an instructor's work from a draft, each asked first on a page of its own (no
script needed): deleting a template, discarding the whole draft."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.responses import Response

from app.authoring import service
from app.deps import DbDep, InstructorVisitor
from app.domain.authoring import remove_template
from app.domain.cards import find_template_document
from app.domain.messages import Message
from app.domain.texts import Text
from app.problems import NotFound
from app.web.authoring import back_to
from app.web.forms import check_csrf
from app.web.templating import render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")
Confirmed = Annotated[str | None, Form(max_length=3)]


def _confirm_page(
    request: Request,
    visitor: InstructorVisitor,
    card_id: str,
    *,
    heading: Text,
    question: Text,
    button: Text,
    action: str,
    back: str,
) -> Response:
    """The question, a button that does it, and a way back."""
    context = {
        "card_id": card_id,
        "heading": heading,
        "question": question,
        "button": button,
        "action": action,
        "back": back,
        "csrf_token": visitor.csrf_token,
    }
    return render_page(request, "instructor_confirm.html", context, lang=visitor.lang)


def _template_page(
    request: Request, visitor: InstructorVisitor, card_id: str, template_id: str
) -> Response:
    return _confirm_page(
        request, visitor, card_id,
        heading=Message("Delete template %(template)s?", template=template_id),
        question=Message(
            "The template is removed from the draft, with its pitfalls and solution. Learners"
            " keep answering it until the draft is published."
        ),
        button=Message("Delete template"),
        action=f"/instructor/cards/{card_id}/templates/{template_id}/delete",
        back=f"/instructor/cards/{card_id}/templates/{template_id}",
    )  # fmt: skip


@router.get("/cards/{card_id}/templates/{template_id}/delete")
def confirm_delete_template(
    request: Request, card_id: str, template_id: str, db: DbDep, visitor: InstructorVisitor
) -> Response:
    """Ask before deleting a template."""
    draft = service.get_draft(db=db, card_id=card_id[:100])
    if find_template_document(draft.document, template_id) is None:
        raise NotFound(
            Message("the card has no template %(template)s", template=repr(template_id)),
            code="template_not_found",
        )
    return _template_page(request, visitor, card_id, template_id)


@router.post("/cards/{card_id}/templates/{template_id}/delete")
def delete_template(
    request: Request,
    card_id: str,
    template_id: str,
    db: DbDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
    confirm: Confirmed = None,
) -> Response:
    """Delete the template from the draft once confirmed (else ask)."""
    check_csrf(visitor, csrf_token)
    if confirm != "yes":
        return _template_page(request, visitor, card_id, template_id)
    assert visitor.learner is not None
    draft = service.get_draft(db=db, card_id=card_id[:100])
    service.save_draft(
        db=db,
        actor=visitor.learner,
        card_id=card_id,
        document=remove_template(draft.document, template_id),
    )
    return back_to(visitor, f"/instructor/cards/{card_id}")


def _discard_page(
    request: Request, visitor: InstructorVisitor, card_id: str, published: bool
) -> Response:
    question = Message(
        "Every change saved in the draft since the latest version is thrown away; the"
        " published version stays as it is. This cannot be undone."
    )
    if not published:
        question = Message(
            "The card has never been published: discarding its draft removes the card, with"
            " everything written in it. This cannot be undone."
        )
    return _confirm_page(
        request, visitor, card_id,
        heading=Message("Discard the draft of %(card)s?", card=card_id),
        question=question,
        button=Message("Discard draft"),
        action=f"/instructor/cards/{card_id}/discard",
        back=f"/instructor/cards/{card_id}",
    )  # fmt: skip


@router.get("/cards/{card_id}/discard")
def confirm_discard(
    request: Request, card_id: str, db: DbDep, visitor: InstructorVisitor
) -> Response:
    """Ask before discarding the draft."""
    if not service.get_draft(db=db, card_id=card_id[:100]).is_draft:
        raise NotFound(Message("this card has no draft"), code="no_draft")
    published = service.stored_documents_exist(db, card_id[:100])
    return _discard_page(request, visitor, card_id, published)


@router.post("/cards/{card_id}/discard")
def discard(
    request: Request,
    card_id: str,
    db: DbDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
    confirm: Confirmed = None,
) -> Response:
    """Discard the draft once confirmed (else ask); the card page then shows the latest
    version (a card never published is gone: the dashboard)."""
    check_csrf(visitor, csrf_token)
    published = service.stored_documents_exist(db, card_id[:100])
    if confirm != "yes":
        return _discard_page(request, visitor, card_id, published)
    assert visitor.learner is not None
    service.discard_draft(db=db, actor=visitor.learner, card_id=card_id[:100])
    return back_to(visitor, f"/instructor/cards/{card_id}" if published else "/instructor")
