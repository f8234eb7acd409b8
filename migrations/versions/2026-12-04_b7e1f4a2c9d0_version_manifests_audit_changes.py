"""version manifests, audit changes: publishing compiles the new version only

Revision ID: b7e1f4a2c9d0
Revises: d5f9c2a8e1b6
Create Date: 2026-12-04 10:00:00

``card_versions.manifest`` is what the catalog knows of a stored version without compiling it
(app.domain.manifests: the document's digest, its exam points, each template's version, exam
point and content digests). Versions stored before it have none: the server fills it in from the
stored document at its next start-up (no formula is compiled for it).

Publishing no longer compiles older versions, and the audit log keeps what changed:
``audit_log.changes`` is what an edit changed (the versions it went from and to and a JSON Patch)
instead of the whole document in ``before`` and ``after``; older entries keep theirs.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b7e1f4a2c9d0"
down_revision: str | None = "d5f9c2a8e1b6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("card_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("manifest", sa.JSON(), nullable=True))
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("changes", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_column("changes")
    with op.batch_alter_table("card_versions", schema=None) as batch_op:
        batch_op.drop_column("manifest")
