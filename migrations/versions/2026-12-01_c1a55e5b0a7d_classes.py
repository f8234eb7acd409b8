"""classes: an instructor's classes and the learners who joined them by code

Revision ID: c1a55e5b0a7d
Revises: 8c2f4e1d9b30
Create Date: 2026-12-01 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c1a55e5b0a7d"
down_revision: str | None = "8c2f4e1d9b30"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "classes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("join_code", sa.String(length=8), nullable=False),
        sa.Column("owner_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["learners.id"],
            name=op.f("fk_classes_owner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_classes")),
        sa.UniqueConstraint("join_code", name=op.f("uq_classes_join_code")),
    )
    with op.batch_alter_table("classes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_classes_owner_id"), ["owner_id"], unique=False)
    op.create_table(
        "class_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("class_id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=32), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["class_id"],
            ["classes.id"],
            name=op.f("fk_class_members_class_id_classes"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_class_members_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_class_members")),
        sa.UniqueConstraint("class_id", "learner_id", name=op.f("uq_class_members_class_id")),
    )
    with op.batch_alter_table("class_members", schema=None) as batch_op:
        batch_op.create_index("ix_class_members_learner_id", ["learner_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("class_members", schema=None) as batch_op:
        batch_op.drop_index("ix_class_members_learner_id")
    op.drop_table("class_members")
    with op.batch_alter_table("classes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_classes_owner_id"))
    op.drop_table("classes")
