"""Practice sessions as plans: which templates come, in which order, for each mode.

A session's scope is one card, or the deck (every card at once):

- ``point``: one exam point's templates; ``card`` and ``exam``: the whole card's;
  ``mistakes`` and ``review``: the given templates (those answered wrong, or those due), with the
  other templates of their exam points to fall back to.
- On the deck, ``mixed`` and ``exam`` draw from every card in play, ``mistakes`` and ``review``
  from the mistakes and reviews of every card: each card's part is chosen as a one-card session
  would choose it, and the cards are interleaved (:func:`interleave`: each card's questions
  spread evenly over the session, so that a question seldom follows one of its own card).

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
from datetime import UTC, datetime
from fractions import Fraction
from typing import Literal

from .cards import Card, Template
from .identity import MAX_SEED
from .selection import Chooser, Pick, Seeds, SeenQuestion, choose_questions

MODES = ("point", "card", "mistakes", "review", "exam", "mixed")
SCOPES = ("card", "deck")
Scope = Literal["card", "deck"]
# The modes of each scope: a deck session has no exam point or card of its own; "mixed" is the
# deck's counterpart of a card's "card" (everything in play, interleaved).
SCOPE_MODES: dict[str, tuple[str, ...]] = {
    "card": ("point", "card", "mistakes", "review", "exam"),
    "deck": ("mixed", "mistakes", "review", "exam"),
}
DEFAULT_SIZE = {"point": 10, "card": 20, "mistakes": 10, "review": 20, "exam": 20, "mixed": 20}
MAX_SIZE = 100
EXAM_SECONDS_PER_QUESTION = 90


def spans_the_deck(cards: int) -> bool:
    """Whether a deck session is worth offering for something to do on ``cards`` cards (reviews
    due, mistakes, cards started): on one card it is that card's session."""
    return cards > 1


@dataclass(frozen=True)
class PlannedQuestion:
    card_id: str
    point: str
    template_id: str
    template_version: int
    draw: int = 0  # which of the position's seeds (see position_seed)

    @classmethod
    def of(cls, card_id: str, pick: Pick) -> PlannedQuestion:
        template = pick.template
        return cls(card_id, template.point, template.id, template.version, pick.draw)

    def to_json(self) -> dict[str, object]:
        planned: dict[str, object] = {
            "card_id": self.card_id,
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
    return [PlannedQuestion.of(card.id, pick) for pick in picks]


@dataclass(frozen=True)
class CardPart:
    """One card's part of a deck session: its templates in scope, those to fall back to
    (``wider``, as a one-card session's), and how many questions it asks."""

    card: Card
    scope: Sequence[Template]
    count: int
    wider: Sequence[Template] = ()


def plan_deck_session(
    parts: Sequence[CardPart],
    *,
    seen: Sequence[SeenQuestion],
    seeds: Seeds,
    rng: random.Random,
) -> list[PlannedQuestion]:
    """The questions of every part, interleaved (:func:`interleave`), after the learner's
    ``seen`` answers (oldest first). Each card's questions are chosen by the rules of a one-card
    session (rounds over its templates and exam points), and every question, whichever its card,
    counts as seen by the next one (no key twice among the recent answers)."""
    parts = [part for part in parts if part.count > 0 and part.scope]
    history = list(seen)
    choosers = [
        Chooser(part.card.id, part.scope, history=history, rng=rng, wider=part.wider)
        for part in parts
    ]
    return [
        PlannedQuestion.of(parts[index].card.id, choosers[index].choose(position, seeds))
        for position, index in enumerate(interleave([part.count for part in parts]))
    ]


def interleave(counts: Sequence[int]) -> list[int]:
    """Which part each position of a session takes, for parts of ``counts`` questions: the
    ``k``-th of a part's ``n`` questions goes at (2k + 1) / 2n of the way through (each part
    spread evenly over the whole session), ties going to the earlier part. Two parts of 2 give
    0, 1, 0, 1; parts of 3 and 1 give 0, 0, 1, 0."""
    slots = [
        (Fraction(2 * k + 1, 2 * count), index)
        for index, count in enumerate(counts)
        for k in range(count)
    ]
    return [index for _, index in sorted(slots)]


def share(size: int, weights: Sequence[int]) -> list[int]:
    """``size`` questions shared between parts in proportion to their ``weights`` (positive):
    each gets the whole part of its share, and the questions left over go to the largest
    remainders (ties: the earlier part)."""
    total = sum(weights)
    if total <= 0:
        return [0] * len(weights)
    exact = [Fraction(size * weight, total) for weight in weights]
    counts = [int(value) for value in exact]
    left = size - sum(counts)
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for index in by_remainder[:left]:
        counts[index] += 1
    return counts


def position_seed(secret: bytes, session_id: str, position: int, draw: int = 0) -> int:
    """The seed of a session's question at ``position`` (its ``draw``-th): HMAC of the server
    secret."""
    message = f"{session_id}:{position}" if draw == 0 else f"{session_id}:{position}:{draw}"
    digest = hmac.new(secret, message.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % (MAX_SEED + 1)


def answered_within(
    claimed: datetime | None, issued_at: datetime, received_at: datetime
) -> datetime | None:
    """When an answer was given as its client says (an offline answer's ``answered_at``), kept
    within what the server knows for certain: not before its question was issued (the token's
    time), not after the answer arrived. A device whose clock is wrong, or a moment no calendar
    of a database holds (year 1 at UTC+14), cannot place an answer anywhere else. A moment
    without a time zone is taken as UTC."""
    if claimed is None:
        return None
    if claimed.tzinfo is None:
        claimed = claimed.replace(tzinfo=UTC)
    return min(max(claimed, issued_at), received_at)


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
