"""typed answers: attempts keep what was typed (no choice), sessions may ask for typed answers

Revision ID: c4e8b1f7a9d3
Revises: a7c3e9f1d2b4
Create Date: 2026-12-03 21:50:00

A typed answer shows no choices: its attempt stores ``choice_id`` and ``correct_choice_id`` as
null, an empty ``choices`` list, and the number and unit typed (``typed_value``,
``typed_unit``); ``correct`` and ``pitfall_id`` mean what they always meant. A practice session
started with "Type the answer" is ``typed``.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c4e8b1f7a9d3"
down_revision: str | None = "a7c3e9f1d2b4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.alter_column("choice_id", existing_type=sa.String(length=8), nullable=True)
        batch_op.alter_column("correct_choice_id", existing_type=sa.String(length=8), nullable=True)
        batch_op.add_column(sa.Column("typed_value", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("typed_unit", sa.String(length=16), nullable=True))
    with op.batch_alter_table("practice_sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("typed", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    # Typed attempts have no choice to put back: they go with the columns that hold them.
    op.execute("DELETE FROM attempts WHERE choice_id IS NULL")
    with op.batch_alter_table("practice_sessions", schema=None) as batch_op:
        batch_op.drop_column("typed")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("typed_unit")
        batch_op.drop_column("typed_value")
        batch_op.alter_column(
            "correct_choice_id", existing_type=sa.String(length=8), nullable=False
        )
        batch_op.alter_column("choice_id", existing_type=sa.String(length=8), nullable=False)
