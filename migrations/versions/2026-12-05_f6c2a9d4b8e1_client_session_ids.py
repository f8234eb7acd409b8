"""client session ids: the id an app gives the start of a practice session, so a resend starts none

Revision ID: f6c2a9d4b8e1
Revises: e3b9c1d7f5a2
Create Date: 2026-12-05 14:00:00

An app that sends ``POST /api/v1/me/sessions`` and loses the response (a train's tunnel) sends
it again. Without an id of its own the second request started a second session, and an exam
started twice left one that ran out unanswered in the learner's exam history. The app now names
each start (``client_session_id``, a UUID): the resend gets the session the first one started.
Sessions started before this revision have none.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f6c2a9d4b8e1"
down_revision: str | None = "e3b9c1d7f5a2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "practice_sessions", sa.Column("client_session_id", sa.String(length=64), nullable=True)
    )
    op.create_index(
        "ix_practice_sessions_client_session_id",
        "practice_sessions",
        ["client_session_id"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("ix_practice_sessions_client_session_id", table_name="practice_sessions")
    with op.batch_alter_table("practice_sessions") as batch:
        batch.drop_column("client_session_id")
