"""A response body serialized once, straight from the response model's fields.

A route that returns a pydantic model has FastAPI validate it against ``response_model`` again
and then serialize it: on the question route that second pass cost ≈0.1 ms a request, and even
building the model once cost 19 of the 28 µs spent presenting a question. The hot routes
(a question, an answer) serialize the mapping their model is built from (app.api.present's
``*_json``: the same bytes, tests compare them) and return it as a :class:`JSONBytesResponse`;
``response_model`` still documents the body in the OpenAPI document.
"""

from __future__ import annotations

from starlette.responses import Response


class JSONBytesResponse(Response):
    """A JSON body serialized already."""

    media_type = "application/json"
