"""The OpenAPI description, made to match what the API really answers.

FastAPI documents validation failures as ``{"detail": [ ... ]}``, but this API answers every 4xx
as an RFC 9457 problem document (``application/problem+json``: type, title, status, code,
detail; 422s add ``errors``, see ``app.errors``), and secured routes can answer 401.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

SCHEME = "LearnerToken"

VALIDATION_ERROR = {
    "title": "HTTPValidationError",
    "type": "object",
    "required": ["type", "title", "status", "code", "detail", "errors"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "code": {"type": "string"},
        "detail": {"type": "string", "description": "What was wrong, in plain words."},
        "errors": {"type": "array", "items": {"$ref": "#/components/schemas/ValidationProblem"}},
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
    "description": "Missing, unknown, revoked or malformed bearer token.",
    "content": {
        "application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemPublic"}}
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
    for operations in spec.get("paths", {}).values():
        for operation in operations.values():
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if status.startswith("4") and "application/json" in content:
                    content["application/problem+json"] = content.pop("application/json")
            security = operation.get("security")
            if security and any(SCHEME in item for item in security):
                operation["responses"].setdefault("401", UNAUTHORIZED)
    return spec
