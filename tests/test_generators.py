"""Generator 2: variants drawn from BLAKE2b blocks of the question's key, as cards/README.md
specifies it; generator 1 (Python's Mersenne Twister) for cards that do not name one; and a
template version that keeps its generator for good, so stored questions regenerate as shown."""

import copy
import hashlib
import itertools
import random
from collections import Counter

import pytest

from app.domain.cards import CardError, parse_card
from app.domain.catalog import Catalog, check_versions
from app.domain.generation import HashDraws, generate, seeded
from app.domain.identity import QuestionId
from tests.test_generation import CARD


class ReferenceStream:
    """The specification, read literally: the digests one after another, a number taking whole
    bytes, never straddling two digests; written apart from HashDraws (no shared code)."""

    def __init__(self, key: str) -> None:
        self.key = key.encode("utf-8")
        self.digests: list[bytes] = []
        self.digest_index = 0
        self.offset = 0

    def digest(self, j: int) -> bytes:
        while len(self.digests) <= j:
            salt = len(self.digests).to_bytes(16, "little")
            self.digests.append(hashlib.blake2b(self.key, digest_size=64, salt=salt).digest())
        return self.digests[j]

    def number(self, bits: int) -> int:
        width = -(-bits // 8)
        if self.offset + width > 64:
            self.digest_index, self.offset = self.digest_index + 1, 0
        chunk = self.digest(self.digest_index)[self.offset : self.offset + width]
        self.offset += width
        value = sum(byte << (8 * i) for i, byte in enumerate(chunk))
        return value % (2**bits)

    def below(self, n: int) -> int:
        while True:
            value = self.number(n.bit_length())
            if value < n:
                return value

    def shuffle(self, items: list) -> None:
        for i in reversed(range(1, len(items))):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


def test_the_first_digest_is_the_plain_blake2b_of_the_key():
    """Golden: salt 0 is BLAKE2b's default, so the stream starts with the plain digest."""
    key = "zero-memory-offload:p1-total-16psi:2:42"
    plain = hashlib.blake2b(key.encode(), digest_size=64).digest()
    draws = HashDraws(key)
    assert [draws.getrandbits(8) for _ in range(64)] == list(plain)
    assert (
        draws.getrandbits(8)
        == hashlib.blake2b(key.encode(), digest_size=64, salt=(1).to_bytes(16, "little")).digest()[
            0
        ]
    )


def test_generator_2_draws_follow_the_specification_across_digests():
    """Every kind of draw, small and large ranges (the inline paths and the general one), long
    enough to cross several digests, and the streams stay in step after each draw."""
    for seed in range(120):
        key = f"card:tpl-{seed}:3:{seed * 7919}"
        ours, reference = seeded(key, 2), ReferenceStream(key)
        assert isinstance(ours, HashDraws)
        for size in (1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 255, 256, 257, 1000, 2**31 - 1):
            assert ours.below(size) == reference.below(size)
            items = list(range(min(size, 300)))
            assert ours.choice(items) == items[reference.below(len(items))]
            mine, theirs = list(items[:40]), list(items[:40])
            ours.shuffle(mine)
            reference.shuffle(theirs)
            assert mine == theirs
        long_list = list(range(300))  # above 256 items: the general path
        mine, theirs = list(long_list), list(long_list)
        ours.shuffle(mine)
        reference.shuffle(theirs)
        assert mine == theirs
        assert ours.getrandbits(40) == reference.number(40)
        assert ours.below(10**12) == reference.below(10**12)
    with pytest.raises(ValueError):
        seeded("x", 2).getrandbits(513)
    with pytest.raises(IndexError):
        seeded("x", 2).choice([])


def test_generator_2_is_uniform():
    """Over 24,000 keys every answer rank (below 4) and every order of four choices comes up
    about equally often (chi-square well under its 0.1 % critical value)."""
    ranks, orders = Counter(), Counter()
    keys = 24_000
    for index in range(keys):
        draws = seeded(f"uniform:{index}", 2)
        ranks[draws.below(4)] += 1
        order = [0, 1, 2, 3]
        draws.shuffle(order)
        orders[tuple(order)] += 1
    assert set(ranks) == {0, 1, 2, 3}
    assert set(orders) == set(itertools.permutations(range(4)))

    def chi_square(counts: Counter, cells: int) -> float:
        expected = keys / cells
        return sum((counts[c] - expected) ** 2 / expected for c in counts)

    assert chi_square(ranks, 4) < 16.27  # 3 degrees of freedom, p = 0.001
    assert chi_square(orders, 24) < 49.73  # 23 degrees of freedom, p = 0.001


def test_unknown_generators_are_refused():
    assert seeded("x", 1).below(10) == random.Random("x").randrange(10)
    with pytest.raises(ValueError, match="unknown generator 3"):
        seeded("x", 3)
    data = copy.deepcopy(CARD)
    data["generator"] = 3
    with pytest.raises(CardError, match="generator"):
        parse_card(data)


def _card(generator: int | None, version: int = 1, template_version: int = 1):
    data = copy.deepcopy(CARD)
    data["version"] = version
    if generator is not None:
        data["generator"] = generator
    for template in data["points"][0]["templates"]:
        template["version"] = template_version
    return parse_card(data)


def test_a_card_s_generator_draws_its_variants():
    """A card without ``generator`` draws with the Mersenne Twister, one with ``generator: 2``
    from the BLAKE2b stream: the parameters are the first draws of the variant's own stream."""
    old, new = _card(None), _card(2)
    template_old, template_new = old.points[0].templates[0], new.points[0].templates[0]
    assert (template_old.generator, template_new.generator) == (1, 2)
    names = list(template_old.params)
    for seed in range(60):
        key = f"mini:{template_old.id}:1:{seed}"
        mersenne, stream = random.Random(key), ReferenceStream(key)
        by_mersenne = {
            name: template_old.params[name].values[
                mersenne.randrange(len(template_old.params[name].values))
            ]
            for name in names
        }
        by_stream = {
            name: template_new.params[name].values[
                stream.below(len(template_new.params[name].values))
            ]
            for name in names
        }
        assert generate(old, template_old, seed).content.values == by_mersenne
        assert generate(new, template_new, seed).content.values == by_stream


def test_a_template_version_keeps_its_generator():
    """Moving a card to generator 2 without new template versions is refused (stored questions
    would regenerate differently); with new versions both live side by side in the catalog, and
    an old question still regenerates with the Mersenne Twister."""
    old = _card(None, version=1, template_version=1)
    with pytest.raises(CardError, match=r"generator 2 instead of 1 .* raise the template's"):
        check_versions(_card(2, version=2, template_version=1), [old])
    new = _card(2, version=2, template_version=2)
    check_versions(new, [old])
    catalog = Catalog([old, new])
    template = old.points[0].templates[0]
    for seed in range(40):
        question = QuestionId("mini", template.point, template.id, 1, seed)
        regenerated = catalog.variant(question)
        assert regenerated.content.values == generate(old, template, seed).content.values
        assert [c.text for c in regenerated.choices] == [
            c.text for c in generate(old, template, seed).choices
        ]
    fresh = catalog.latest("mini").points[0].templates[0]
    assert (fresh.version, fresh.generator) == (2, 2)


def test_the_shipped_card_draws_from_generator_2(card):
    assert {template.generator for template in card.templates()} == {2}


def _generator_1_era(text: str) -> str:
    """The shipped card file one version back, as a card before generator 2: no ``generator``,
    each template one version lower; the templates added since (still at version 1) did not
    exist."""
    import yaml

    data = yaml.safe_load(text)
    assert data.pop("generator") == 2
    data["version"] -= 1
    for point in data["points"]:
        point["templates"] = [
            {**template, "version": template["version"] - 1}
            for template in point["templates"]
            if template["version"] > 1
        ]
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


def _seed_picking_one_template(before, after, point_number: int) -> int:
    """A seed that picks the same template of the exam point on both card files (templates added
    since the upgrade change which template a seed picks)."""
    from app.domain.cards import read_card
    from app.domain.generation import generate_for_point

    old, new = read_card(before), read_card(after)
    slug = new.point(point_number).slug

    def picked(card, seed):
        return generate_for_point(card, slug, seed).id.template_id

    return next(s for s in range(77, 100_000) if picked(old, s) == picked(new, s))


def test_a_question_shown_before_the_upgrade_is_graded_as_it_was_shown(tmp_path, db_url):
    """A server on the card one version back shows a question; after the upgrade (the card file,
    published at start-up beside that version) its token grades it against the
    choices shown, the attempt keeps the old template version, and new questions are drawn
    from the new versions."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import CARD_ID, CARDS_DIR, make_settings, one_card_folder

    before = one_card_folder(tmp_path / "cards-before")
    after = one_card_folder(tmp_path / "cards-after")
    path = before / f"{CARD_ID}.yaml"
    path.write_text(_generator_1_era(path.read_text(encoding="utf-8")), encoding="utf-8")
    seed = _seed_picking_one_template(path, CARDS_DIR / f"{CARD_ID}.yaml", 2)

    with TestClient(create_app(make_settings(tmp_path, db_url, cards_dir=before))) as client:
        learner = client.post("/api/v1/learners").json()["access_token"]
        auth = {"Authorization": f"Bearer {learner}"}
        shown = client.get(f"/api/v1/cards/{CARD_ID}/points/2/question?seed={seed}", headers=auth)
        assert shown.status_code == 200
        shown = shown.json()
    old_version = shown["template_version"]

    with TestClient(create_app(make_settings(tmp_path, db_url, cards_dir=after))) as client:
        fresh = client.get(f"/api/v1/cards/{CARD_ID}/points/2/question?seed={seed}").json()
        assert fresh["template_id"] == shown["template_id"]
        assert fresh["template_version"] == old_version + 1
        # Every choice of the old question is graded as that question: right for one choice,
        # and each wrong one with its own value shown back.
        verdicts = []
        for index, choice in enumerate(shown["choices"]):
            answered = client.post(
                "/api/v1/answers",
                json={
                    "token": shown["token"],
                    "choice_id": choice["id"],
                    "client_answer_id": f"upgrade-{index}",
                },
                headers=auth,
            )
            assert answered.status_code == 200, answered.text
            verdicts.append(answered.json())
        assert sum(v["correct"] for v in verdicts) == 1
        shown_texts = [(c["id"], c["text"]) for c in shown["choices"]]
        for verdict in verdicts:
            assert verdict["correct_choice_id"] == verdicts[0]["correct_choice_id"]
            assert [(c["id"], c["text"]) for c in verdict["choices"]] == shown_texts
        history = client.get("/api/v1/me/attempts", headers=auth)
        assert history.status_code == 200
        attempts = history.json()["items"]
        assert len(attempts) == len(shown["choices"])
        for attempt in attempts:
            assert attempt["template_version"] == old_version
            assert attempt["stem"] == shown["stem"]


def test_a_card_started_in_the_dashboard_draws_from_generator_2():
    from app.domain.authoring import new_card_document

    document = new_card_document("fresh-card", {"en": "Fresh", "zh": "新卡"})
    assert document["generator"] == 2
    written = {**copy.deepcopy(CARD), "generator": document["generator"]}  # templates added
    assert {template.generator for template in parse_card(written).templates()} == {2}


def test_generator_2_streams_are_freed_as_soon_as_dropped():
    """A question's stream holds no reference cycle: dropped, it is freed at once, not left for
    the cyclic collector (a young collection's work on every question otherwise)."""
    import gc

    gc.disable()
    try:
        for index in range(200):
            draws = seeded(f"freed:{index}", 2)
            draws.shuffle(list(range(300)))  # Draws' own general path too
            draws.below(1000)
            del draws
        alive = sum(type(o) is HashDraws for o in gc.get_objects())
    finally:
        gc.enable()
    assert alive == 0
