"""Questions: generate a variant of a card's template and sign what identifies it into a token.

A token carries either the question's identity (``{"q": [card, point, template, version,
seed]}``, with ``"l": learner id`` when it was fetched with a bearer token: see
:func:`check_token_owner`) or, inside a practice session, the session and position (``{"s": id,
"p": n}``; the session belongs to its learner already): the
seed of a session question is derived from the server secret and never leaves the server, so an
exam question cannot be solved offline from the public card. Tokens are signed and time-stamped
(HMAC-SHA256, see ``COMPACT_PREFIX``; the itsdangerous tokens issued before are accepted until
they expire); grading regenerates the variant from the catalog (cheap: the variants of one
combination of parameter values share its evaluated content, app.domain.generation.combination),
so the server keeps no state between showing a question and grading it. A token never says which choice is right.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from itsdangerous import BadData, SignatureExpired, URLSafeTimedSerializer

from app.domain.cards import Card
from app.domain.catalog import Catalog, Located, RetiredQuestion
from app.domain.generation import Variant, generate, generate_for_point
from app.domain.identity import MAX_SEED, QuestionId
from app.domain.messages import Message
from app.domain.numerals import is_digits
from app.problems import Conflict, Forbidden, InvalidInput, NotFound

TOKEN_SALT = "infracards.question.v2"
LEGACY_TOKEN_SALT = "infracards.question.v1"
# Tokens signed since the compact format: "q3." + base64url(JSON content with "t", the Unix time
# of issue) + "." + base64url(HMAC-SHA256 of that, 20 bytes). A third of the signing cost of the
# itsdangerous format (v2), which is still accepted until its tokens expire.
COMPACT_PREFIX = "q3."
_MAC_BYTES = 20
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))  # json.dumps' output, encoder built once
_json_str = json.encoder.encode_basestring_ascii  # a JSON string, as _COMPACT_JSON writes one


@dataclass(frozen=True)
class SessionPosition:
    session_id: str
    position: int


@dataclass(frozen=True)
class TokenContent:
    """What a token names: a question, or a position in a practice session."""

    question: QuestionId | None
    position: SessionPosition | None
    issued_at: datetime
    learner_id: str | None = None  # the learner a question token was issued to (None: anyone)
    # Asked without its choices (``mode=typed``): only then is a typed answer recall, which FSRS
    # is told as stronger evidence than picking a choice.
    typed: bool = False


@dataclass(frozen=True)
class Question:
    variant: Variant
    token: str
    expires_at: datetime
    show_seed: bool = True  # False for exam questions: their seed stays on the server
    position: SessionPosition | None = None


def expired() -> Conflict:
    return Conflict(
        Message("This question has expired: load a new one."),
        code="question_expired",
    )


def retired() -> Conflict:
    return Conflict(
        Message("This question's template no longer exists: load a new question."),
        code="question_retired",
    )


def invalid_token() -> InvalidInput:
    return InvalidInput(
        Message("This question link is damaged or was not issued here: load a new question."),
        code="invalid_token",
    )


def token_not_yours() -> Forbidden:
    return Forbidden(
        Message("This question was issued to another learner: load your own question."),
        code="token_not_yours",
    )


def check_token_owner(content: TokenContent, learner_id: str) -> None:
    """A question token bound to a learner (fetched with their bearer token) is theirs only.

    A token fetched anonymously (no bearer token: the public question routes, the web pages'
    unbound questions, and every token issued before binding existed) carries no learner and
    stays answerable by any learner, like a question printed on paper: it holds nothing private
    (its seed is public) and whoever answers it records their own attempt. 403 otherwise.
    """
    if content.learner_id is not None and content.learner_id != learner_id:
        raise token_not_yours()


class QuestionSigner:
    """Signs question references into tokens and checks them back."""

    def __init__(self, secret_key: str, *, max_age_s: int) -> None:
        key = hashlib.sha256(f"infracards.question.v3:{secret_key}".encode()).digest()
        self._hmac = hmac.new(key, digestmod=hashlib.sha256)
        self._serializer = URLSafeTimedSerializer(secret_key, salt=TOKEN_SALT)
        self._legacy = URLSafeTimedSerializer(secret_key, salt=LEGACY_TOKEN_SALT)
        self.max_age_s = max_age_s

    def _dumps(self, content: dict[str, object]) -> str:
        return self._token(_COMPACT_JSON.encode({**content, "t": int(time.time())}))

    def _token(self, content_json: str) -> str:
        body = _b64(content_json.encode())
        return f"{COMPACT_PREFIX}{body}.{_b64(self._mac(body))}"

    def _mac(self, body: str) -> bytes:
        mac = self._hmac.copy()  # the key's padded inner and outer hashes, made once
        mac.update(body.encode())
        return mac.digest()[:_MAC_BYTES]

    def _loads(self, token: str) -> tuple[object, datetime]:
        """The content of a compact token and when it was issued; InvalidInput or Conflict."""
        body, _, mac = token[len(COMPACT_PREFIX) :].partition(".")
        expected = self._mac(body)
        try:
            valid = hmac.compare_digest(_unb64(mac), expected)
            content = json.loads(_unb64(body)) if valid else None
        except (ValueError, binascii.Error):
            raise invalid_token() from None
        if not isinstance(content, dict) or not _is_int(content.get("t")):
            raise invalid_token()
        if time.time() - content["t"] > self.max_age_s:
            raise expired()
        return content, datetime.fromtimestamp(content["t"], UTC)

    def sign(
        self, question: QuestionId, learner_id: str | None = None, *, typed: bool = False
    ) -> str:
        """A token for ``question``; bound to ``learner_id`` when given (see check_token_owner);
        ``typed``: the question is shown without its choices.

        Its content is what :meth:`_dumps` writes for ``{"q": [card, point, template, version,
        seed], "l": learner, "m": "typed", "t": now}``, spelled out (every question GET signs
        one: the encoder's set-up took half of it); tests/test_token_binding.py compares the
        two."""
        learner = "" if learner_id is None else f',"l":{_json_str(learner_id)}'
        mode = ',"m":"typed"' if typed else ""
        return self._token(
            f'{{"q":[{_json_str(question.card_id)},{_json_str(question.point)},'
            f"{_json_str(question.template_id)},{int(question.template_version)},"
            f'{int(question.seed)}]{learner}{mode},"t":{int(time.time())}}}'
        )

    def sign_position(self, position: SessionPosition) -> str:
        return self._dumps({"s": position.session_id, "p": position.position})

    def expires_at(self, issued_at: datetime | None = None) -> datetime:
        start = issued_at or datetime.now(UTC)
        return start + timedelta(seconds=self.max_age_s)

    def verify(self, token: str, catalog: Catalog | None = None) -> TokenContent:
        """What ``token`` names; InvalidInput when tampered, Conflict when expired."""
        if token.startswith(COMPACT_PREFIX):
            payload, issued_at = self._loads(token)
        else:
            try:
                payload, issued = self._serializer.loads(
                    token, max_age=self.max_age_s, return_timestamp=True
                )
            except SignatureExpired:
                raise expired() from None
            except BadData:
                return self._verify_legacy(token, catalog)
            issued_at = issued if issued.tzinfo else issued.replace(tzinfo=UTC)
        if isinstance(payload, dict) and "q" in payload:
            owner = payload.get("l")
            if owner is not None and not isinstance(owner, str):
                raise invalid_token()
            typed = payload.get("m") == "typed"
            return TokenContent(_question(payload["q"]), None, issued_at, owner, typed)
        if (
            isinstance(payload, dict)
            and isinstance(payload.get("s"), str)
            and _is_int(payload.get("p"))
        ):
            return TokenContent(None, SessionPosition(payload["s"], payload["p"]), issued_at)
        raise invalid_token()

    def _verify_legacy(self, token: str, catalog: Catalog | None) -> TokenContent:
        """Tokens issued before exam points had slugs: ``[card, number, template, version, seed]``."""
        try:
            payload, issued = self._legacy.loads(
                token, max_age=self.max_age_s, return_timestamp=True
            )
        except SignatureExpired:
            raise expired() from None
        except BadData:
            raise invalid_token() from None
        if not (
            isinstance(payload, list)
            and len(payload) == 5
            and isinstance(payload[0], str)
            and isinstance(payload[2], str)
            and all(_is_int(payload[i]) for i in (1, 3, 4))
        ):
            raise invalid_token()
        card_id, _number, template_id, version, seed = payload
        located = _locate_any_point(catalog, card_id, template_id, version) if catalog else None
        if located is None:
            raise retired()
        question = QuestionId(card_id, located.template.point, template_id, version, seed)
        issued_at = issued if issued.tzinfo else issued.replace(tzinfo=UTC)
        return TokenContent(question, None, issued_at)


def _locate_any_point(
    catalog: Catalog, card_id: str, template_id: str, version: int
) -> Located | None:
    return catalog.find_template(card_id, template_id, version)


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _b64(data: bytes) -> str:
    """Unpadded base64url (``base64.urlsafe_b64encode`` without its two Python layers)."""
    return binascii.b2a_base64(data, newline=False).translate(_URLSAFE).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _question(payload: object) -> QuestionId:
    if not (
        isinstance(payload, list)
        and len(payload) == 5
        and all(isinstance(payload[i], str) for i in (0, 1, 2))
        and all(_is_int(payload[i]) for i in (3, 4))
    ):
        raise invalid_token()
    card_id, point, template_id, version, seed = payload
    if not 0 <= seed <= MAX_SEED:
        raise invalid_token()
    return QuestionId(card_id, point, template_id, version, seed)


def random_seed() -> int:
    return secrets.randbelow(MAX_SEED + 1)


def get_card(catalog: Catalog, card_id: str, *, offered: bool = True) -> Card:
    """The card learners practise (``offered=False``: also a withdrawn one, for history)."""
    card = catalog.offered(card_id) if offered else catalog.latest(card_id)
    if card is None:
        raise NotFound(
            Message("There is no card %(card)s.", card=repr(card_id[:100])),
            code="card_not_found",
        )
    return card


def point_slug(card: Card, point: str | int) -> str:
    """The slug of an exam point given by slug or (old URLs) by number; NotFound otherwise."""
    found = card.point(point) if isinstance(point, int) else card.point_by_slug(point)
    if found is None and isinstance(point, str) and is_digits(point):
        found = card.point(int(point))
    if found is None:
        raise NotFound(
            Message(
                "Card %(card)s has no exam point %(point)s.",
                card=repr(card.id),
                point=repr(str(point)[:100]),
            ),
            code="point_not_found",
        )
    return found.slug


def new_question(
    *,
    catalog: Catalog,
    signer: QuestionSigner,
    card_id: str,
    point: str | int | None = None,
    seed: int | None = None,
    learner_id: str | None = None,
    typed: bool = False,
) -> Question:
    """A variant for the exam point (a random one when ``point`` is None) and its token (bound
    to ``learner_id`` when given; ``typed``: asked without its choices)."""
    card = get_card(catalog, card_id)
    slug = secrets.choice(card.points).slug if point is None else point_slug(card, point)
    seed = random_seed() if seed is None else seed
    if not 0 <= seed <= MAX_SEED:
        raise InvalidInput(
            Message("seed must be between 0 and %(limit)s", limit=MAX_SEED), code="invalid_seed"
        )
    variant = generate_for_point(card, slug, seed)
    return Question(
        variant=variant,
        token=signer.sign(variant.id, learner_id, typed=typed),
        expires_at=signer.expires_at(),
    )


def question_for_template(
    *,
    catalog: Catalog,
    signer: QuestionSigner,
    card_id: str,
    template_id: str,
    seed: int | None = None,
    learner_id: str | None = None,
) -> Question:
    """A fresh variant of one template of the latest card (a review, "practise again"), its
    token bound to ``learner_id`` when given."""
    card = get_card(catalog, card_id)
    template = card.template(template_id)
    if template is None:
        raise retired()
    variant = generate(card, template, random_seed() if seed is None else seed)
    return Question(
        variant=variant, token=signer.sign(variant.id, learner_id), expires_at=signer.expires_at()
    )


def regenerate(catalog: Catalog, question: QuestionId) -> Variant:
    """The variant a token or a stored attempt refers to; Conflict when it no longer exists."""
    try:
        return catalog.variant(question)
    except RetiredQuestion:
        raise retired() from None


def find_variant(catalog: Catalog, question: QuestionId) -> Variant | None:
    try:
        return catalog.variant(question)
    except RetiredQuestion:
        return None
