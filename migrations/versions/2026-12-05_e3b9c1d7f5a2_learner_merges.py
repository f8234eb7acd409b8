"""learner merges: the ids of anonymous learners merged into accounts

Revision ID: e3b9c1d7f5a2
Revises: d8a2f6c4e1b9
Create Date: 2026-12-05 12:00:00

A question token names the learner it was issued to. Signing in merges an anonymous learner
(a web guest, an app install) into the account and removes it; ``learner_merges`` keeps the id
it had, so that questions downloaded before signing in (answered offline) are the account's to
answer. Merges made before this revision are not known: their tokens stay refused.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e3b9c1d7f5a2"
down_revision: str | None = "d8a2f6c4e1b9"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "learner_merges",
        sa.Column("merged_id", sa.String(length=32), nullable=False),
        sa.Column("account_id", sa.String(length=32), nullable=False),
        sa.Column("merged_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["learners.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("merged_id"),
    )
    op.create_index("ix_learner_merges_account_id", "learner_merges", ["account_id"])


def downgrade() -> None:
    op.drop_index("ix_learner_merges_account_id", table_name="learner_merges")
    op.drop_table("learner_merges")
