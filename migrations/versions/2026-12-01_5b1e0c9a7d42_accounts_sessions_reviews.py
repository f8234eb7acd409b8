"""accounts, web sessions, card versions, practice sessions and review state; exam-point slugs

Revision ID: 5b1e0c9a7d42
Revises: dd07bc22cb1c
Create Date: 2026-12-01 09:40:00

Attempts named their exam point by number; they now name it by its stable slug. The numbers of
the one card that existed before this revision map to its slugs below; a point of any other card
becomes ``point-<n>``.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5b1e0c9a7d42"
down_revision: str | None = "dd07bc22cb1c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SLUGS = {
    "zero-memory-offload": {
        1: "optimizer-memory",
        2: "zero-stage-memory",
        3: "gradient-sharding",
        4: "zero3-communication",
        5: "offload",
    }
}


def upgrade() -> None:
    with op.batch_alter_table("learners", schema=None) as batch_op:
        batch_op.add_column(sa.Column("email", sa.String(length=254), nullable=True))
        batch_op.add_column(sa.Column("password_hash", sa.String(length=255), nullable=True))
        batch_op.add_column(
            sa.Column("role", sa.String(length=16), nullable=False, server_default="learner")
        )
        batch_op.add_column(sa.Column("exam_date", sa.Date(), nullable=True))
        batch_op.create_unique_constraint(batch_op.f("uq_learners_email"), ["email"])

    with op.batch_alter_table("learner_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("device_name", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))

    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("learner_id", sa.String(length=32), nullable=False),
        sa.Column("lang", sa.String(length=8), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_web_sessions_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_web_sessions_token_hash")),
    )
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_web_sessions_learner_id"), ["learner_id"])

    op.create_table(
        "card_versions",
        sa.Column("card_id", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("card_id", "version", name=op.f("pk_card_versions")),
    )

    op.create_table(
        "practice_sessions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("learner_id", sa.String(length=32), nullable=False),
        sa.Column("card_id", sa.String(length=100), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("point", sa.String(length=100), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_practice_sessions_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_practice_sessions")),
    )
    with op.batch_alter_table("practice_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_practice_sessions_learner_id"), ["learner_id"])

    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("point_slug", sa.String(length=100), nullable=True))
        batch_op.add_column(
            sa.Column("first_answer", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch_op.add_column(sa.Column("practice_session_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("position", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("duration_ms", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("dismissed", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_attempts_practice_session_id_practice_sessions"),
            "practice_sessions",
            ["practice_session_id"],
            ["id"],
            ondelete="SET NULL",
        )
        batch_op.create_index(
            "ix_attempts_session_position", ["practice_session_id", "position"], unique=False
        )

    attempts = sa.table(
        "attempts",
        sa.column("card_id", sa.String),
        sa.column("point", sa.Integer),
        sa.column("point_slug", sa.String),
    )
    connection = op.get_bind()
    pairs = connection.execute(sa.select(attempts.c.card_id, attempts.c.point).distinct()).all()
    for card_id, number in pairs:
        slug = SLUGS.get(card_id, {}).get(number, f"point-{number}")
        connection.execute(
            attempts.update()
            .where(attempts.c.card_id == card_id, attempts.c.point == number)
            .values(point_slug=slug)
        )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("point")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.alter_column(
            "point_slug",
            new_column_name="point",
            existing_type=sa.String(length=100),
            nullable=False,
        )

    op.create_table(
        "review_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=32), nullable=False),
        sa.Column("card_id", sa.String(length=100), nullable=False),
        sa.Column("point", sa.String(length=100), nullable=False),
        sa.Column("template_id", sa.String(length=100), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reviews", sa.Integer(), nullable=False),
        sa.Column("lapses", sa.Integer(), nullable=False),
        sa.Column("last_review_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_review_items_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_items")),
        sa.UniqueConstraint(
            "learner_id", "card_id", "template_id", name=op.f("uq_review_items_learner_id")
        ),
    )
    with op.batch_alter_table("review_items", schema=None) as batch_op:
        batch_op.create_index("ix_review_items_learner_id_due_at", ["learner_id", "due_at"])

    op.create_table(
        "review_logs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("review_item_id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=True),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("due_before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("due_after", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_review_logs_attempt_id_attempts"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["review_item_id"],
            ["review_items.id"],
            name=op.f("fk_review_logs_review_item_id_review_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_logs")),
    )
    with op.batch_alter_table("review_logs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_review_logs_review_item_id"), ["review_item_id"])


def downgrade() -> None:
    with op.batch_alter_table("review_logs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_review_logs_review_item_id"))
    op.drop_table("review_logs")
    with op.batch_alter_table("review_items", schema=None) as batch_op:
        batch_op.drop_index("ix_review_items_learner_id_due_at")
    op.drop_table("review_items")

    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("point_number", sa.Integer(), nullable=True))
    attempts = sa.table(
        "attempts",
        sa.column("card_id", sa.String),
        sa.column("point", sa.String),
        sa.column("point_number", sa.Integer),
    )
    connection = op.get_bind()
    pairs = connection.execute(sa.select(attempts.c.card_id, attempts.c.point).distinct()).all()
    for card_id, slug in pairs:
        numbers = {s: n for n, s in SLUGS.get(card_id, {}).items()}
        number = numbers.get(slug)
        if number is None:
            number = int(slug.removeprefix("point-")) if slug.startswith("point-") else 0
        connection.execute(
            attempts.update()
            .where(attempts.c.card_id == card_id, attempts.c.point == slug)
            .values(point_number=number)
        )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_session_position")
        batch_op.drop_constraint(
            batch_op.f("fk_attempts_practice_session_id_practice_sessions"), type_="foreignkey"
        )
        for column in (
            "point",
            "dismissed",
            "answered_at",
            "duration_ms",
            "position",
            "practice_session_id",
            "first_answer",
        ):
            batch_op.drop_column(column)
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.alter_column(
            "point_number", new_column_name="point", existing_type=sa.Integer(), nullable=False
        )

    with op.batch_alter_table("practice_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_practice_sessions_learner_id"))
    op.drop_table("practice_sessions")
    op.drop_table("card_versions")
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_web_sessions_learner_id"))
    op.drop_table("web_sessions")

    with op.batch_alter_table("learner_tokens", schema=None) as batch_op:
        batch_op.drop_column("last_used_at")
        batch_op.drop_column("device_name")
    with op.batch_alter_table("learners", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_learners_email"), type_="unique")
        batch_op.drop_column("exam_date")
        batch_op.drop_column("role")
        batch_op.drop_column("password_hash")
        batch_op.drop_column("email")
