"""Prometheus metrics (``prometheus-client``) and ``/metrics``.

``infracards_http_request_duration_seconds`` (a histogram by method, route template and status),
``infracards_answers_stored_total`` (attempts committed), ``infracards_database_errors_total``
(by kind, see :func:`app.db.failure_kind`). ``/metrics`` is not on any router: the request-context
middleware serves it (:func:`serve_metrics`), only to ``Authorization: Bearer <METRICS_TOKEN>``,
and it is a 404 while ``METRICS_TOKEN`` is unset (a loopback rule would let everything behind a
local reverse proxy in). With several workers set ``PROMETHEUS_MULTIPROC_DIR`` to an empty
folder: each scrape then adds up every worker.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

import anyio
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.db import ATTEMPTS_PENDING
from app.errors import problem_response

METRICS_PATH = "/metrics"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """This app's Prometheus metrics, in a registry of its own (several apps in one test run)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Histogram(
            "infracards_http_request_duration_seconds",
            "Time to answer an HTTP request, by method, route template and status.",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.answers = Counter(
            "infracards_answers_stored",
            "Answers (attempts) committed to the database.",
            registry=self.registry,
        )
        self.database_errors = Counter(
            "infracards_database_errors",
            "Database failures seen (busy, timeout, unreachable, disk_full, read_only, unavailable).",
            ["kind"],
            registry=self.registry,
        )

        # Each (method, route, status) series, looked up once: labels() checks and locks.
        self._request_series: dict[tuple[str, str, int], Any] = {}

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """One request's latency (method from a bounded set, route a template: bounded labels)."""
        series = self._request_series.get((method, route, status))
        if series is None:
            series = self.requests.labels(method, route, str(status))
            self._request_series[(method, route, status)] = series
        series.observe(seconds)

    def exposition(self) -> bytes:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest(self.registry)


def multiprocess_folder_problem() -> str | None:
    """Why ``PROMETHEUS_MULTIPROC_DIR`` cannot take the workers' metric files, or None (unset, or
    a writable folder): prometheus-client opens its files there as the first metric is made."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        return None
    if not os.path.isdir(folder):
        return f"PROMETHEUS_MULTIPROC_DIR {folder} is not a folder: make it (empty) first"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"PROMETHEUS_MULTIPROC_DIR {folder} is not writable by this user"
    return None


def count_stored_answers(sessions: sessionmaker[Session], metrics: Metrics) -> None:
    """Count the attempts each session inserted (``app.practice.storing.store_batch`` notes
    them in ``session.info``), once its transaction has committed."""

    @event.listens_for(sessions, "after_commit")
    def _committed(db: Session) -> None:
        pending = db.info.pop(ATTEMPTS_PENDING, 0)
        if pending:
            metrics.answers.inc(pending)

    @event.listens_for(sessions, "after_rollback")
    def _rolled_back(db: Session) -> None:
        db.info.pop(ATTEMPTS_PENDING, None)


async def serve_metrics(
    metrics: Metrics, token: str | None, scope: Scope, receive: Receive, send: Send
) -> None:
    """``/metrics``: a 404 without a token configured, a 401 without the right bearer token."""
    if not token:
        response: Response = problem_response(404, "not_found", "There is no such page.")
    else:
        given = Headers(scope=scope).get("authorization", "")
        expected = f"Bearer {token}"
        if not secrets.compare_digest(given.encode(), expected.encode()):
            response = problem_response(
                401, "unauthorized", "this needs 'Authorization: Bearer <METRICS_TOKEN>'"
            )
            response.headers["WWW-Authenticate"] = "Bearer"
        else:
            body = await anyio.to_thread.run_sync(metrics.exposition)
            response = Response(body, media_type=CONTENT_TYPE_LATEST)
    await response(scope, receive, send)
