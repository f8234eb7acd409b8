"""A released template's content changes only with its version: the shipped cards checked against
the template digests of their last release (``cards_fixtures/released_templates.json``).

A server that stored a card version refuses at start-up a card file whose template changed
without a new version (old questions would grade against the new content). This test finds it
before a release: edit a template, raise its version (or, for a wording-only edit, its
``revision``: cards/README.md), then record the release with
``python tests/test_released_cards.py`` (the new digests replace the old).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.domain.cards import read_cards
from app.domain.manifests import template_body_hash

ROOT = Path(__file__).resolve().parents[1]
RELEASED = Path(__file__).parent / "cards_fixtures" / "released_templates.json"


def digests() -> dict[str, dict[str, object]]:
    """Each shipped card's version and, per template, its version and content digest."""
    return {
        card_id: {
            "version": card.version,
            # [version, digest], and the revision of a wording-only edit when there is one
            "templates": {
                t["id"]: [t["version"], template_body_hash(t)]
                + ([t["revision"]] if t.get("revision") else [])
                for p in card.document["points"]
                for t in p["templates"]
            },
        }
        for card_id, card in sorted(read_cards(ROOT / "cards").items())
    }


def test_no_released_template_changed_without_a_new_version():
    released = json.loads(RELEASED.read_text())
    changed = []
    for card_id, now in digests().items():
        before = released.get(card_id, {}).get("templates", {})
        for template_id, (version, digest, *revision) in now["templates"].items():
            if template_id not in before:
                continue  # new since the release
            old_version, old_digest, *old_revision = before[template_id]
            assert version >= old_version, (card_id, template_id, "version went down")
            # A wording-only edit raises the revision instead (start-up proves its values the
            # same: app.domain.catalog.check_versions).
            revised = (revision or [0])[0] > (old_revision or [0])[0]
            if version == old_version and digest != old_digest and not revised:
                changed.append(f"{card_id}/{template_id} (version {version})")
    assert not changed, "changed without a new version: " + ", ".join(changed)


if __name__ == "__main__":  # record the release
    RELEASED.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n")
    sys.exit(0)
