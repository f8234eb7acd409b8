"""Settings from the environment (pydantic-settings), and the secret key.

Environment variables (no prefix): ``DATABASE_URL``, ``SECRET_KEY``, ``ENVIRONMENT``
(``production`` requires SECRET_KEY), ``DATA_DIR``, ``CARDS_DIR``, ``COOKIE_SECURE``,
``QUESTION_MAX_AGE_S``, ``RATE_LIMIT_STORAGE``, ``REDIS_URL``,
``SQLITE_SYNCHRONOUS``, ``GC_FREEZE``, ``OPENTELEMETRY``, ``SMTP_HOST``, ``SMTP_PORT``,
``SMTP_SECURITY``, ``SMTP_USERNAME``, ``SMTP_PASSWORD``, ``MAIL_FROM``, ``PUBLIC_URL``. ``PORT`` is read by the Makefile (uvicorn's ``--port``).
"""

from __future__ import annotations

import logging
import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Literal

from limits import parse
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.auth.ratelimit import NEW_LEARNERS_IN_ALL, NEW_LEARNERS_PER_ADDRESS
from app.db import PG_POOL_SIZE

ROOT = Path(__file__).resolve().parents[1]
SECRET_KEY_FILE = "secret_key"
MIN_SECRET_KEY_LENGTH = 32


class Settings(BaseSettings):
    """Everything configurable about a running service."""

    model_config = SettingsConfigDict(extra="ignore")

    # "production" requires a real SECRET_KEY; any other value is a development setup.
    environment: str = "development"
    data_dir: Path = ROOT / "data"
    cards_dir: Path = ROOT / "cards"
    static_dir: Path = ROOT / "static"
    # VALIDATED_CARDS_DIR: the records of the card documents validated whole before
    # (app.catalog.validated); defaults to data_dir/validated-cards.
    validated_cards_dir: Path | None = None
    # Defaults to a SQLite file in data_dir (see the validator below).
    database_url: str = ""
    secret_key: SecretStr | None = None
    # Secure cookies (HTTPS only); always on in production.
    cookie_secure: bool = False
    port: int = Field(default=8000, ge=1, le=65535)
    # Where login rate limits are counted: memory:// (one process) or redis://host:port.
    rate_limit_storage: str = "memory://"
    # NEW_LEARNERS_PER_ADDRESS, NEW_LEARNERS_IN_ALL: how many anonymous app installs and accounts
    # may be created per client address and by everyone together ("100/hour", as the limits
    # library reads it); over them, 429 with Retry-After.
    new_learners_per_address: str = NEW_LEARNERS_PER_ADDRESS
    new_learners_in_all: str = NEW_LEARNERS_IN_ALL
    # REDIS_URL (redis://host:port/db): shared login limits for several processes, used when
    # RATE_LIMIT_STORAGE is left at memory://.
    redis_url: str = ""
    # SQLITE_SYNCHRONOUS: "full" (the default: fsync at every commit, so an acknowledged answer
    # survives a power loss or an aborted file system; group commit makes it cheap for answers,
    # see README) or "normal" (an explicit opt-in: never corrupts, but a power loss may drop the
    # last acknowledged commits).
    sqlite_synchronous: Literal["normal", "full"] = "full"

    @field_validator("new_learners_per_address", "new_learners_in_all")
    @classmethod
    def _rate(cls, value: str) -> str:
        try:
            parse(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a rate such as '100/hour'") from None
        return value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        # Refused here, in one line, rather than as a traceback from the engine; the value is
        # never quoted (it may hold a password).
        if not value:
            return value
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        try:
            url = make_url(value)
        except ArgumentError:
            raise ValueError(
                "not a database URL such as postgresql+psycopg://user@host/db or sqlite:///file"
            ) from None
        try:
            url.get_dialect().import_dbapi()
        except NoSuchModuleError:
            raise ValueError(f"SQLAlchemy has no database {url.drivername!r}") from None
        except ImportError as exc:
            raise ValueError(
                f"the driver for {url.drivername} is not installed ({exc.name})"
            ) from None
        return value

    @field_validator("rate_limit_storage", "redis_url")
    @classmethod
    def _storage_url(cls, value: str) -> str:
        from limits.storage import SCHEMES

        scheme, separator, _rest = value.partition("://")
        if value and (not separator or scheme not in SCHEMES or scheme.startswith("async+")):
            raise ValueError("not a storage URL such as redis://127.0.0.1:6379/0 or memory://")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in logging.getLevelNamesMapping():
            raise ValueError("not a log level: DEBUG, INFO, WARNING, ERROR or CRITICAL")
        return level

    @field_validator("sqlite_synchronous", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    # GC_FREEZE: once started, move the start-up heap (the cards and their warmed combinations,
    # hundreds of thousands of objects) out of the cyclic collector's way and collect less
    # often; without it a full collection stops the server for ~0.2 s every few seconds of load.
    gc_freeze: bool = True

    # How long a question token stays answerable (seconds).
    question_max_age_s: int = Field(default=7 * 24 * 3600, ge=60)

    # --- when the database is in trouble (app.db.DatabaseTimeouts) ---
    # PostgreSQL: connecting (libpq's connect_timeout, at least 2 s), one statement (the server's
    # statement_timeout; the client gives up one second later), a free pool connection.
    db_connect_timeout_s: int = Field(default=5, ge=1, le=300)
    db_statement_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    db_pool_timeout_s: float = Field(default=5.0, gt=0, le=300)
    # PostgreSQL: connections each server process keeps open (app.db.make_engine; the catalog's
    # refresher holds one more). Workers × (this + 1) must stay under the server's
    # max_connections (100 by default).
    db_pool_size: int = Field(default=PG_POOL_SIZE, ge=1, le=1000)
    # SQLite: how long a write waits for the file lock.
    sqlite_busy_timeout_ms: int = Field(default=5000, ge=0, le=600_000)
    # Retry-After of a 503 for a database failure; also how long a failed connection attempt
    # makes the next ones fail at once instead of waiting out the connect timeout again.
    db_retry_after_s: int = Field(default=2, ge=1, le=3600)

    # --- hardening (app.observability, app.web.security) ---
    # Host headers accepted (comma-separated; "*.example.com" wildcards; "*" accepts any).
    trusted_hosts: str = "localhost,127.0.0.1,[::1],testserver"
    # Largest request body (bytes); the instructor card-document routes accept max_card_body_bytes.
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    max_card_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    # SANDBOX_WORKERS: the formula sandbox's worker processes (app.authoring.sandbox), which also
    # validate a card's templates in parallel; VALIDATION_TIMEOUT_S: the wall-clock bound of one
    # card's validation job (app.authoring.validation).
    sandbox_workers: int = Field(default=2, ge=1, le=32)
    validation_timeout_s: float = Field(default=300.0, gt=0, le=3600)
    # Strict-Transport-Security max-age sent in production (0: not sent).
    hsts_max_age_s: int = Field(default=365 * 24 * 3600, ge=0)
    # LOG_FORMAT: "json" (one object a line, with the request id) or "text"; LOG_LEVEL.
    log_format: Literal["json", "text"] = "json"
    log_level: str = "INFO"
    # /metrics (Prometheus) answers only to "Authorization: Bearer <METRICS_TOKEN>"; unset: off.
    metrics_token: SecretStr | None = None
    # OPENTELEMETRY: FastAPI's native OpenTelemetry (spans, metrics and logs sent to the
    # globally configured providers). Off by default: the app has its own metrics and logs, and
    # looking for configured providers on every request cost a tenth of a question GET
    # (1,273k -> 1,143k instructions in process, callgrind).
    opentelemetry: bool = False

    # --- email (app.mail): password reset links ---
    # SMTP_HOST unset: outside production the link is written to the log instead (development).
    smtp_host: str = ""
    smtp_port: int = Field(default=587, ge=1, le=65535)
    # "starttls" (587), "tls" (implicit TLS, 465) or "none" (a relay on localhost, the tests).
    smtp_security: Literal["starttls", "tls", "none"] = "starttls"
    smtp_username: str = ""
    smtp_password: SecretStr | None = None
    smtp_timeout_s: float = Field(default=10.0, gt=0, le=300)
    mail_from: str = "infracards <no-reply@localhost>"
    # PUBLIC_URL (https://cards.example.com): where links in emails point; unset, the address
    # the request came to (its Host header is checked against TRUSTED_HOSTS).
    public_url: str = ""

    @property
    def trusted_host_list(self) -> list[str]:
        return [h.strip().lower() for h in self.trusted_hosts.split(",") if h.strip()]

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if not self.database_url:
            db_file = (self.data_dir / "infracards.db").resolve()
            self.database_url = f"sqlite:///{db_file}"
        if self.redis_url and self.rate_limit_storage == "memory://":
            self.rate_limit_storage = self.redis_url
        if self.environment == "production":
            key = self.secret_key.get_secret_value() if self.secret_key else ""
            if len(key) < MIN_SECRET_KEY_LENGTH:
                raise ValueError(
                    f"SECRET_KEY must be set to at least {MIN_SECRET_KEY_LENGTH} characters "
                    "in production (e.g. python -c 'import secrets; print(secrets.token_urlsafe(48))')"
                )
        return self

    @property
    def validated_cards_folder(self) -> Path:
        return self.validated_cards_dir or self.data_dir / "validated-cards"

    @property
    def secure_cookies(self) -> bool:
        return self.cookie_secure or self.environment == "production"


class SettingsError(ValueError):
    """The environment's settings cannot be used: one line naming each variable and why."""


def describe_invalid(exc: ValidationError) -> str:
    """pydantic's report as one line: each variable and its problem, never the values given
    (a DATABASE_URL's password, a short SECRET_KEY) nor pydantic's help links."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        name = ".".join(str(part) for part in error["loc"]).upper()
        message = " ".join(error["msg"].removeprefix("Value error, ").split())
        parts.append(f"{name}: {message}" if name else message)
    return "invalid settings: " + "; ".join(parts)


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once; :class:`SettingsError` (one
    line) when a variable is missing or wrong."""
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(describe_invalid(exc)) from None


def resolve_secret_key(settings: Settings) -> str:
    """The configured ``SECRET_KEY``, or outside production a generated key kept in ``data_dir``.

    The development key is written once (atomically, mode 0600) and reused, so sessions and
    question tokens survive restarts.
    """
    if settings.secret_key is not None and settings.secret_key.get_secret_value():
        return settings.secret_key.get_secret_value()
    if settings.environment == "production":  # pragma: no cover - the validator refuses this
        raise ValueError("SECRET_KEY is required in production")
    path = settings.data_dir / SECRET_KEY_FILE
    existing = _read_key(path)
    if existing:
        return existing
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{SECRET_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secrets.token_urlsafe(48) + "\n")
    try:
        # link() fails when another process won the race; then its key is the one to use.
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    key = _read_key(path)
    if not key:
        raise ValueError(f"could not read the development secret key from {path}")
    return key


def _read_key(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return ""
