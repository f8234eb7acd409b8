"""A learner's changes, numbered, for delta sync: what an offline app fetches in one call.

Every write transaction that changes a learner's attempts or review state takes the learner's
next change number (``learners.change_seq`` + 1, under the learner row's lock) and stamps the
rows it writes with it (``change_seq`` of ``attempts`` and ``review_items``): a new answer, the
rating it gives, an exam's answers told and rated at its end, a mistake dismissed, a merged
install's history. Because one learner's changes take the row lock in turn, a change number is
visible only once every smaller one is: reading the learner's number first and then the rows up
to it never skips a row that commits later with a smaller number (PostgreSQL or SQLite alike).

Reading them: app.practice.sync.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Connection, bindparam, select, update

from app.batch import ByKeys
from app.models import Attempt, Learner, PracticeSession, ReviewItem

_LEARNERS = Learner.__table__

# The learners of a batch, locked in id order (PostgreSQL: FOR NO KEY UPDATE, which inserting
# rows that refer to them does not wait for) with their latest change numbers.
LEARNER_CHANGES = ByKeys(
    (_LEARNERS.c.id,),
    lambda where: (
        select(_LEARNERS.c.id, _LEARNERS.c.change_seq)
        .where(where)
        .order_by(_LEARNERS.c.id)
        .with_for_update(key_share=True)
    ),
)
_SET_CHANGE = (
    update(_LEARNERS)
    .where(_LEARNERS.c.id == bindparam("change_learner_id"))
    .values(change_seq=bindparam("change"))
)
# A review item's change: its learner's latest, set earlier in the same transaction.
ITEM_CHANGE = (
    select(_LEARNERS.c.change_seq)
    .where(_LEARNERS.c.id == ReviewItem.__table__.c.learner_id)
    .scalar_subquery()
)
NEW_ITEM_CHANGE = (
    select(_LEARNERS.c.change_seq)
    .where(_LEARNERS.c.id == bindparam("change_learner_id"))
    .scalar_subquery()
)


def next_changes(rows: Sequence[Sequence[object]]) -> dict[str, int]:
    """Each learner's next change number, from the rows :data:`LEARNER_CHANGES` read."""
    return {str(row[0]): int(str(row[1])) + 1 for row in rows}


def set_changes(connection: Connection, changes: Mapping[str, int]) -> None:
    """Store the learners' new change numbers (in the write transaction that locked them)."""
    if changes:
        connection.execute(
            _SET_CHANGE,
            [{"change_learner_id": id_, "change": seq} for id_, seq in sorted(changes.items())],
        )


def next_change(connection: Connection, learner_id: str) -> int:
    """Take the learner's next change number in the caller's write transaction (the learner's
    row stays locked until it ends)."""
    return int(
        connection.execute(
            update(_LEARNERS)
            .where(_LEARNERS.c.id == learner_id)
            .values(change_seq=_LEARNERS.c.change_seq + 1)
            .returning(_LEARNERS.c.change_seq)
        ).scalar_one()
    )


def session_change(connection: Connection, session_id: str) -> int:
    """The next change number of the learner of a practice session (0: no such session)."""
    learner_id = connection.scalar(
        select(PracticeSession.learner_id).where(PracticeSession.id == session_id)
    )
    return next_change(connection, learner_id) if learner_id is not None else 0


def told_at(connection: Connection, session_id: str, change: int) -> None:
    """An exam's answers, told at its end, are that change's (a delta sync sends them then)."""
    connection.execute(
        update(Attempt).where(Attempt.practice_session_id == session_id).values(change_seq=change)
    )
