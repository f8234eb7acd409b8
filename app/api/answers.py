"""Answering questions, one at a time or in offline batches."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from app.api import present
from app.api.responses import JSONBytesResponse
from app.deps import (
    BEARER_SECURITY,
    ApiLang,
    ApiLearner,
    ContextDep,
    LearnerCall,
    LearnerCallDep,
    SessionDep,
    get_learner_call,
    hot_call,
)
from app.practice.answers import answer_question, answer_question_grouped
from app.problems import Problem
from app.routing import HotRoute, query_values, read_body, read_model, refuse
from app.schemas import (
    AnswerBatchCreate,
    AnswerBatchPublic,
    AnswerCreate,
    AnswerPublic,
    BatchItemProblem,
    ProblemPublic,
)

router = APIRouter(tags=["practice"])

ANSWER_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ProblemPublic, "description": "Invalid or tampered question token."},
    401: {"model": ProblemPublic, "description": "Missing, unknown or revoked bearer token."},
    403: {
        "model": ProblemPublic,
        "description": "token_not_yours: the question was issued to another learner.",
    },
    409: {
        "model": ProblemPublic,
        "description": "question_expired, question_retired, exam_over or answer_id_reused.",
    },
    422: {"model": ProblemPublic, "description": "Malformed body or a choice the question lacks."},
}


def _answer(body: AnswerCreate, session: SessionDep, ctx: ContextDep, learner: ApiLearner):  # type: ignore[no-untyped-def]
    return answer_question(
        session=session,
        ctx=ctx,
        learner=learner,
        token=body.token,
        choice_id=body.choice_id,
        client_answer_id=body.client_answer_id,
        duration_ms=body.duration_ms,
        answered_at=body.answered_at,
        now=ctx.clock(),
    )


@router.post(
    "/answers", response_model=AnswerPublic, responses=ANSWER_ERRORS, openapi_extra=BEARER_SECURITY
)
async def create_answer(body: AnswerCreate, request: Request, call: LearnerCallDep) -> Response:
    """Grade a choice and record the attempt; resending a client_answer_id replays the result.

    Answered 200 only once the attempt is committed (answers arriving together share one
    transaction: group commit, see app.practice.answers.AnswerWriter)."""
    return await answer_response(request, call, body)


async def answer_response(request: Request, call: LearnerCall, body: AnswerCreate) -> Response:
    """The graded answer as JSON, once its attempt is committed."""
    ctx = call.ctx
    outcome = await answer_question_grouped(
        state=request.app.state,
        ctx=ctx,
        learner=call.learner,
        token=body.token,
        choice_id=body.choice_id,
        client_answer_id=body.client_answer_id,
        duration_ms=body.duration_ms,
        answered_at=body.answered_at,
        now=ctx.clock(),
    )
    return JSONBytesResponse(present.answer_json(outcome, call.lang))


async def create_answer_hot(request: Request) -> Response:
    """create_answer served first (app.routing), in FastAPI's order: the body read, then the
    dependencies, then the body validated."""
    body = await read_body(request)
    errors: list[Any] = []
    query = query_values(request.scope["query_string"])
    call = await hot_call(get_learner_call, request, query, errors)
    answer = read_model(AnswerCreate, body, errors)
    if errors or call is None or answer is None:
        raise refuse(errors, body)
    return await answer_response(request, call, answer)


HOT_ROUTES = (
    HotRoute("/answers", create_answer_hot, method="POST", documented_by="create_answer"),
)


@router.post("/answers/batch", response_model=AnswerBatchPublic, responses=ANSWER_ERRORS)
def create_answers(
    body: AnswerBatchCreate,
    session: SessionDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
) -> AnswerBatchPublic:
    """Up to 500 answers made offline: one result per item, in order; a bad item never loses the
    others, and each item is idempotent by its client_answer_id."""
    results: list[AnswerPublic | BatchItemProblem] = []
    for raw in body.answers:
        try:
            item = AnswerCreate.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "item"
            results.append(
                BatchItemProblem(
                    status=422, code="invalid_request", detail=f"{where}: {first.get('msg')}"
                )
            )
            continue
        try:
            results.append(present.answer(_answer(item, session, ctx, learner), lang))
        except Problem as problem:
            session.rollback()
            results.append(
                BatchItemProblem(
                    status=problem.status_code, code=problem.code, detail=problem.text.get(lang)
                )
            )
    return AnswerBatchPublic(results=results)
