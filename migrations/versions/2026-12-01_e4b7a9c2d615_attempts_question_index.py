"""attempts: an index on the question an attempt answers (learner, card, template, version, seed)

Revision ID: e4b7a9c2d615
Revises: c1a55e5b0a7d
Create Date: 2026-12-01 11:05:00

Whether an answer is the learner's first to its question is looked up on every answer; without
this index that lookup scanned every attempt of the learner.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "e4b7a9c2d615"
down_revision: str | None = "c1a55e5b0a7d"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_attempts_question",
            ["learner_id", "card_id", "template_id", "template_version", "seed"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_question")
