"""HTML pages. Only the answer form changes state, and it is a POST checked for CSRF."""

from __future__ import annotations

import re
import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from starlette.responses import Response

from app.deps import CardsDep, GuestSessionDep, SessionDep, SettingsDep, SignerDep, WebLearner
from app.domain.cards import Card
from app.services.cards import DEMO_COMMANDS, load_demo_results
from app.services.errors import InvalidInput, ServiceError
from app.services.mistakes import count_mistakes_by_pitfall, list_mistakes
from app.services.practice import answer_question
from app.services.questions import MAX_SEED, Question, get_card, new_question, question_from_token
from app.web.session import GuestSession
from app.web.templating import link, pick_lang, render_page

router = APIRouter(include_in_schema=False)

LangParam = Annotated[str | None, Query()]
SeedParam = Annotated[int | None, Query(ge=0, le=MAX_SEED)]
MODES = ("point", "card")
_CLIENT_ANSWER_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class CsrfError(ServiceError):
    status_code = 403


@router.get("/")
def card_list(request: Request, cards: CardsDep, lang: LangParam = None) -> Response:
    """The cards."""
    return render_page(request, "cards.html", {"cards": list(cards.values())}, lang=pick_lang(lang))


@router.get("/cards/{card_id}")
def card_page(
    request: Request, card_id: str, cards: CardsDep, settings: SettingsDep, lang: LangParam = None
) -> Response:
    """A card: texts, formulas, exam points, the reference demo and its results."""
    card = get_card(cards, card_id)
    context = {
        "card": card,
        "demo_commands": DEMO_COMMANDS,
        "demo": load_demo_results(cards_dir=settings.cards_dir, card=card),
    }
    return render_page(request, "card.html", context, lang=pick_lang(lang))


@router.get("/cards/{card_id}/practice")
def practise_card(
    request: Request,
    card_id: str,
    cards: CardsDep,
    signer: SignerDep,
    guest: GuestSessionDep,
    seed: SeedParam = None,
    point: Annotated[int | None, Query(ge=1)] = None,
    lang: LangParam = None,
) -> Response:
    """A question on a random exam point of the card (or on ``point``, to show it again)."""
    item = new_question(cards=cards, signer=signer, card_id=card_id, point=point, seed=seed)
    return _practice_page(request, cards, item, guest, "card", pick_lang(lang))


@router.get("/cards/{card_id}/points/{number}/practice")
def practise_point(
    request: Request,
    card_id: str,
    number: int,
    cards: CardsDep,
    signer: SignerDep,
    guest: GuestSessionDep,
    seed: SeedParam = None,
    lang: LangParam = None,
) -> Response:
    """A question on one exam point."""
    item = new_question(cards=cards, signer=signer, card_id=card_id, point=number, seed=seed)
    return _practice_page(request, cards, item, guest, "point", pick_lang(lang))


@router.post("/answers")
def submit_answer(
    request: Request,
    session: SessionDep,
    cards: CardsDep,
    signer: SignerDep,
    guest: GuestSessionDep,
    learner: WebLearner,
    csrf_token: Annotated[str | None, Form()] = None,
    token: Annotated[str | None, Form(max_length=1000)] = None,
    choice_id: Annotated[str | None, Form(max_length=8)] = None,
    client_answer_id: Annotated[str | None, Form(max_length=64)] = None,
    mode: Annotated[str | None, Form(max_length=8)] = None,
    lang: Annotated[str | None, Form(max_length=8)] = None,
) -> Response:
    """Grade the chosen answer and show the feedback."""
    if not guest.check_csrf(csrf_token):
        raise CsrfError(
            "The form's security token is missing or does not match your session. "
            "Reload the question and answer again (cookies must be enabled)."
        )
    page_lang = pick_lang(lang)
    mode = mode if mode in MODES else "point"
    if not token:
        raise InvalidInput("The form has no question token; load a new question.")
    if not choice_id:
        item = question_from_token(cards=cards, signer=signer, token=token)
        return _practice_page(
            request, cards, item, guest, mode, page_lang, error="pick_one", status_code=422
        )
    if not client_answer_id or not _CLIENT_ANSWER_ID.match(client_answer_id):
        client_answer_id = uuid.uuid4().hex
    outcome = answer_question(
        session=session,
        cards=cards,
        signer=signer,
        learner=learner,
        token=token,
        choice_id=choice_id,
        client_answer_id=client_answer_id,
    )
    card = cards[outcome.variant.card_id]
    next_url = _practice_url(card, outcome.variant.point, mode, page_lang)
    context = {
        "card": card,
        "point": card.point(outcome.variant.point),
        "variant": outcome.variant,
        "grade": outcome.grade,
        "chosen": outcome.variant.choice(outcome.grade.chosen_choice_id),
        "correct": outcome.variant.choice(outcome.grade.correct_choice_id),
        "next_url": next_url,
    }
    other = "zh" if page_lang == "en" else "en"
    return render_page(
        request,
        "feedback.html",
        context,
        lang=page_lang,
        switch_url=_practice_url(card, outcome.variant.point, mode, other),
    )


@router.get("/mistakes")
def my_mistakes(
    request: Request,
    session: SessionDep,
    cards: CardsDep,
    learner: WebLearner,
    lang: LangParam = None,
) -> Response:
    """The learner's wrong attempts, with counts per pitfall on top."""
    context = {
        "counts": count_mistakes_by_pitfall(session=session, cards=cards, learner_id=learner.id),
        "mistakes": list_mistakes(session=session, cards=cards, learner_id=learner.id, limit=200),
        "cards": cards,
    }
    return render_page(request, "mistakes.html", context, lang=pick_lang(lang))


def _practice_url(card: Card, point: int, mode: str, lang: str) -> str:
    if mode == "card":
        return link(f"/cards/{card.id}/practice", lang)
    return link(f"/cards/{card.id}/points/{point}/practice", lang)


def _practice_page(
    request: Request,
    cards: dict[str, Card],
    item: Question,
    guest: GuestSession,
    mode: str,
    lang: str,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    card = cards[item.variant.card_id]
    context = {
        "card": card,
        "point": card.point(item.variant.point),
        "variant": item.variant,
        "token": item.token,
        "csrf_token": guest.csrf_token,
        # One id per rendered form: submitting the same form twice records one attempt.
        "client_answer_id": uuid.uuid4().hex,
        "mode": mode,
        "error": error,
    }
    other = "zh" if lang == "en" else "en"
    # Switching language shows the same question (same seed) in the other language.
    seed = item.variant.seed
    if mode == "card":
        switch = link(f"/cards/{card.id}/practice", other, point=item.variant.point, seed=seed)
    else:
        switch = link(f"/cards/{card.id}/points/{item.variant.point}/practice", other, seed=seed)
    return render_page(
        request, "practice.html", context, lang=lang, status_code=status_code, switch_url=switch
    )
