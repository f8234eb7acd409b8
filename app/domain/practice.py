"""Practice sessions as plans: which templates come, in which order, for each mode.

- ``point``: one exam point's templates; ``card`` and ``exam``: the whole card's;
  ``mistakes`` and ``review``: the given templates (those answered wrong, or those due), with the
  other templates of their exam points to fall back to.

Every mode chooses its questions by the rules of :mod:`app.domain.selection`: rounds over the
templates in scope (and over its exam points), no key the learner saw in their last answers,
new numbers for a template seen recently.

Seeds are not part of the plan: the service derives each position's seed from a server secret,
so a learner who knows the public card cannot compute the key of an exam question offline. A
plan entry keeps only which of the position's seeds was chosen (``draw``: 0 is the first).
"""

from __future__ import annotations

import hashlib
import hmac
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .cards import Card, Template
from .identity import MAX_SEED
from .selection import Seeds, SeenQuestion, choose_questions

MODES = ("point", "card", "mistakes", "review", "exam")
DEFAULT_SIZE = {"point": 10, "card": 20, "mistakes": 10, "review": 20, "exam": 20}
MAX_SIZE = 100
EXAM_SECONDS_PER_QUESTION = 90


@dataclass(frozen=True)
class PlannedQuestion:
    point: str
    template_id: str
    template_version: int
    draw: int = 0  # which of the position's seeds (see position_seed)

    def to_json(self) -> dict[str, object]:
        planned: dict[str, object] = {
            "point": self.point,
            "template_id": self.template_id,
            "template_version": self.template_version,
        }
        if self.draw:
            planned["draw"] = self.draw
        return planned


def same_points(card: Card, templates: Sequence[Template]) -> list[Template]:
    """Every template of the exam points of ``templates`` (what a narrow session falls back to)."""
    points = {t.point for t in templates}
    return [t for t in card.templates() if t.point in points]


def plan_session(
    card: Card,
    scope: Sequence[Template],
    size: int,
    *,
    seen: Sequence[SeenQuestion],
    seeds: Seeds,
    rng: random.Random,
    wider: Sequence[Template] = (),
) -> list[PlannedQuestion]:
    """``size`` questions on ``scope`` after the learner's ``seen`` answers (oldest first)."""
    picks = choose_questions(card.id, scope, size, seen=seen, seeds=seeds, rng=rng, wider=wider)
    return [
        PlannedQuestion(p.template.point, p.template.id, p.template.version, p.draw) for p in picks
    ]


def position_seed(secret: bytes, session_id: str, position: int, draw: int = 0) -> int:
    """The seed of a session's question at ``position`` (its ``draw``-th): HMAC of the server
    secret."""
    message = f"{session_id}:{position}" if draw == 0 else f"{session_id}:{position}:{draw}"
    digest = hmac.new(secret, message.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % (MAX_SEED + 1)


def session_end(
    *,
    started_at: datetime,
    deadline: datetime | None,
    finished_at: datetime | None,
    answered_at: Sequence[datetime],
    size: int,
    now: datetime,
) -> datetime | None:
    """When a session ended, or None while it runs (every moment timezone-aware).

    It ends when the learner ends it (``finished_at``), else at its last answer once every
    question has one, else at its deadline once that has passed: a timed exam ends itself,
    whatever the browser does. Never after the deadline: the time an exam used is at most its
    time (an answer sent before the deadline and arriving just after still counts, but does not
    lengthen the exam). The same moment for every read after the end, so storing it is
    idempotent."""
    end: datetime | None = finished_at
    if end is None and size > 0 and len(answered_at) >= size:
        end = max(answered_at)
    if end is None and deadline is not None and now > deadline:
        end = deadline
    if end is not None and deadline is not None:
        end = min(end, deadline)
    if end is not None:
        end = max(end, started_at)
    return end
