"""The ceilings of bench/service.py: a bare async JSON endpoint, a bare Jinja page and a sync
one-row insert.

Served with ``uvicorn service_baseline:baseline_app --factory --app-dir bench``. The database is
named by ``BENCH_BASELINE_DB``: a SQLite file (made by :func:`create_sqlite_baseline`; WAL,
``BEGIN IMMEDIATE``, ``synchronous=NORMAL``, like the app's database) or a PostgreSQL conninfo
``postgresql://...`` (table made by :func:`create_postgres_baseline`). Each threadpool thread
keeps its own SQLite connection; PostgreSQL connections come from a pool of ``POSTGRES_POOL`` per
process.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

BASELINE_DB_ENV = "BENCH_BASELINE_DB"
TABLE = "bench_rows"
# Connections per process: as many as the app's engine keeps (app.db.PG_POOL_SIZE, no
# overflow), all kept open (overflow connections closed on return would make it reconnect).
POSTGRES_POOL = 20


class BaselineRow(BaseModel):
    """The body of the baseline insert (module level, so FastAPI can resolve the annotation)."""

    client_answer_id: str


def _sqlite_connection(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=5000")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def baseline_app() -> Any:
    from fastapi import FastAPI

    target = os.environ[BASELINE_DB_ENV]
    postgres = target.startswith("postgresql://")
    local = threading.local()
    if postgres:
        import psycopg
        from sqlalchemy.pool import QueuePool
    # PostgreSQL connections are pooled per process (SQLAlchemy's QueuePool, the app's pool
    # class), not one per threadpool thread: 40 threads in each of two workers, beside the app's
    # pools, would exhaust the server's max_connections (100) and fail the app's requests.
    pool = (
        QueuePool(
            lambda: psycopg.connect(target),
            pool_size=POSTGRES_POOL,
            max_overflow=0,
            reset_on_return=None,  # each insert commits before it is given back
        )
        if postgres
        else None
    )

    def insert_row(client_answer_id: str) -> None:
        if pool is not None:
            pg = pool.connect()
            try:
                with pg.cursor() as cur:
                    cur.execute(
                        f"INSERT INTO {TABLE} (client_answer_id) VALUES (%s)", (client_answer_id,)
                    )
                pg.commit()
            finally:
                pg.close()  # back to the pool
            return
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = _sqlite_connection(target)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(f"INSERT INTO {TABLE} (client_answer_id) VALUES (?)", (client_answer_id,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    from fastapi.responses import HTMLResponse
    from jinja2 import Environment

    page = Environment(autoescape=True).from_string(PAGE)

    app = FastAPI()

    @app.get("/json")
    async def bare_json() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/insert")
    def insert(row: BaselineRow) -> dict[str, str]:
        insert_row(row.client_answer_id)
        return {"status": "ok"}

    @app.get("/page")
    async def bare_page() -> HTMLResponse:
        return HTMLResponse(page.render(title="A question", choices=PAGE_CHOICES))

    return app


# The bare page: a title, a form and four choices, rendered by Jinja with autoescaping.
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title></head>
<body><main><h1>{{ title }}</h1>
<form method="post" action="/answers">
{% for choice in choices %}<label><input type="radio" name="choice_id" value="{{ choice.id }}">
{{ choice.text }}</label>
{% endfor %}<button>Check answer</button></form></main></body></html>
"""
PAGE_CHOICES = [
    {"id": key, "text": f"{n} GB"} for key, n in zip("abcd", (28, 56, 112, 224), strict=True)
]


def create_sqlite_baseline(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, client_answer_id TEXT NOT NULL UNIQUE)"
        )
        conn.commit()


def create_postgres_baseline(conninfo: str) -> None:
    import psycopg

    with psycopg.connect(conninfo) as conn:
        conn.execute(
            f"CREATE TABLE {TABLE} (id BIGSERIAL PRIMARY KEY, client_answer_id TEXT NOT NULL UNIQUE)"
        )
