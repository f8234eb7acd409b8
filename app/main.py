"""The application: ``create_app()`` wires settings, cards, database, API, pages and static files.

Served with ``uvicorn app.main:create_app --factory``. Cards are loaded (and validated) once here;
a card that fails validation stops start-up. The server never imports torch or ``app.zero_demo``.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import secrets
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker
from swagger_ui_bundle import swagger_ui_path

from app.api.openapi import install_openapi, operation_id
from app.api.router import API_PREFIX, API_ROUTERS, HOT_ROUTES
from app.auth.cookies import BrowserSessionMiddleware, CsrfSigner, SessionCookie
from app.auth.ratelimit import LoginLimiter
from app.catalog.service import LiveCatalog
from app.catalog.validated import ValidatedCards
from app.config import Settings, SettingsError, get_settings, resolve_secret_key
from app.db import (
    DatabaseTimeouts,
    ensure_sqlite_folder,
    is_sqlite,
    make_engine,
    make_lookup_sessionmaker,
    make_sessionmaker,
)
from app.domain.cards import Card, CardError
from app.domain.catalog import Catalog, load_cards
from app.errors import install_error_handlers
from app.mail import Mailer
from app.observability import install_observability
from app.observability.guards import install_guards
from app.observability.logs import configure_logging
from app.observability.metrics import multiprocess_folder_problem
from app.practice.answers import Context
from app.practice.questions import QuestionSigner
from app.routing import include_flat
from app.web.routes import LOOP_PAGE_ROUTERS, PAGE_ROUTERS
from app.web.security import docs_csp, security_headers
from app.web.templating import make_pages

log = logging.getLogger(__name__)

DESCRIPTION = """
Practise AI-infrastructure knowledge cards as generated single-choice questions whose wrong
answers are named pitfalls.

**Flow:** `GET /api/v1/cards` → `GET /api/v1/cards/{card_id}/points/{point}/question` (the exam point's slug) →
`POST /api/v1/answers` with the question's `token`, a `choice_id` and a fresh `client_answer_id`
(a UUID; resending it replays the stored result instead of recording a second attempt).

**Typed answers:** `GET …/question?mode=typed` is the same question without its choices (a
statement keeps them); answer it with `value` (the number as typed) and `unit` (one of the
question's `typed_units`) instead of `choice_id`. It is graded at `typed_figures` significant
figures, in any unit of the question's dimension (GiB for a question in GB), and a wrong value
that is a pitfall's comes back with that `pitfall`. A number, unit or form that cannot be graded
is a 422 problem whose `field` names the field.

**Learner identity:** accounts register with `POST /api/v1/auth/register` and get a token per
device from `POST /api/v1/auth/token` (registering answers the same whether or not the address
already has an account; its owner is emailed instead); anonymous installs call
`POST /api/v1/learners` (both answer the token as `access_token`). In an exam that is still
running an answer is stored and acknowledged with `feedback: null`; its result shows once the
exam ends. Send `Authorization: Bearer <token>`; learner routes accept nothing else (no
cookies). The question routes answer without a token too (the question is then bound to no
learner); instructor routes take an instructor's account token (`InstructorToken`).

**Offline:** `POST /api/v1/answers/batch` takes up to 500 answers and answers one result per item,
in order, each with its `client_answer_id` and an `outcome`: `stored`, `withheld` (an answer in a
running exam, stored without its result) or `problem` (what `POST /api/v1/answers` would have
refused that item with; the others are stored all the same).

**Texts:** `?lang=en` or `?lang=zh` (else `Accept-Language`); inline math is LaTeX between
`$...$`, with MathML beside it. Every 4xx is an RFC 9457 problem document
(`application/problem+json`) with a stable `code`.
"""


def _one_line(exc: CardError) -> str:
    """A card error as the one line the start-up gate refuses with."""
    return " ".join(str(exc).split())


def load_catalog(live: LiveCatalog) -> tuple[Catalog, str | None]:
    """Publish the card files' new versions and load every stored one; the catalog, and why the
    cards cannot be served (None when they can).

    A database that is not migrated yet (the app still starts and says so) serves the files only.
    A card file changed without a new version is a reason to refuse start-up (one line, by the
    start-up gate: app.observability.health.cards_state), not a traceback.
    """
    try:
        return live.load(), None
    except CardError as exc:
        return live.catalog, _one_line(exc)
    except (OperationalError, ProgrammingError) as exc:
        log.error(
            "could not read or store card versions (%s): serving the card files only",
            str(exc).splitlines()[0],
        )
        return live.catalog, None


# Young objects collected after this many allocations (CPython's default is 700): request
# garbage is mostly freed by reference counting, so collecting ten times less often costs little
# memory and spares most of the collector's passes.
GC_THRESHOLDS = (7000, 10, 10)

# uvicorn's exit status for a start-up failure (uvicorn.config.STARTUP_FAILURE).
STARTUP_FAILURE_STATUS = 3

TELEMETRY_OFF = {"tracing": False, "metrics": False, "logs": False}


@contextmanager
def collector_tuned(enabled: bool) -> Iterator[None]:
    """While the server runs: what is alive at start-up is frozen (``gc.freeze``: never scanned
    again, so a full collection costs a fraction of the heap) and young objects are collected
    less often (``GC_THRESHOLDS``); both undone at shutdown."""
    if not enabled:
        yield
        return
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def start_refresher(
    live: LiveCatalog,
    settings: Settings,
    sessions: sessionmaker[Session],
    timeouts: DatabaseTimeouts,
) -> Engine | None:
    """Start the live catalog's refresher thread on an engine of its own (one connection): its
    checks never take a connection requests wait for, and its failures are not the requests'
    (/readyz reports the app's engine). An in-memory SQLite database is only the app's engine's."""
    in_memory = make_url(settings.database_url).database in (None, "", ":memory:")
    if not (is_sqlite(settings.database_url) and in_memory):
        engine = make_engine(
            settings.database_url,
            sqlite_synchronous=settings.sqlite_synchronous,
            timeouts=timeouts,
            pool_size=1,
            max_overflow=0,
        )
        live.start(make_sessionmaker(engine))
        return engine
    live.start(sessions)
    return None


def create_app(
    settings: Settings | None = None, *, cards: dict[str, Card] | None = None
) -> FastAPI:
    """A ready-to-serve app; ``cards`` may be passed in already loaded (tests do)."""
    if settings is None:
        try:
            settings = get_settings()
        except SettingsError as exc:
            # One line on stderr, not a traceback that would quote the values given (a short
            # SECRET_KEY, a DATABASE_URL's password); status 3 is uvicorn's start-up failure,
            # so that with --workers the supervisor stops instead of restarting the workers.
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(STARTUP_FAILURE_STATUS) from None
    if (metrics_problem := multiprocess_folder_problem()) is not None:
        print(f"error: {metrics_problem}", file=sys.stderr)  # as above: not a traceback
        raise SystemExit(STARTUP_FAILURE_STATUS)
    configure_logging(settings)  # before the cards and the database log anything
    card_error = None
    if cards is None:
        try:
            cards = load_cards(settings.cards_dir, ValidatedCards(settings.validated_cards_folder))
        except CardError as exc:  # refused at start-up with this line (app.observability.health)
            cards, card_error = {}, _one_line(exc)
    try:
        secret_key = resolve_secret_key(settings)
        ensure_sqlite_folder(settings.database_url)
        startup_error = None
    except OSError as exc:
        # An unwritable data folder: the start-up gate refuses with one line
        # (app.observability.health); this throwaway key never serves a request.
        secret_key, startup_error = (
            secrets.token_urlsafe(48),
            f"{exc.strerror or exc}: {exc.filename}",
        )
    timeouts = DatabaseTimeouts(
        connect_s=settings.db_connect_timeout_s,
        statement_s=settings.db_statement_timeout_s,
        pool_s=settings.db_pool_timeout_s,
        sqlite_busy_ms=settings.sqlite_busy_timeout_ms,
        retry_after_s=settings.db_retry_after_s,
    )
    engine = make_engine(
        settings.database_url,
        sqlite_synchronous=settings.sqlite_synchronous,
        timeouts=timeouts,
        postgres_pool_size=settings.db_pool_size,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # app.observability.health.StartupGate has refused to start on an unusable database already.
        refresh_engine = start_refresher(live, settings, sessions, timeouts)
        try:
            with collector_tuned(settings.gc_freeze):
                yield
        finally:
            live.stop()
            if refresh_engine is not None:
                refresh_engine.dispose()
        mailer.wait()  # the emails asked for are sent before the database goes
        engine.dispose()

    app = FastAPI(
        title="infracards",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,  # short, stable operationIds (app.api.openapi)
        docs_url=None,  # served below from local assets: no CDN
        redoc_url=None,  # FastAPI's ReDoc page loads its script from a CDN
        # FastAPI's own OpenTelemetry only when asked for (Settings.opentelemetry).
        telemetry=None if settings.opentelemetry else TELEMETRY_OFF,
    )
    sessions = make_sessionmaker(engine)
    app.state.settings = settings
    app.state.startup_error = startup_error
    app.state.engine = engine
    app.state.sessionmaker = sessions
    app.state.lookups = make_lookup_sessionmaker(engine)  # tokens and browser sessions
    app.state.live_catalog = live = LiveCatalog(sessions, cards)
    if card_error is None:
        app.state.catalog, card_error = load_catalog(app.state.live_catalog)
    else:
        app.state.catalog = app.state.live_catalog.catalog
    app.state.card_error = card_error
    app.state.context = Context(
        catalog=app.state.catalog,
        signer=QuestionSigner(secret_key, max_age_s=settings.question_max_age_s),
        seed_secret=hashlib.sha256(f"seeds:{secret_key}".encode()).digest(),
    )
    app.state.csrf = CsrfSigner(secret_key)
    app.state.session_cookie = SessionCookie(secret_key)
    app.state.login_limiter = LoginLimiter(
        settings.rate_limit_storage,
        new_per_address=settings.new_learners_per_address,
        new_in_all=settings.new_learners_in_all,
    )
    app.state.mailer = mailer = Mailer(settings)
    app.state.pages = make_pages()

    app.add_middleware(
        BrowserSessionMiddleware,
        secure=settings.secure_cookies,
        cookie=app.state.session_cookie,
    )
    body_limit = install_guards(app, settings)  # start-up gate, body limits, trusted hosts
    hsts = settings.hsts_max_age_s if settings.environment == "production" else 0
    # Outermost: request ids, logs, metrics, /readyz, the security headers on every response.
    install_observability(app, settings, response_headers=security_headers(hsts))
    install_error_handlers(app)

    # Served first (app.routing), each with its body limit.
    app.router.routes[0:0] = [route.with_body_limit(body_limit) for route in HOT_ROUTES]

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        # The process is alive: nothing else is touched (no database, no thread). See /readyz.
        return {"status": "ok"}

    for router in LOOP_PAGE_ROUTERS:
        include_flat(app.router, router, include_in_schema=False, body_limit=body_limit)
    for router in API_ROUTERS:
        include_flat(app.router, router, prefix=API_PREFIX, body_limit=body_limit)
    install_openapi(app)
    for router in PAGE_ROUTERS:
        if router not in LOOP_PAGE_ROUTERS:
            include_flat(app.router, router, include_in_schema=False, body_limit=body_limit)
    app.mount("/static", StaticFiles(directory=settings.static_dir), name="static")
    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    docs_page = bytes(
        get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="infracards API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon-32x32.png",
        ).body
    )
    # Its own CSP: the pages' policy allows no scripts, Swagger UI needs its bundle and init.
    docs_headers = {"Content-Security-Policy": docs_csp(docs_page.decode())}

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(docs_page, headers=docs_headers)

    return app
