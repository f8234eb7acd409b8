"""authoring: card drafts, card states (unpublished), audit log

Revision ID: 8c2f4e1d9b30
Revises: 5b1e0c9a7d42
Create Date: 2026-12-01 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8c2f4e1d9b30"
down_revision: str | None = "5b1e0c9a7d42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "card_drafts",
        sa.Column("card_id", sa.String(length=100), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("updated_by", sa.String(length=32), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["updated_by"],
            ["learners.id"],
            name=op.f("fk_card_drafts_updated_by_learners"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("card_id", name=op.f("pk_card_drafts")),
    )
    op.create_table(
        "card_states",
        sa.Column("card_id", sa.String(length=100), nullable=False),
        sa.Column("unpublished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("card_id", name=op.f("pk_card_states")),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("actor_id", sa.String(length=32), nullable=True),
        sa.Column("actor_email", sa.String(length=254), nullable=True),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("card_id", sa.String(length=100), nullable=False),
        sa.Column("template_id", sa.String(length=100), nullable=True),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["actor_id"],
            ["learners.id"],
            name=op.f("fk_audit_log_actor_id_learners"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index("ix_audit_log_card_id_at", ["card_id", "at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_log_card_id_at")
    op.drop_table("audit_log")
    op.drop_table("card_states")
    op.drop_table("card_drafts")
