"""deck sessions: a practice session may span the deck (no card of its own)

Revision ID: d8a2f6c4e1b9
Revises: c0d4a7e2b9f1
Create Date: 2026-12-05 10:00:00

``practice_sessions.card_id`` becomes nullable: null is a session over every card at once
(reviews due and mistakes across the deck, a mixed session, an exam), whose plan names the card
of each question (``plan[i].card_id``). Sessions stored before keep their card; their plans,
which name no card, are read as the session's.

Downgrading cannot keep a session without a card: its answers stay (attempts carry their card)
but are detached from it, as answers given outside a session, and the deck sessions go.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d8a2f6c4e1b9"
down_revision: str | None = "c0d4a7e2b9f1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    _card_id(nullable=True)


def downgrade() -> None:
    deck = "SELECT id FROM practice_sessions WHERE card_id IS NULL"
    op.execute(
        "UPDATE attempts SET practice_session_id = NULL, position = NULL "
        f"WHERE practice_session_id IN ({deck})"
    )
    op.execute("DELETE FROM practice_sessions WHERE card_id IS NULL")
    _card_id(nullable=False)


def _card_id(*, nullable: bool) -> None:
    # On SQLite a table copy: foreign keys are not enforced while migrations run (env.py), so
    # dropping the old table leaves every answer in its session.
    with op.batch_alter_table("practice_sessions", schema=None) as batch_op:
        batch_op.alter_column("card_id", existing_type=sa.String(length=100), nullable=nullable)
