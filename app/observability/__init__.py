"""Running in production: logs, metrics, request ids, health and readiness, guards.

One concern a module:

* :mod:`app.observability.logs`: JSON lines on stderr (python-json-logger), the request id on
  every line, one ``app.access`` line a request instead of uvicorn's.
* :mod:`app.observability.metrics`: Prometheus metrics and ``/metrics`` behind a token.
* :mod:`app.observability.request_context`: the outermost middleware: request ids, the access
  line, the latency histogram, ``/metrics``, the headers on every response.
* :mod:`app.observability.health`: ``/readyz`` and the start-up gate.
* :mod:`app.observability.guards`: trusted hosts and the request-body limits (the framework's).

``create_app`` calls :func:`install_observability` and
:func:`app.observability.guards.install_guards`.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI

from app.config import Settings
from app.db import engine_health
from app.observability.health import install_readiness
from app.observability.logs import configure_logging, replace_uvicorn_access_log
from app.observability.metrics import Metrics, count_stored_answers
from app.observability.request_context import RequestContextMiddleware


def install_observability(
    app: FastAPI, settings: Settings, *, response_headers: Sequence[tuple[bytes, bytes]] = ()
) -> Metrics:
    """Outermost: logs, request ids, metrics (database errors, answers), ``/readyz``, and
    ``response_headers`` on every response that does not set them itself."""
    configure_logging(settings)
    metrics = Metrics()
    app.state.metrics = metrics
    engine_health(app.state.engine).listeners.append(
        lambda kind: metrics.database_errors.labels(kind).inc()
    )
    count_stored_answers(app.state.sessionmaker, metrics)
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    app.add_middleware(
        RequestContextMiddleware,
        metrics=metrics,
        metrics_token=token or None,
        access_log=replace_uvicorn_access_log(),
        response_headers=response_headers,
    )
    install_readiness(app)
    return metrics
