"""Preview: a card as its draft stands, and a variant exactly as learners would see it, for a
seed or for parameter values the instructor chose."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.authoring.service import get_draft
from app.domain.cards import Card, CardError, parse_card
from app.domain.generation import Variant, draw_params, generate, question_id, variant_rng
from app.domain.identity import MAX_SEED
from app.domain.messages import Message
from app.problems import InvalidInput, NotFound

PARAMETER_SEARCH_SEEDS = 20_000


def preview_card(*, db: Session, card_id: str) -> Card:
    """The card as its draft stands (or its latest version), compiled; errors as a 422."""
    draft = get_draft(db=db, card_id=card_id)
    problems: list[CardError] = []
    try:
        card = parse_card(draft.document, problems=problems)
    except CardError as exc:
        raise InvalidInput(exc.text, code="card_has_errors") from None
    return card


def preview_variant(
    *,
    card: Card,
    template_id: str,
    seed: int | None = None,
    params: dict[str, str] | None = None,
) -> Variant:
    """A variant exactly as learners see it, for a seed or for chosen parameter values.

    For chosen values the first seed that draws them is used, so the preview is a real,
    reproducible variant (and its seed a permalink).
    """
    template = card.template(template_id)
    if template is None:
        raise NotFound(
            Message("the card has no template %(template)s", template=repr(template_id)),
            code="template_not_found",
        )
    if params:
        wanted = {}
        for name, text in params.items():
            param = template.params.get(name)
            if param is None:
                raise InvalidInput(
                    Message("the template has no parameter %(name)s", name=repr(name)),
                    code="invalid_param",
                )
            match = next(
                (v for v in param.values if param.display(v) == text or str(v) == text), None
            )
            if match is None:
                raise InvalidInput(
                    Message(
                        "%(value)s is not among the values of %(name)s",
                        value=repr(text),
                        name=repr(name),
                    ),
                    code="invalid_param",
                )
            wanted[name] = match
        for candidate in range(PARAMETER_SEARCH_SEEDS):
            drawn = draw_params(
                template, variant_rng(question_id(card, template, candidate), template.generator)
            )
            if all(drawn[n] == v for n, v in wanted.items()):
                seed = candidate
                break
        else:
            raise InvalidInput(
                Message("no variant with these values was found"), code="invalid_param"
            )
    seed = 0 if seed is None else seed
    if not 0 <= seed <= MAX_SEED:
        raise InvalidInput(
            Message("seed must be between 0 and %(limit)s", limit=MAX_SEED), code="invalid_seed"
        )
    return generate(card, template, seed)
