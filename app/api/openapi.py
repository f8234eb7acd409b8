"""The OpenAPI description, made to match what the API really answers, for people and generators.

FastAPI documents validation failures as ``{"detail": [ ... ]}``, but this API answers every 4xx
as an RFC 9457 problem document (``application/problem+json``: type, title, status, code,
detail; 422s add ``errors``, see ``app.errors``). What the app sends around the routes is added
here, operation by operation: 401 with ``WWW-Authenticate`` where a bearer token is read, 400
where a body is read (one FastAPI cannot decode), 413 where one may be sent
(app.observability.guards), 503 with ``Retry-After`` everywhere (every
route may reach the database: app.errors), ``Retry-After`` on 429s and ``X-Request-ID`` on every
response (app.observability.request_context).

Operations are named by :data:`OPERATION_IDS` (short, camelCase, stable: a generated client's
method names), through FastAPI's ``generate_unique_id_function``.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from app.api.router import API_PREFIX
from app.observability.guards import BODY_METHODS

SECURED_BY = ("LearnerToken", "InstructorToken")

# Each operation's id, by method and path (under /api/v1). A route missing here is named from
# its function (camelCase); tests/test_api_spec.py wants every route here.
OPERATION_IDS = {
    "GET /cards": "listCards",
    "GET /cards/{card_id}": "getCard",
    "GET /cards/{card_id}/points/{point}/question": "getQuestion",
    "GET /cards/{card_id}/question": "getCardQuestion",
    "GET /cards/{card_id}/questions": "listQuestions",
    "GET /cards/{card_id}/calculator": "getCalculator",
    "POST /answers": "createAnswer",
    "POST /answers/batch": "createAnswerBatch",
    "POST /learners": "createLearner",
    "POST /auth/register": "registerAccount",
    "POST /auth/token": "createToken",
    "POST /auth/password-reset": "requestPasswordReset",
    "POST /auth/password-reset/confirm": "confirmPasswordReset",
    "GET /me": "getMe",
    "PATCH /me": "updateMe",
    "DELETE /me": "deleteMe",
    "POST /me/password": "changeMyPassword",
    "GET /me/export": "exportMyData",
    "GET /me/tokens": "listMyTokens",
    "DELETE /me/tokens/{token_id}": "revokeMyToken",
    "DELETE /me/token": "revokeThisToken",
    "GET /me/attempts": "listMyAttempts",
    "GET /me/changes": "listMyChanges",
    "GET /me/mistakes": "listMyMistakes",
    "GET /me/pitfalls": "listMyPitfalls",
    "POST /me/mistakes/dismiss": "dismissMyMistake",
    "GET /me/attempts/{attempt_id}/again": "getPractiseAgainQuestion",
    "GET /me/progress": "getMyProgress",
    "GET /me/review/due": "listMyDueReviews",
    "POST /me/sessions": "createSession",
    "GET /me/sessions/{session_id}": "getSession",
    "GET /me/sessions/{session_id}/question": "getSessionQuestion",
    "POST /me/sessions/{session_id}/answers": "createSessionAnswer",
    "POST /me/sessions/{session_id}/finish": "finishSession",
    "GET /me/sessions/{session_id}/summary": "getSessionSummary",
    "GET /me/exams": "listMyExams",
    "GET /me/today": "getMyToday",
    "GET /me/forecast": "getMyForecast",
    "GET /me/activity": "getMyActivity",
    "GET /instructor/cards": "listInstructorCards",
    "POST /instructor/cards": "createCard",
    "POST /instructor/cards/validate": "validateCard",
    "POST /instructor/cards/validations": "startCardValidation",
    "GET /instructor/validations/{job_id}": "getCardValidation",
    "GET /instructor/cards/{card_id}/draft": "getDraft",
    "PUT /instructor/cards/{card_id}/draft": "saveDraft",
    "DELETE /instructor/cards/{card_id}/draft": "discardDraft",
    "POST /instructor/cards/{card_id}/publish": "publishCard",
    "POST /instructor/cards/{card_id}/withdraw": "withdrawCard",
    "POST /instructor/cards/{card_id}/offer": "offerCard",
    "POST /instructor/cards/{card_id}/templates/{template_id}/retire": "retireTemplate",
    "GET /instructor/cards/{card_id}/versions": "listCardVersions",
    "GET /instructor/cards/{card_id}/diff": "diffCardVersions",
    "GET /instructor/cards/{card_id}/draft/diff": "diffCardDraft",
    "GET /instructor/cards/{card_id}/audit": "listCardAudit",
    "GET /instructor/cards/{card_id}/preview": "previewTemplate",
    "GET /instructor/cards/{card_id}/export": "exportCard",
    "GET /instructor/cards/{card_id}/export/moodle-calculated": "planMoodleCalculated",
    "POST /instructor/cards/{card_id}/import": "importQuestions",
    "GET /instructor/cards/{card_id}/analytics": "getCardAnalytics",
}


def operation_id(route: APIRoute) -> str:
    """The route's operationId (FastAPI's ``generate_unique_id_function``)."""
    (method, *_) = sorted(route.methods or ("GET",))
    known = OPERATION_IDS.get(f"{method} {route.path.removeprefix(API_PREFIX)}")
    if known is not None:
        return known
    first, *rest = route.name.split("_")
    return first + "".join(word.title() for word in rest)


def header(description: str, schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"description": description, "required": required, "schema": schema}


HEADERS = {
    "X-Request-ID": header(
        "The request's id (the X-Request-ID sent, when it is a sane one, else a fresh one); "
        "quote it when reporting a problem.",
        {"type": "string"},
    ),
    "Retry-After": header("Seconds to wait before trying again.", {"type": "integer"}),
    "WWW-Authenticate": header("The scheme to authenticate with: Bearer.", {"type": "string"}),
}
PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemPublic"}}}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/headers/{name}"}


UNAUTHORIZED = {
    "description": "Missing, unknown, revoked or malformed bearer token.",
    "headers": {"WWW-Authenticate": ref("WWW-Authenticate")},
    "content": PROBLEM,
}
UNREADABLE = {
    "description": "A body that cannot be read (JSON that is not UTF-8, say).",
    "content": PROBLEM,
}
OPTIONAL_UNAUTHORIZED = "An unknown, revoked or malformed bearer token (none is fine here)."
# What FastAPI writes for a response declared without a description of its own.
GENERIC_DESCRIPTIONS = ("Unauthorized", "Additional Response")
TOO_LARGE = {
    "description": "The body is over this route's limit (named in `limit_bytes`); the "
    "connection is closed.",
    "content": PROBLEM,
}
UNAVAILABLE = {
    "description": "The database is busy or cannot be reached (busy, database_unavailable): "
    "send the request again after Retry-After seconds.",
    "headers": {"Retry-After": ref("Retry-After")},
    "content": PROBLEM,
}

VALIDATION_ERROR = {
    "title": "HTTPValidationError",
    "type": "object",
    # errors: on a request that failed validation (invalid_request); a 422 of another code
    # (unstorable_text, say) has none.
    "required": ["type", "title", "status", "code", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "code": {"type": "string"},
        "detail": {"type": "string", "description": "What was wrong, in plain words."},
        "errors": {
            "type": "array",
            "items": {"$ref": "#/components/schemas/ValidationProblem"},
            "description": "invalid_request: each value at fault.",
        },
    },
}
VALIDATION_PROBLEM = {
    "title": "ValidationProblem",
    "type": "object",
    "required": ["loc", "type", "message"],
    "properties": {
        "loc": {"type": "array", "items": {"type": "string"}, "title": "Loc"},
        "type": {"type": "string", "title": "Type"},
        "message": {"type": "string", "title": "Message"},
    },
}


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            app.openapi_schema = describe_real_responses(spec)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def describe_real_responses(spec: dict[str, Any]) -> dict[str, Any]:
    components = spec.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["HTTPValidationError"] = VALIDATION_ERROR
    schemas["ValidationProblem"] = VALIDATION_PROBLEM
    schemas.pop("ValidationError", None)
    components["headers"] = HEADERS
    for path, operations in spec.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status, response in responses.items():
                content = response.get("content", {})
                if status.startswith("4") and "application/json" in content:
                    content["application/problem+json"] = content.pop("application/json")
            security = operation.get("security") or []
            if any(name in item for item in security for name in SECURED_BY):
                # A route's own description of its 401 (a password asked again) is kept.
                declared = responses.get("401", {}).get("description")
                responses["401"] = {**responses.get("401", {}), **copy.deepcopy(UNAUTHORIZED)}
                if {} in security:  # the token is optional
                    responses["401"]["description"] = OPTIONAL_UNAUTHORIZED
                elif declared not in (None, *GENERIC_DESCRIPTIONS):
                    responses["401"]["description"] = declared
            if "requestBody" in operation:
                responses.setdefault("400", copy.deepcopy(UNREADABLE))
            if method.upper() in BODY_METHODS and path.startswith(API_PREFIX):
                responses.setdefault("413", copy.deepcopy(TOO_LARGE))
            responses.setdefault("503", copy.deepcopy(UNAVAILABLE))
            for status, name in (("401", "WWW-Authenticate"), ("429", "Retry-After")):
                if status in responses:  # app.errors sends it with every such answer
                    responses[status].setdefault("headers", {})[name] = ref(name)
            for response in responses.values():
                response.setdefault("headers", {})["X-Request-ID"] = ref("X-Request-ID")
            operation["responses"] = dict(sorted(responses.items()))
    return spec
