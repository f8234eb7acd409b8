"""Answering questions, one at a time or in offline batches."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from app.api import present
from app.api.batch_schemas import (
    AnswerBatchCreate,
    AnswerBatchProblemPublic,
    AnswerBatchPublic,
    AnswerBatchResult,
)
from app.api.problem_schemas import AnswerConflictPublic, ProblemPublic
from app.api.responses import JSONBytesResponse
from app.deps import (
    BEARER_SECURITY,
    ApiLang,
    ApiLearner,
    ContextDep,
    DbDep,
    LearnerCall,
    LearnerCallDep,
    get_learner_call,
    hot_call,
)
from app.domain.messages import Message
from app.field_errors import field_problem
from app.practice.answers import (
    Submission,
    answer_question_async,
    answer_questions,
    answer_writer,
)
from app.practice.storing import AnswerOutcome
from app.problems import InvalidAnswer, Problem
from app.routing import HotRoute, query_values, read_body, read_model, refuse
from app.schemas import AnswerCreate, AnswerResultPublic

router = APIRouter(tags=["practice"])

ANSWER_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ProblemPublic, "description": "Invalid or tampered question token."},
    401: {"model": ProblemPublic, "description": "Missing, unknown or revoked bearer token."},
    403: {
        "model": ProblemPublic,
        "description": "token_not_yours: the question was issued to another learner (questions "
        "issued to an app install or a guest before it signed in are the account's).",
    },
    409: {
        "model": AnswerConflictPublic,
        "description": "question_expired, question_retired, answer_id_reused, or exam_over / "
        "session_over: the session ended before this answer (not counted; summary_url says "
        "where its results are).",
    },
    422: {
        "model": ProblemPublic,
        "description": "Malformed body, a choice the question lacks, or an answer that cannot be "
        "graded as sent (invalid_value, invalid_unit, not_typeable, answer_form: the problem's "
        "`field` names the field).",
    },
}


@router.post(
    "/answers",
    response_model=AnswerResultPublic,
    responses=ANSWER_ERRORS,
    openapi_extra=BEARER_SECURITY,
)
async def create_answer(body: AnswerCreate, request: Request, call: LearnerCallDep) -> Response:
    """Grade a choice (or a typed value and unit) and record the attempt; resending a
    client_answer_id replays the result. In an exam that is still running the answer is stored
    and acknowledged without its result (``AnswerStoredPublic``: ``feedback`` null), which shows
    once the exam ends.

    Answered 200 only once the attempt is committed (answers arriving together share one
    transaction: group commit, see app.practice.answers.AnswerWriter)."""
    return await answer_response(request, call, body)


async def answer_response(request: Request, call: LearnerCall, body: AnswerCreate) -> Response:
    """The graded answer as JSON, once its attempt is committed."""
    outcome = await answer_question_async(
        state=request.app.state, ctx=call.ctx, learner=call.learner, submission=_submission(body)
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


BATCH_ERRORS: dict[int | str, dict[str, Any]] = {
    422: {
        "model": ProblemPublic,
        "description": "A body that is not a list of 1 to 500 items (a bad item is that item's "
        "result, not the batch's 422).",
    },
}


@router.post("/answers/batch", response_model=AnswerBatchPublic, responses=BATCH_ERRORS)
def create_answers(
    request: Request,
    body: AnswerBatchCreate,
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
    lang: ApiLang,
) -> AnswerBatchPublic:
    """Up to 500 answers made offline: one result per item, in order, each carrying the item's
    client_answer_id and its ``outcome`` (stored; withheld: in a running exam, its result told
    when the exam ends; or problem: what ``POST /answers`` would have refused it with). A bad item never loses the others, and each item is idempotent by its
    client_answer_id: sending a batch again replays its stored results."""
    results: list[AnswerBatchResult | None] = []
    submissions = []
    for raw in body.answers:
        try:
            submissions.append(_submission(AnswerCreate.model_validate(raw)))
            results.append(None)  # its result comes from the writer
        except ValidationError as exc:
            first = exc.errors()[0]
            sent_id = raw.get("client_answer_id") if isinstance(raw, dict) else None
            results.append(
                AnswerBatchProblemPublic(
                    outcome="problem",
                    client_answer_id=sent_id if isinstance(sent_id, str) else None,
                    status=422,
                    code="invalid_request",
                    detail=Message(
                        "invalid request: %(problems)s",
                        problems=field_problem(first, lang, outside="item"),
                    ).get(lang),
                )
            )
    answered = iter(
        zip(
            submissions,
            answer_questions(
                db=db,
                writer=answer_writer(request.app.state),
                ctx=ctx,
                learner=learner,
                submissions=submissions,
            ),
            strict=True,
        )
    )
    return AnswerBatchPublic(
        results=[result or _item_result(*next(answered), lang) for result in results]
    )


def _submission(body: AnswerCreate) -> Submission:
    return Submission(
        body.token,
        body.choice_id,
        body.client_answer_id,
        body.duration_ms,
        body.answered_at,
        body.value,
        body.unit,
    )


def _item_result(
    submission: Submission, result: AnswerOutcome | Problem, lang: str
) -> AnswerBatchResult:
    if isinstance(result, Problem):
        return AnswerBatchProblemPublic(
            outcome="problem",
            client_answer_id=submission.client_answer_id,
            status=result.status_code,
            code=result.code,
            detail=result.text.get(lang),
            field=result.field if isinstance(result, InvalidAnswer) else None,
            summary_url=result.members.get("summary_url"),
        )
    return present.batch_result(result, lang)
