"""Practice sessions as plans: which templates come, in which order, for each mode.

- ``point``: one exam point; its templates in shuffled rounds, so a template comes back only
  after every other template of the point has been shown.
- ``card`` and ``exam``: the whole card; each round visits every exam point once (in shuffled
  order), and each point walks its own shuffled rounds of templates, so neither a point nor a
  template repeats before the others have come.
- ``mistakes`` and ``review``: the given templates (those answered wrong, or those due), in
  rounds the same way.

Seeds are not part of the plan: the service derives each position's seed from a server secret,
so a learner who knows the public card cannot compute the key of an exam question offline.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .cards import Card, ExamPoint
from .identity import MAX_SEED

MODES = ("point", "card", "mistakes", "review", "exam")
DEFAULT_SIZE = {"point": 10, "card": 20, "mistakes": 10, "review": 20, "exam": 20}
MAX_SIZE = 100
EXAM_SECONDS_PER_QUESTION = 90


@dataclass(frozen=True)
class PlannedQuestion:
    point: str
    template_id: str
    template_version: int

    def to_json(self) -> dict[str, object]:
        return {
            "point": self.point,
            "template_id": self.template_id,
            "template_version": self.template_version,
        }


def _rounds(items: Sequence[str], rng: random.Random) -> Iterator[str]:
    """An endless sequence of shuffled rounds over ``items``; no item twice in a row at joins."""
    last: str | None = None
    while True:
        order = list(items)
        rng.shuffle(order)
        if len(order) > 1 and order[0] == last:
            order.append(order.pop(0))
        yield from order
        last = order[-1]


def plan_point(point: ExamPoint, size: int, rng: random.Random) -> list[PlannedQuestion]:
    versions = {t.id: t.version for t in point.templates}
    walk = _rounds(list(versions), rng)
    plan = []
    for _ in range(size):
        template_id = next(walk)
        plan.append(PlannedQuestion(point.slug, template_id, versions[template_id]))
    return plan


def plan_card(card: Card, size: int, rng: random.Random) -> list[PlannedQuestion]:
    walks = {p.slug: _rounds([t.id for t in p.templates], rng) for p in card.points}
    points = _rounds([p.slug for p in card.points], rng)
    versions = {t.id: t.version for t in card.templates()}
    plan = []
    for _ in range(size):
        slug = next(points)
        template_id = next(walks[slug])
        plan.append(PlannedQuestion(slug, template_id, versions[template_id]))
    return plan


def plan_templates(
    items: Sequence[PlannedQuestion], size: int, rng: random.Random
) -> list[PlannedQuestion]:
    """Rounds over the given (point, template) items, ``size`` questions (at least one round)."""
    if not items:
        return []
    by_key = {f"{i.point}/{i.template_id}": i for i in items}
    walk = _rounds(list(by_key), rng)
    return [by_key[next(walk)] for _ in range(size)]


def position_seed(secret: bytes, session_id: str, position: int) -> int:
    """The seed of a session's question at ``position``: HMAC of the server secret."""
    digest = hmac.new(secret, f"{session_id}:{position}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % (MAX_SEED + 1)
