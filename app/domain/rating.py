"""Rating answers into spaced-review items: the rules, as a pure function of what is known.

Only a learner's first answer to a question rates: its (learner, card, template) review item is
scheduled with FSRS (app.domain.scheduling) and the rating logged; a retry after seeing the key
rates nothing. A learner who falls for a pitfall for the ``PITFALL_REPEAT``-th time (counting the
first answers stored before and those rated before in the same call) has every other template of
the card carrying that pitfall made due now, its item created when missing.

The caller reads what :func:`needs` names, calls :func:`rate` and makes the writes it returns;
nothing here reads or writes a database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime

from app.domain.scheduling import FsrsState, bring_forward, new_state, review

PITFALL_REPEAT = 2  # falling for a pitfall this often brings its templates forward

ReviewKey = tuple[str, str, str]  # (learner id, card id, template id): a review item
FallKey = tuple[str, str, str]  # (learner id, card id, pitfall id)


@dataclass(frozen=True, slots=True)
class Answer:
    """A stored answer as rating sees it (answers are rated in the order given)."""

    learner_id: str
    card_id: str
    point: str
    template_id: str
    correct: bool
    pitfall_id: str | None
    duration_ms: int | None
    at: datetime
    first_answer: bool
    # The card's templates offering the pitfall of a wrong answer (template id -> exam point).
    carriers: Mapping[str, str] = field(default_factory=dict)
    # Typed (a number recalled) rather than chosen: a right one rates stronger (scheduling).
    typed: bool = False
    # When it was given, as its client says (an offline answer's, kept between its question's
    # issue and ``at``: app.domain.practice.answered_within); None: at ``at``.
    answered_at: datetime | None = None

    def reviewed_at(self, item: Item) -> datetime:
        """The moment the answer reviews ``item`` at: when it was given, but never before the
        item's last review (an answer given earlier on another device, synced later, rates
        after the ones already rated)."""
        given = self.at if self.answered_at is None else min(self.answered_at, self.at)
        given = given.astimezone(UTC)  # as FSRS takes it (a client may send another offset)
        last = item.last_review_at
        return given if last is None or given >= last else last

    @property
    def item(self) -> ReviewKey:
        """The review item the answer is about."""
        return (self.learner_id, self.card_id, self.template_id)

    @property
    def fall(self) -> FallKey | None:
        """The pitfall a rated answer fell for."""
        if not self.first_answer or self.correct or self.pitfall_id is None:
            return None
        return (self.learner_id, self.card_id, self.pitfall_id)

    def forward(self) -> list[tuple[ReviewKey, str]]:
        """The items a fall may bring forward (with their exam points)."""
        if self.fall is None:
            return []
        return [
            ((self.learner_id, self.card_id, template), point)
            for template, point in self.carriers.items()
            if template != self.template_id
        ]


@dataclass(frozen=True, slots=True)
class Item:
    """A review item's schedule."""

    point: str
    state: FsrsState
    due_at: datetime
    reviews: int = 0
    lapses: int = 0
    last_review_at: datetime | None = None


@dataclass(frozen=True)
class Needs:
    """What rating some answers must know: their learners' exam dates, the items they may touch,
    and how often the learners fell for the pitfalls they fall for (first answers stored)."""

    learners: set[str]
    items: set[ReviewKey]
    falls: set[FallKey]


@dataclass(frozen=True)
class Known:
    """What was read for :class:`Needs`: stored items by key (with their ids), exam dates and
    time zones (an IANA name, None: UTC) by learner, falls stored by pitfall (missing: none)."""

    items: Mapping[ReviewKey, tuple[int, Item]]
    exam_dates: Mapping[str, date | None]
    falls: Mapping[FallKey, int]
    time_zones: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Log:
    """One rating: of the answer at index ``answer`` (its attempt), into item ``item``."""

    answer: int
    item: ReviewKey
    rating: int
    reviewed_at: datetime
    due_before: datetime | None
    due_after: datetime


@dataclass(frozen=True)
class Writes:
    """What rating leaves to write: the items to create (by key), the stored items changed (by
    id, as they are now) and the ratings' logs, in order; ``ids``: the stored items' ids."""

    created: dict[ReviewKey, Item]
    changed: dict[int, Item]
    logs: list[Log]
    ids: dict[ReviewKey, int]


def first_answers(questions: Sequence[Hashable], answered: Iterable[Hashable]) -> list[bool]:
    """Whether each answer (named by its learner and question, in order) is the learner's first
    to the question, given the ``answered`` ones stored before."""
    seen = set(answered)
    firsts = []
    for question in questions:
        firsts.append(question not in seen)
        seen.add(question)
    return firsts


def needs(answers: Sequence[Answer]) -> Needs:
    rated = [a for a in answers if a.first_answer]
    return Needs(
        learners={a.learner_id for a in rated},
        items={a.item for a in rated} | {key for a in rated for key, _ in a.forward()},
        falls={fall for a in rated if (fall := a.fall) is not None},
    )


def rate(answers: Sequence[Answer], known: Known) -> Writes:
    """Rate the first answers among ``answers``, one after the other."""
    items = {key: item for key, (_, item) in known.items.items()}
    ids = {key: item_id for key, (item_id, _) in known.items.items()}
    falls = dict(known.falls)
    changed: set[ReviewKey] = set()
    logs = []
    for index, answer in enumerate(answers):
        if not answer.first_answer:
            continue
        key = answer.item
        item = items.get(key) or _new_item(key, answer.point, answer.at)
        at = answer.reviewed_at(item)
        outcome = review(
            item.state,
            correct=answer.correct,
            duration_ms=answer.duration_ms,
            now=at,
            exam_date=known.exam_dates.get(answer.learner_id),
            item_key=":".join(key),
            typed=answer.typed,
            zone_name=known.time_zones.get(answer.learner_id),
        )
        logs.append(
            Log(
                answer=index,
                item=key,
                rating=outcome.rating,
                reviewed_at=at,
                due_before=item.due_at if item.reviews else None,
                due_after=outcome.due,
            )
        )
        items[key] = Item(
            point=answer.point,
            state=outcome.state,
            due_at=outcome.due,
            reviews=item.reviews + 1,
            lapses=item.lapses + (0 if answer.correct else 1),
            last_review_at=at,
        )
        changed.add(key)
        fall = answer.fall
        if fall is None:
            continue
        falls[fall] = falls.get(fall, 0) + 1
        if falls[fall] < PITFALL_REPEAT:
            continue
        for other_key, point in answer.forward():
            other = items.get(other_key) or _new_item(other_key, point, answer.at)
            if other.due_at > answer.at:
                other = replace(
                    other, state=bring_forward(other.state, answer.at), due_at=answer.at
                )
            items[other_key] = other
            changed.add(other_key)
    by_id = {ids[key]: key for key in changed if key in ids}
    return Writes(
        created={key: items[key] for key in sorted(changed) if key not in ids},
        changed={item_id: items[by_id[item_id]] for item_id in sorted(by_id)},
        logs=logs,
        ids=ids,
    )


def _new_item(key: ReviewKey, point: str, now: datetime) -> Item:
    """A new item, due now; its FSRS card named by its key (FSRS's own default id reads the
    clock)."""
    return Item(point=point, state=new_state(fsrs_card_id(key), now), due_at=now)


def fsrs_card_id(key: ReviewKey) -> int:
    """A stable number for an item's FSRS card (48 bits: exact in JSON)."""
    return int.from_bytes(hashlib.sha256(":".join(key).encode()).digest()[:6], "big")
