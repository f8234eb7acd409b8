"""A response body serialized once, straight from the response model's fields; conditional GETs
(``ETag`` and 304) for the bodies an app polls; ``If-Match`` read for a conditional write.

A route that returns a pydantic model has FastAPI validate it against ``response_model`` again
and then serialize it: on the question route that second pass cost ≈0.1 ms a request, and even
building the model once cost 19 of the 28 µs spent presenting a question. The hot routes
(a question, an answer) serialize the mapping their model is built from (app.api.present's
``*_json``: the same bytes, tests compare them) and return it as a :class:`JSONBytesResponse`;
``response_model`` still documents the body in the OpenAPI document.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response


class JSONBytesResponse(Response):
    """A JSON body serialized already."""

    media_type = "application/json"


def not_modified(
    request: Request, response: Response, body: BaseModel, *, vary: str, private: bool = False
) -> Response | None:
    """Conditional GET for ``body``: its ``ETag`` (a digest of the JSON it serializes to) set
    on ``response``; a 304 without a body when ``If-None-Match`` names it, else None (send the
    body). ``private``: the body is one learner's (``Cache-Control: private``)."""
    etag = '"' + hashlib.sha256(body.model_dump_json().encode()).hexdigest()[:32] + '"'
    headers = {
        "ETag": etag,
        "Vary": vary,
        "Cache-Control": "private, no-cache" if private else "no-cache",
    }
    if _none_match(request.headers.get("if-none-match", ""), etag):
        return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    return None


def _none_match(header: str, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag``: ``*``, or in its list compared weakly (RFC 9110
    13.1.2: ``W/"x"`` matches ``"x"``, as a proxy that compresses marks it)."""
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or etag in [t.removeprefix("W/") for t in tags]


def conditional_responses(what: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI responses of a conditional GET: the 200's ``ETag`` and the 304."""
    return {
        200: {
            "headers": {
                "ETag": {
                    "description": f"{what} as shown; send it back in If-None-Match.",
                    "required": True,
                    "schema": {"type": "string"},
                },
                "Cache-Control": {"description": "no-cache", "schema": {"type": "string"}},
            }
        },
        304: {
            "description": "Not modified: If-None-Match named the current ETag (no body).",
            "headers": {"ETag": {"required": True, "schema": {"type": "string"}}},
        },
    }


def if_match(header: str | None, current: str) -> str | None:
    """The revision a write with ``If-Match: header`` is based on: None without the header or
    with ``*`` (no condition); ``current`` when the header names it (``"current"``, compared
    strongly: RFC 9110 13.1.1, a weak tag never matches), else "" (no revision: refused)."""
    if header is None or header.strip() == "*":
        return None
    return current if f'"{current}"' in [t.strip() for t in header.split(",")] else ""
