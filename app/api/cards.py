"""Cards and questions."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from app.api import present
from app.deps import CardsDep, LangQuery, SettingsDep, SignerDep
from app.schemas import CardPublic, CardSummaryPublic, ErrorPublic, QuestionPublic
from app.services.cards import load_demo_results
from app.services.questions import MAX_SEED, get_card, new_question

router = APIRouter(tags=["cards"])

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "Unknown card or exam point."}
}
CardId = Annotated[
    str, Path(max_length=100, description="The card's id, e.g. zero-memory-offload.")
]
PointNumber = Annotated[
    int, Path(description="The exam point's number (1..n); unknown numbers are 404.")
]
Seed = Annotated[
    int | None,
    Query(ge=0, le=MAX_SEED, description="Variant seed; the same seed gives the same question."),
]


@router.get("/cards", response_model=list[CardSummaryPublic])
def list_cards(cards: CardsDep, lang: LangQuery = "en") -> list[CardSummaryPublic]:
    """Every card with its exam points."""
    return [present.card_summary(card, lang) for card in cards.values()]


@router.get("/cards/{card_id}", response_model=CardPublic, responses=NOT_FOUND)
def read_card(
    card_id: CardId, cards: CardsDep, settings: SettingsDep, lang: LangQuery = "en"
) -> CardPublic:
    """The whole card: texts, formulas (LaTeX), exam points, the reference demo."""
    card = get_card(cards, card_id)
    demo = load_demo_results(cards_dir=settings.cards_dir, card=card)
    return present.card_detail(card, demo, lang)


@router.get(
    "/cards/{card_id}/points/{number}/question", response_model=QuestionPublic, responses=NOT_FOUND
)
def read_point_question(
    card_id: CardId,
    number: PointNumber,
    cards: CardsDep,
    signer: SignerDep,
    seed: Seed = None,
    lang: LangQuery = "en",
) -> QuestionPublic:
    """A question on one exam point (random seed unless given); nothing in it reveals the answer."""
    item = new_question(cards=cards, signer=signer, card_id=card_id, point=number, seed=seed)
    return present.question(item, lang)


@router.get("/cards/{card_id}/question", response_model=QuestionPublic, responses=NOT_FOUND)
def read_card_question(
    card_id: CardId, cards: CardsDep, signer: SignerDep, seed: Seed = None, lang: LangQuery = "en"
) -> QuestionPublic:
    """A question on a random exam point of the card."""
    item = new_question(cards=cards, signer=signer, card_id=card_id, seed=seed)
    return present.question(item, lang)
