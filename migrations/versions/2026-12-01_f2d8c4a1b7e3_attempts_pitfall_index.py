"""attempts: an index on the pitfalls a learner fell for (learner, card, pitfall)

Revision ID: f2d8c4a1b7e3
Revises: e4b7a9c2d615
Create Date: 2026-12-01 12:40:00

Every wrong first answer asks whether the learner has fallen for its pitfall before (twice
brings the pitfall's other templates forward); without this index that read scanned the
attempts of everyone who ever chose that pitfall.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "f2d8c4a1b7e3"
down_revision: str | None = "e4b7a9c2d615"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_attempts_learner_pitfall", ["learner_id", "card_id", "pitfall_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_learner_pitfall")
