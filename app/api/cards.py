"""Cards and questions (public: no token needed to read them).

A question fetched with a bearer token is bound to that learner: answering its token as anyone
else is refused (403 ``token_not_yours``). One fetched without a token is unbound: any learner
may answer it (see app.practice.questions.check_token_owner).

The question routes are ``async``: generating and signing a variant is CPU work with no blocking
I/O, so they skip the threadpool (the bearer token is read from an in-process cache, the
database is only asked in the threadpool when the cache misses).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from app.api import present
from app.api.deck_schemas import CardSummaryPublic
from app.api.problem_schemas import ProblemPublic
from app.api.responses import JSONBytesResponse, conditional_responses, not_modified
from app.catalog.demo import load_demo_results
from app.deps import (
    LANG_VALUES,
    OPTIONAL_BEARER,
    ApiCall,
    ApiCallDep,
    ApiLang,
    CatalogDep,
    ContextDep,
    DbDep,
    OptionalApiLearner,
    SettingsDep,
    SignerDep,
    get_api_call,
    hot_call,
)
from app.domain.catalog import Catalog
from app.domain.identity import MAX_SEED
from app.practice.choosing import question_batch
from app.practice.mistakes import results_told
from app.practice.questions import get_card, new_question
from app.review.service import CardProgress, deck_progress
from app.routing import AllValues, HotRoute, Values, query_values, refuse
from app.schemas import (
    CardPublic,
    QuestionBatchPublic,
    QuestionMode,
    QuestionPublic,
)

router = APIRouter(tags=["cards"])

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ProblemPublic, "description": "Unknown card or exam point."}
}
CardId = Annotated[
    str, Path(max_length=100, description="The card's id, e.g. zero-memory-offload.")
]
PointRef = Annotated[
    str,
    Path(
        max_length=100,
        description="The exam point's slug (e.g. optimizer-memory); its number is accepted too.",
    ),
]
Seed = Annotated[
    int | None,
    Query(ge=0, le=MAX_SEED, description="Variant seed; the same seed gives the same question."),
]
Mode = Annotated[
    QuestionMode | None,
    Query(
        description="typed: the same question (same seed, parameters and key) without its "
        "choices, to answer with a value and a unit (its token says so: a choice sent for it is "
        "refused, 422 answer_form); a statement keeps its choices. Default: choices."
    ),
]
MAX_BATCH = 50
NOTHING_YET = CardProgress(0, 0, 0)


@router.get("/cards", response_model=list[CardSummaryPublic], openapi_extra=OPTIONAL_BEARER)
def list_cards(
    db: DbDep, ctx: ContextDep, lang: ApiLang, learner: OptionalApiLearner
) -> list[CardSummaryPublic]:
    """The deck: every card (its latest version) with its exam points, in learning order (a
    card after its prerequisites); with a bearer token, the learner's progress on each."""
    cards = ctx.catalog.cards()
    if learner is None:
        return [present.card_summary(card, lang) for card in cards]
    now = ctx.clock()
    told = results_told(db=db, catalog=ctx.catalog, learner_id=learner.id, now=now)
    mine = deck_progress(db=db, learner_id=learner.id, now=now, catalog=ctx.catalog, told=told)
    return [present.card_summary(card, lang, mine.get(card.id, NOTHING_YET)) for card in cards]


CARD_RESPONSES: dict[int | str, dict[str, Any]] = {
    **conditional_responses("The card's version (its language included)"),
    **NOT_FOUND,
}


@router.get("/cards/{card_id}", response_model=CardPublic, responses=CARD_RESPONSES)
def read_card(
    card_id: CardId,
    request: Request,
    response: Response,
    catalog: CatalogDep,
    settings: SettingsDep,
    lang: ApiLang,
) -> Any:
    """The whole card: texts, formulas (LaTeX and MathML), exam points, the reference demo.

    Sends an ``ETag``; ``If-None-Match`` with it answers 304 while the card is unchanged.
    """
    card = get_card(catalog, card_id)
    demo = load_demo_results(cards_dir=settings.cards_dir, card=card)
    body = present.card_detail(card, demo, lang)
    return not_modified(request, response, body, vary="Accept-Language") or body


@router.get(
    "/cards/{card_id}/points/{point}/question",
    response_model=QuestionPublic,
    responses=NOT_FOUND,
    openapi_extra=OPTIONAL_BEARER,
)
async def read_point_question(
    card_id: CardId, point: PointRef, call: ApiCallDep, seed: Seed = None, mode: Mode = None
) -> Response:
    """A question on one exam point (random seed unless given); nothing in it reveals the key.

    With a bearer token the question's token is bound to that learner."""
    return question_response(call, card_id, point, seed, mode)


@router.get(
    "/cards/{card_id}/question",
    response_model=QuestionPublic,
    responses=NOT_FOUND,
    openapi_extra=OPTIONAL_BEARER,
)
async def read_card_question(
    card_id: CardId, call: ApiCallDep, seed: Seed = None, mode: Mode = None
) -> Response:
    """A question on a random exam point of the card (bound to the bearer token's learner)."""
    return question_response(call, card_id, None, seed, mode)


def question_response(
    call: ApiCall, card_id: str, point: str | None, seed: int | None, mode: str | None = None
) -> Response:
    """A new question on the exam point (a random one when None), as JSON (``mode`` typed:
    without its choices)."""
    catalog = call.ctx.catalog
    item = new_question(
        catalog=catalog,
        signer=call.ctx.signer,
        card_id=card_id,
        point=point,
        seed=seed,
        learner_id=call.learner.id if call.learner else None,
        typed=mode == "typed",
    )
    return JSONBytesResponse(
        present.question_json(item, call.lang, _number(catalog, item), mode == "typed")
    )


# The two question routes served first, as read_point_question and read_card_question document
# them (app.routing): FastAPI's dependency solver would double a question's cost.
POINT_PATH = Values("path", card_id=(CardId, ...), point=(PointRef, ...))
CARD_PATH = Values("path", card_id=(CardId, ...))
SEED_QUERY = Values("query", seed=(Seed, None), mode=(Mode, None))


class QuestionHot:
    """A question route served first: its values (a point's or the card's path, the seed, the
    language) read as its documented operation reads them."""

    def __init__(self, path: Values) -> None:
        self.path = path
        self.values = AllValues(LANG_VALUES, path, SEED_QUERY)

    async def __call__(self, request: Request) -> Response:
        query = query_values(request.scope["query_string"])
        values = self.values.valid({**query, **request.scope["path_params"]})
        if values is None:  # FastAPI's errors, in its order: the dependency's values first
            errors: list[Any] = []
            await hot_call(get_api_call, request, query, errors)
            self.path.read(request.path_params, errors)
            SEED_QUERY.read(query, errors)
            raise refuse(errors)
        call = await get_api_call(request, values.get("lang"))
        return question_response(
            call, values["card_id"], values.get("point"), values.get("seed"), values.get("mode")
        )


HOT_ROUTES = (
    HotRoute(
        "/cards/{card_id}/points/{point}/question",
        QuestionHot(POINT_PATH),
        method="GET",
        documented_by="read_point_question",
    ),
    HotRoute(
        "/cards/{card_id}/question",
        QuestionHot(CARD_PATH),
        method="GET",
        documented_by="read_card_question",
    ),
)


@router.get(
    "/cards/{card_id}/questions",
    response_model=QuestionBatchPublic,
    responses=NOT_FOUND,
    openapi_extra=OPTIONAL_BEARER,
)
def read_card_questions(
    card_id: CardId,
    catalog: CatalogDep,
    signer: SignerDep,
    lang: ApiLang,
    learner: OptionalApiLearner,
    db: DbDep,
    count: Annotated[int, Query(ge=1, le=MAX_BATCH)] = 10,
    point: Annotated[str | None, Query(max_length=100)] = None,
    mode: Mode = None,
) -> QuestionBatchPublic:
    """Several questions at once, for offline use; each carries its ``expires_at`` (bound to
    the bearer token's learner).

    They go round the card's templates (or the exam point's): none comes twice before every one
    has come once. With a bearer token, none repeats a key the learner saw in their last 10
    answers, and a template among those comes with new numbers."""
    items = question_batch(
        db=db,
        catalog=catalog,
        signer=signer,
        card_id=card_id,
        count=count,
        point=point,
        learner_id=learner.id if learner else None,
        typed=mode == "typed",
    )
    return QuestionBatchPublic(
        items=[
            present.question(item, lang, _number(catalog, item), mode == "typed") for item in items
        ]
    )


def _number(catalog: Catalog, item: Any) -> int | None:
    card = catalog.latest(item.variant.id.card_id)
    found = card.point_by_slug(item.variant.id.point) if card else None
    return found.number if found else None
