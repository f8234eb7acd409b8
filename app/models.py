"""Database tables: learners and their credentials, card versions, attempts, practice sessions and
review state. Names follow the product: a learner answers a question (an attempt) inside a
practice session; each (learner, card, template) has a review item scheduled by FSRS.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, TypeAlias

from sqlalchemy import (
    JSON,
    BindParameter,
    Boolean,
    ColumnElement,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    TypeDecorator,
    UniqueConstraint,
    and_,
    false,
    tuple_,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base
from app.domain.calendar import TIME_ZONE_MAX
from app.domain.catalog import OfferedTemplates
from app.domain.scheduling import FsrsState

# The templates learners may be asked (app.domain.catalog.OfferedTemplates), or a query's two
# expanding parameters standing for its cards and its retired (card, template) pairs.
Offered: TypeAlias = OfferedTemplates | tuple[BindParameter[Any], BindParameter[Any]]

LEARNER_ID_LENGTH = 32  # uuid4().hex
CLIENT_ANSWER_ID_MAX = 64
EMAIL_MAX = 254
SLUG_MAX = 100
TYPED_VALUE_MAX = 40  # app.domain.typed.MAX_LENGTH


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A moment, stored in UTC and read back timezone-aware in UTC on every database.

    PostgreSQL keeps ``timestamptz`` and returns aware datetimes; SQLite has no time zones and
    its ``DateTime`` returns naive ones. Every timestamp column uses this type, so no reader
    (an API response, a comparison with ``now``) ever sees a naive datetime. SQLite stores the
    UTC wall time as before (no migration); a naive value written is taken to be UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return moment.replace(tzinfo=None) if dialect.name == "sqlite" else moment

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Learner(Base):
    """Someone who practises: a web guest, an app installation, or an account (email + password).

    ``kind`` is ``guest`` (web, no credentials), ``app`` (anonymous app install, bearer token) or
    ``account``; ``role`` is ``learner``, ``instructor`` or ``admin``.
    """

    __tablename__ = "learners"

    id: Mapped[str] = mapped_column(String(LEARNER_ID_LENGTH), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    email: Mapped[str | None] = mapped_column(String(EMAIL_MAX), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16), default="learner")
    exam_date: Mapped[date | None] = mapped_column(Date)
    # An IANA time zone name (app.domain.calendar); None: not known, the browser's or UTC.
    time_zone: Mapped[str | None] = mapped_column(String(TIME_ZONE_MAX))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    # The number of the learner's latest change to their attempts or review state; each changed
    # row carries the number of its change (app.practice.changes: delta sync).
    change_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class LearnerToken(Base):
    """An opaque API bearer token for one device; only its SHA-256 is stored; revocable."""

    __tablename__ = "learner_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[str] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    device_name: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class LearnerMerge(Base):
    """An anonymous learner (a web guest, an app install) merged into an account: the id it had.

    Question tokens issued to it before the merge (a batch downloaded for offline use) are the
    account's to answer (app.practice.answers)."""

    __tablename__ = "learner_merges"

    merged_id: Mapped[str] = mapped_column(String(LEARNER_ID_LENGTH), primary_key=True)
    account_id: Mapped[str] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), index=True
    )
    merged_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class WebSession(Base):
    """A signed-in (or guest) browser: the cookie holds a random id, this row its SHA-256."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    learner_id: Mapped[str] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), index=True
    )
    lang: Mapped[str | None] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())


class CardVersion(Base):
    """Every version of every card ever served, as its document, so old questions stay gradeable."""

    __tablename__ = "card_versions"

    card_id: Mapped[str] = mapped_column(String(SLUG_MAX), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    content_hash: Mapped[str] = mapped_column(String(64))
    # What the catalog knows of the version without compiling it (app.domain.manifests); NULL
    # for a version stored before manifests, filled in at the next start-up.
    manifest: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class PracticeSession(Base):
    """A run of questions in one mode (point, card, mistakes, review, exam; mixed on the deck)
    with a fixed plan, on one card or on the deck (``card_id`` null: every card at once)."""

    __tablename__ = "practice_sessions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    learner_id: Mapped[str] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), index=True
    )
    # The session's card; null for a session spanning the deck (its questions name their cards).
    card_id: Mapped[str | None] = mapped_column(String(SLUG_MAX))
    mode: Mapped[str] = mapped_column(String(16))
    point: Mapped[str | None] = mapped_column(String(SLUG_MAX))
    # The planned questions, in order: [{"card_id": id, "point": slug, "template_id": id,
    # "template_version": n}, ...]; a plan stored before deck sessions names no card (the
    # session's own).
    plan: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    deadline_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # "Type the answer": numeric questions are answered with a number and a unit, no choices
    # shown (statements keep their choices).
    typed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The id the client gave this start (an app's UUID), so that sending the start again, its
    # response lost, gets this session rather than a second one; null for the web's.
    client_session_id: Mapped[str | None] = mapped_column(
        String(CLIENT_ANSWER_ID_MAX), unique=True, index=True
    )

    @property
    def scope(self) -> str:
        """``card`` (one card's session) or ``deck`` (every card at once):
        app.domain.practice.SCOPES."""
        return "deck" if self.card_id is None else "card"

    def planned_card(self, position: int) -> str:
        """The card of the question planned at ``position``."""
        card_id = self.plan[position].get("card_id", self.card_id)
        assert card_id is not None, "a deck session's plan names the card of each question"
        return str(card_id)


class Attempt(Base):
    """One answer to one generated question, with everything needed to reproduce the question."""

    __tablename__ = "attempts"
    __table_args__ = (
        Index("ix_attempts_learner_id_created_at", "learner_id", "created_at"),
        Index("ix_attempts_session_position", "practice_session_id", "position"),
        # Is this the learner's first answer to the question? (looked up on every answer)
        Index(
            "ix_attempts_question",
            "learner_id",
            "card_id",
            "template_id",
            "template_version",
            "seed",
        ),
        # How often has the learner fallen for this pitfall? (asked on every wrong answer)
        Index("ix_attempts_learner_pitfall", "learner_id", "card_id", "pitfall_id"),
        # What changed since a delta sync's cursor (app.practice.changes)
        Index("ix_attempts_learner_change", "learner_id", "change_seq", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    card_id: Mapped[str] = mapped_column(String(SLUG_MAX))
    card_version: Mapped[int] = mapped_column(Integer)
    point: Mapped[str] = mapped_column(String(SLUG_MAX))  # the exam point's slug
    template_id: Mapped[str] = mapped_column(String(SLUG_MAX))
    template_version: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    # Exact parameter values as strings, e.g. {"psi": "70000000000", "n_d": "16"}.
    params: Mapped[dict[str, str]] = mapped_column(JSON)
    # The choices shown, in order: [{id, text: {en, zh}, value, unit, pitfall_id}].
    choices: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    # The choice made and the right one; both null for a typed answer (no choice was shown:
    # ``choices`` is empty and ``typed_value``/``typed_unit`` hold what was typed).
    choice_id: Mapped[str | None] = mapped_column(String(8))
    correct_choice_id: Mapped[str | None] = mapped_column(String(8))
    correct: Mapped[bool]
    pitfall_id: Mapped[str | None] = mapped_column(String(SLUG_MAX), index=True)
    client_answer_id: Mapped[str] = mapped_column(String(CLIENT_ANSWER_ID_MAX), unique=True)
    # The learner's first answer to this question: only first answers rate a review.
    first_answer: Mapped[bool] = mapped_column(Boolean, default=True)
    practice_session_id: Mapped[str | None] = mapped_column(
        ForeignKey("practice_sessions.id", ondelete="SET NULL")
    )
    position: Mapped[int | None] = mapped_column(Integer)
    # How long the learner took (from showing the question to answering), when known.
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    # When the learner answered (the app's clock for offline answers); created_at is when stored.
    answered_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # A typed answer: the number as the learner typed it (trimmed) and its unit's name ("GiB").
    typed_value: Mapped[str | None] = mapped_column(String(TYPED_VALUE_MAX))
    typed_unit: Mapped[str | None] = mapped_column(String(16))
    # Hidden from the mistake book by "I understand this now" (still counted in statistics).
    dismissed: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    change_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class ReviewItem(Base):
    """A (learner, card, exam point, template) scheduled by FSRS; each review draws a new variant."""

    __tablename__ = "review_items"
    __table_args__ = (
        UniqueConstraint("learner_id", "card_id", "template_id"),
        Index("ix_review_items_learner_id_due_at", "learner_id", "due_at"),
        Index("ix_review_items_learner_change", "learner_id", "change_seq", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    card_id: Mapped[str] = mapped_column(String(SLUG_MAX))
    point: Mapped[str] = mapped_column(String(SLUG_MAX))
    template_id: Mapped[str] = mapped_column(String(SLUG_MAX))
    state: Mapped[FsrsState] = mapped_column(JSON)  # fsrs.Card.to_dict()
    due_at: Mapped[datetime] = mapped_column(UtcDateTime())
    reviews: Mapped[int] = mapped_column(Integer, default=0)
    lapses: Mapped[int] = mapped_column(Integer, default=0)
    last_review_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    change_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    @classmethod
    def served(cls, offered: Offered) -> ColumnElement[bool]:
        """Whether a review may serve the item: learners may be asked its template on its card
        (``offered``: app.domain.catalog.Catalog.offered_templates). A withdrawn card's
        questions are asked no more (no session starts on it, no review serves it), nor are
        those of a template its card's latest version dropped; their items wait, neither due
        nor counted, until the card is offered again or the template comes back. The retired
        pairs are few (none until a card version drops a template): a list of every offered
        pair made the page header's query 3 times slower."""
        cards, retired = (
            (offered.cards, offered.retired) if isinstance(offered, OfferedTemplates) else offered
        )
        return and_(cls.card_id.in_(cards), tuple_(cls.card_id, cls.template_id).not_in(retired))

    @classmethod
    def due_by(
        cls, now: datetime | BindParameter[datetime], offered: Offered
    ) -> ColumnElement[bool]:
        """The one rule of "due" in every query: an item is due at ``now`` when its due time is
        not after it and a review may serve it (:meth:`served`): the header's count, Today, the
        review page and forecast, the review queue (sessions, the API's due list), the app's
        Today and class analytics."""
        return and_(cls.due_at <= now, cls.served(offered))


class ReviewLog(Base):
    """One rating given to a review item (what FSRS was told, and when)."""

    __tablename__ = "review_logs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    review_item_id: Mapped[int] = mapped_column(
        ForeignKey("review_items.id", ondelete="CASCADE"), index=True
    )
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempts.id", ondelete="SET NULL"))
    rating: Mapped[int] = mapped_column(Integer)
    reviewed_at: Mapped[datetime] = mapped_column(UtcDateTime())
    due_before: Mapped[datetime | None] = mapped_column(UtcDateTime())
    due_after: Mapped[datetime] = mapped_column(UtcDateTime())


class CardDraft(Base):
    """An instructor's unpublished edit of a card: the whole document, replaced on each save."""

    __tablename__ = "card_drafts"

    card_id: Mapped[str] = mapped_column(String(SLUG_MAX), primary_key=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_by: Mapped[str | None] = mapped_column(ForeignKey("learners.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class CardState(Base):
    """Whether learners are offered a card; an unpublished card still grades its old questions."""

    __tablename__ = "card_states"

    card_id: Mapped[str] = mapped_column(String(SLUG_MAX), primary_key=True)
    unpublished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    changed_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class AuditEntry(Base):
    """Who did what to which card, when, and what it changed (not the whole document)."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_card_id_at", "card_id", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    actor_id: Mapped[str | None] = mapped_column(ForeignKey("learners.id", ondelete="SET NULL"))
    actor_email: Mapped[str | None] = mapped_column(String(EMAIL_MAX))
    action: Mapped[str] = mapped_column(String(32))
    card_id: Mapped[str] = mapped_column(String(SLUG_MAX))
    template_id: Mapped[str | None] = mapped_column(String(SLUG_MAX))
    version: Mapped[int | None] = mapped_column(Integer)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # What an edit changed: the versions it went from and to and a JSON Patch (app.domain.patches)
    # instead of the document twice; the documents themselves are in card_versions.
    changes: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class PasswordReset(Base):
    """A password reset link sent by email: only its SHA-256 is stored; used once, then gone."""

    __tablename__ = "password_resets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[str] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())
