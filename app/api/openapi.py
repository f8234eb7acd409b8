"""The OpenAPI description, made to match what the API really answers.

FastAPI documents validation failures as ``{"detail": [ ... ]}``, but this API answers every 4xx
as ``{"detail": "<message>"}`` (422s add ``errors``, see ``app.errors``); the learner token is
optional on routes that fall back to the guest cookie, and such routes can answer 401 for a bad
token. Clients generated from the description then handle the real responses.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

SCHEME = "LearnerToken"
# Operations that need a bearer token; every other secured operation also accepts none.
BEARER_ONLY = {("/api/v1/me/token", "delete")}

VALIDATION_ERROR = {
    "title": "HTTPValidationError",
    "type": "object",
    "required": ["detail", "errors"],
    "properties": {
        "detail": {
            "type": "string",
            "title": "Detail",
            "description": "What was wrong, in plain words.",
        },
        "errors": {
            "type": "array",
            "title": "Errors",
            "items": {"$ref": "#/components/schemas/ValidationProblem"},
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
UNAUTHORIZED = {
    "description": "Unknown, revoked or malformed bearer token.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorPublic"}}},
}
ERROR_PUBLIC = {
    "title": "ErrorPublic",
    "type": "object",
    "required": ["detail"],
    "properties": {
        "detail": {
            "type": "string",
            "title": "Detail",
            "description": "What was wrong, in plain words.",
        }
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
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas["HTTPValidationError"] = VALIDATION_ERROR
    schemas["ValidationProblem"] = VALIDATION_PROBLEM
    schemas.pop("ValidationError", None)
    schemas.setdefault("ErrorPublic", ERROR_PUBLIC)
    for path, operations in spec.get("paths", {}).items():
        for method, operation in operations.items():
            security = operation.get("security")
            if not security or not any(SCHEME in item for item in security):
                continue
            operation["responses"].setdefault("401", UNAUTHORIZED)
            if (path, method) not in BEARER_ONLY:
                operation["security"] = [{SCHEME: []}, {}]
    return spec
