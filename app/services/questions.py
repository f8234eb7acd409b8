"""Questions: pick a card and exam point, generate a variant, and sign it into a token.

A question token carries (card id, exam point, template id, template version, seed), signed with
the secret key and time-stamped; grading regenerates the variant from it, so the server keeps no
state between showing a question and grading it. The token never says which choice is right.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from itsdangerous import BadData, SignatureExpired, URLSafeTimedSerializer

from app.domain.cards import Card
from app.domain.generation import Variant, find_template, generate, generate_for_point
from app.services.errors import Conflict, InvalidInput, NotFound

MAX_SEED = 2**31 - 1
TOKEN_SALT = "infracards.question.v1"


@dataclass(frozen=True)
class QuestionRef:
    """What identifies a variant: regenerating from it gives the same question."""

    card_id: str
    point: int
    template_id: str
    template_version: int
    seed: int


@dataclass(frozen=True)
class Question:
    variant: Variant
    token: str


class QuestionSigner:
    """Signs question references into tokens and checks them back (itsdangerous)."""

    def __init__(self, secret_key: str, *, max_age_s: int) -> None:
        self._serializer = URLSafeTimedSerializer(secret_key, salt=TOKEN_SALT)
        self.max_age_s = max_age_s

    def sign(self, ref: QuestionRef) -> str:
        payload = [ref.card_id, ref.point, ref.template_id, ref.template_version, ref.seed]
        return str(self._serializer.dumps(payload))

    def verify(self, token: str) -> QuestionRef:
        """The reference inside ``token``; InvalidInput when tampered, Conflict when expired."""
        try:
            payload = self._serializer.loads(token, max_age=self.max_age_s)
        except SignatureExpired:
            raise Conflict("question expired: load a new question") from None
        except BadData:
            raise InvalidInput(
                "invalid question token (tampered with or not issued here)"
            ) from None
        if not (
            isinstance(payload, list)
            and len(payload) == 5
            and isinstance(payload[0], str)
            and isinstance(payload[2], str)
            and all(
                isinstance(payload[i], int) and not isinstance(payload[i], bool) for i in (1, 3, 4)
            )
        ):
            raise InvalidInput("invalid question token (unexpected content)")
        card_id, point, template_id, version, seed = payload
        return QuestionRef(card_id, point, template_id, version, seed)


def random_seed() -> int:
    return secrets.randbelow(MAX_SEED + 1)


def check_seed(seed: int) -> int:
    if not 0 <= seed <= MAX_SEED:
        raise InvalidInput(f"seed must be between 0 and {MAX_SEED}")
    return seed


def get_card(cards: dict[str, Card], card_id: str) -> Card:
    card = cards.get(card_id)
    if card is None:
        raise NotFound(f"unknown card {card_id[:100]!r}")
    return card


def random_point(card: Card) -> int:
    return secrets.choice(card.points).number


def new_question(
    *,
    cards: dict[str, Card],
    signer: QuestionSigner,
    card_id: str,
    point: int | None = None,
    seed: int | None = None,
) -> Question:
    """A variant for the exam point (a random one when ``point`` is None) and its token."""
    card = get_card(cards, card_id)
    if point is None:
        point = random_point(card)
    elif card.point(point) is None:
        raise NotFound(f"card {card_id!r} has no exam point {point}")
    seed = random_seed() if seed is None else check_seed(seed)
    variant = generate_for_point(card, point, seed)
    ref = QuestionRef(
        variant.card_id, variant.point, variant.template_id, variant.template_version, seed
    )
    return Question(variant=variant, token=signer.sign(ref))


def regenerate(cards: dict[str, Card], ref: QuestionRef) -> Variant:
    """The variant a token or a stored attempt refers to; Conflict when it no longer exists."""
    card = cards.get(ref.card_id)
    found = find_template(card, ref.template_id) if card is not None else None
    if card is None or found is None:
        raise Conflict("question expired: its card or template no longer exists")
    point, template = found
    if template.version != ref.template_version or point.number != ref.point:
        raise Conflict("question expired: its template has changed since it was shown")
    if not 0 <= ref.seed <= MAX_SEED:
        raise InvalidInput("invalid question token (seed out of range)")
    return generate(card, template, ref.seed)


def question_from_token(*, cards: dict[str, Card], signer: QuestionSigner, token: str) -> Question:
    """The question a token stands for (to show it again)."""
    return Question(variant=regenerate(cards, signer.verify(token)), token=token)
