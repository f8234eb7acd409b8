"""Answering questions, and the learner's mistakes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from app.api import present
from app.deps import ApiLearner, CardsDep, LangQuery, SessionDep, SignerDep
from app.schemas import AnswerCreate, AnswerPublic, ErrorPublic, MistakePublic, PitfallCountPublic
from app.services.mistakes import MAX_OFFSET, MAX_PAGE, count_mistakes_by_pitfall, list_mistakes
from app.services.practice import answer_question

router = APIRouter(tags=["practice"])

ANSWER_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorPublic, "description": "Invalid or tampered question token."},
    401: {"model": ErrorPublic, "description": "Unknown or revoked bearer token."},
    409: {
        "model": ErrorPublic,
        "description": "Question expired, or client_answer_id reused for a different answer.",
    },
    422: {"model": ErrorPublic, "description": "Malformed body or a choice the question lacks."},
}


@router.post("/answers", response_model=AnswerPublic, responses=ANSWER_ERRORS)
def create_answer(
    body: AnswerCreate,
    session: SessionDep,
    cards: CardsDep,
    signer: SignerDep,
    learner: ApiLearner,
    lang: LangQuery = "en",
) -> AnswerPublic:
    """Grade a choice and record the attempt; resending a client_answer_id replays the result."""
    outcome = answer_question(
        session=session,
        cards=cards,
        signer=signer,
        learner=learner,
        token=body.token,
        choice_id=body.choice_id,
        client_answer_id=body.client_answer_id,
    )
    return present.answer(outcome, lang)


@router.get("/me/mistakes", response_model=list[MistakePublic])
def read_my_mistakes(
    session: SessionDep,
    cards: CardsDep,
    learner: ApiLearner,
    lang: LangQuery = "en",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    # Bounded so that it fits a 64-bit database integer (SQLite and PostgreSQL alike).
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> list[MistakePublic]:
    """The current learner's wrong attempts, newest first, with the question regenerated."""
    mistakes = list_mistakes(
        session=session, cards=cards, learner_id=learner.id, limit=limit, offset=offset
    )
    return [present.mistake(item, lang) for item in mistakes]


@router.get("/me/pitfalls", response_model=list[PitfallCountPublic])
def read_my_pitfalls(
    session: SessionDep, cards: CardsDep, learner: ApiLearner, lang: LangQuery = "en"
) -> list[PitfallCountPublic]:
    """How often the current learner fell for each pitfall, most frequent first."""
    counts = count_mistakes_by_pitfall(session=session, cards=cards, learner_id=learner.id)
    return [present.pitfall_count(item, lang) for item in counts]
