"""A response body serialized once, by the model's own serializer.

A route that returns a pydantic model has FastAPI validate it against ``response_model`` again
and then serialize it: on the question route that second pass cost ≈0.1 ms a request. The
hot routes build their response model themselves (app.api.present), so they return it as a
:class:`ModelResponse`, or their body serialized straight from the model's fields
(:class:`JSONBytesResponse`); ``response_model`` still documents the body in the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel
from starlette.responses import Response


class ModelResponse(Response):
    media_type = "application/json"

    def __init__(
        self, model: BaseModel, status_code: int = 200, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(model.__pydantic_serializer__.to_json(model), status_code, headers)


class JSONBytesResponse(Response):
    """A JSON body serialized already (app.api.present's ``*_json`` presenters)."""

    media_type = "application/json"
