"""learners: the learner's time zone (an IANA name), for days, streaks and deadlines

Revision ID: a7c3e9f1d2b4
Revises: f2d8c4a1b7e3
Create Date: 2026-12-03 21:50:00

A day of practice, a streak and an exam's end are read in the learner's own time zone. NULL: not
known yet (the web takes the browser's zone from its cookie; otherwise UTC).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a7c3e9f1d2b4"
down_revision: str | None = "f2d8c4a1b7e3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("learners", schema=None) as batch_op:
        batch_op.add_column(sa.Column("time_zone", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("learners", schema=None) as batch_op:
        batch_op.drop_column("time_zone")
