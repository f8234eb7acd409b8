"""change numbers: what changed in a learner's history since a delta sync's cursor

Revision ID: c0d4a7e2b9f1
Revises: b7e1f4a2c9d0
Create Date: 2026-12-04 12:00:00

``learners.change_seq`` counts a learner's changes to their attempts and review state; the
attempts and review items a change wrote carry its number in ``change_seq``
(app.practice.changes). Rows stored before have 0: a first sync (no cursor) sends them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c0d4a7e2b9f1"
down_revision: str | None = "b7e1f4a2c9d0"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("learners", "attempts", "review_items"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(
                sa.Column("change_seq", sa.Integer(), server_default="0", nullable=False)
            )
    op.create_index(
        "ix_attempts_learner_change", "attempts", ["learner_id", "change_seq", "id"], unique=False
    )
    op.create_index(
        "ix_review_items_learner_change",
        "review_items",
        ["learner_id", "change_seq", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_review_items_learner_change", table_name="review_items")
    op.drop_index("ix_attempts_learner_change", table_name="attempts")
    for table in ("review_items", "attempts", "learners"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("change_seq")
