"""Reading pages: the card list, a card, and the reference demo's "Run it yourself" page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.catalog.demo import DEMO_COMMANDS, chart_size, demo_chart, load_demo_results
from app.deps import CatalogDep, ContextDep, DbDep, SettingsDep, VisitorDep
from app.domain.messages import Message
from app.domain.practice import DEFAULT_SIZE
from app.practice.mistakes import results_told
from app.practice.questions import get_card
from app.practice.scopes import NOTHING_TO_DO, deck_reach
from app.problems import NotFound
from app.review.service import deck_progress
from app.web.templating import render_page

router = APIRouter(include_in_schema=False)


@router.get("/cards")
def card_list(request: Request, db: DbDep, ctx: ContextDep, visitor: VisitorDep) -> Response:
    """The deck in learning order, with the visitor's progress on each card (Today, ``/``,
    lists the cards too) and the sessions on the whole deck where several cards have something
    to do."""
    progress = {}
    deck = NOTHING_TO_DO
    if visitor.learner is not None:
        now = ctx.clock()
        learner_id = visitor.learner.id
        told = results_told(db=db, catalog=ctx.catalog, learner_id=learner_id, now=now)
        progress = deck_progress(
            db=db, learner_id=learner_id, now=now, catalog=ctx.catalog, told=told
        )
        deck = deck_reach(db=db, catalog=ctx.catalog, learner_id=learner_id, now=now, told=told)
    context = {
        "cards": ctx.catalog.cards(),
        "progress": progress,
        "deck": deck,
        "sizes": DEFAULT_SIZE,
        "csrf_token": visitor.csrf_token,
    }
    return render_page(request, "cards.html", context, lang=visitor.lang)


@router.get("/cards/{card_id}")
def card_page(
    request: Request, card_id: str, catalog: CatalogDep, visitor: VisitorDep, settings: SettingsDep
) -> Response:
    """A card: contents, texts, formulas, exam points with a Practise button each, the modes."""
    card = get_card(catalog, card_id)
    context = {
        "card": card,
        "csrf_token": visitor.csrf_token,
        "sizes": DEFAULT_SIZE,
    }
    return render_page(request, "card.html", context, lang=visitor.lang)


@router.get("/cards/{card_id}/run-it-yourself")
def run_it_yourself(
    request: Request, card_id: str, catalog: CatalogDep, settings: SettingsDep, visitor: VisitorDep
) -> Response:
    """The reference demo: its commands and the recorded results beside the card's formulas."""
    card = get_card(catalog, card_id)
    if "demo" not in card.attachments:
        raise NotFound(Message("This card has no reference demo."), code="no_demo")
    chart = demo_chart(cards_dir=settings.cards_dir, card=card)
    context = {
        "card": card,
        "has_chart": chart is not None,
        "chart_size": chart_size(chart) if chart is not None else None,
        "demo_commands": DEMO_COMMANDS,
        "demo": load_demo_results(cards_dir=settings.cards_dir, card=card),
    }
    return render_page(request, "run_it.html", context, lang=visitor.lang)


@router.get("/cards/{card_id}/run-it-yourself/chart.svg")
def demo_chart_image(card_id: str, catalog: CatalogDep, settings: SettingsDep) -> Response:
    """The recorded chart: memory per stage by term against the formula, peaks, time."""
    card = get_card(catalog, card_id)
    chart = (
        demo_chart(cards_dir=settings.cards_dir, card=card) if "demo" in card.attachments else None
    )
    if chart is None:
        raise NotFound(Message("No chart was recorded."), code="no_chart")
    return Response(
        chart,
        media_type="image/svg+xml",
        headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"},
    )
