"""learners, tokens and attempts

Revision ID: dd07bc22cb1c
Revises:
Create Date: 2026-11-29 09:18:43
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "dd07bc22cb1c"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "learners",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learners")),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=32), nullable=False),
        sa.Column("card_id", sa.String(length=100), nullable=False),
        sa.Column("card_version", sa.Integer(), nullable=False),
        sa.Column("point", sa.Integer(), nullable=False),
        sa.Column("template_id", sa.String(length=100), nullable=False),
        sa.Column("template_version", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("choices", sa.JSON(), nullable=False),
        sa.Column("choice_id", sa.String(length=8), nullable=False),
        sa.Column("correct_choice_id", sa.String(length=8), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("pitfall_id", sa.String(length=100), nullable=True),
        sa.Column("client_answer_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_attempts_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
        sa.UniqueConstraint("client_answer_id", name=op.f("uq_attempts_client_answer_id")),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_attempts_learner_id_created_at", ["learner_id", "created_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_attempts_pitfall_id"), ["pitfall_id"], unique=False)

    op.create_table(
        "learner_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=32), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_learner_tokens_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learner_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_learner_tokens_token_hash")),
    )
    with op.batch_alter_table("learner_tokens", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_learner_tokens_learner_id"), ["learner_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("learner_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_learner_tokens_learner_id"))
    op.drop_table("learner_tokens")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_attempts_pitfall_id"))
        batch_op.drop_index("ix_attempts_learner_id_created_at")
    op.drop_table("attempts")
    op.drop_table("learners")
