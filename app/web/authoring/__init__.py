"""The instructor dashboard: cards, their drafts, a template editor with problems shown at their
field and column, a live preview exactly as learners see it, "test every variant", publishing,
withdrawal, versions with diffs, and the audit log. Instructor role only (403 otherwise).

Forms post whole templates; the document edits themselves are plain functions in
:mod:`app.domain.authoring`, the use cases in :mod:`app.authoring.service` (shared with the API).
The pages: :mod:`app.web.authoring.cards` (the card list, a card's overview and what it does to
the whole card), :mod:`app.web.authoring.card_form` (the card's texts, parameters and formulas),
:mod:`app.web.authoring.point_form` (its exam points) and :mod:`app.web.authoring.editor` (a
template's editor, its preview and the formula check as one types);
:mod:`app.web.authoring.template_form` reads the editor's form, :mod:`app.web.authoring.forms`
holds what the forms share.
"""

from __future__ import annotations

from starlette.responses import RedirectResponse

from app.deps import InstructorVisitor
from app.web.templating import link


def back_to(visitor: InstructorVisitor, path: str) -> RedirectResponse:
    """After a form's post: see ``path`` (in the visitor's language)."""
    return RedirectResponse(link(path, visitor.lang), status_code=303)
