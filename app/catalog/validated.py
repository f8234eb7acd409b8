"""The cards this code has validated whole before: one small file per card document, named by a
digest of the document and of the code that validated it.

Start-up validates every card over its whole domains: every parameter combination evaluated and
its texts checked, and the content-blind guesser measured (:mod:`app.domain.validation`); about
11 s of CPU for the three shipped cards. The outcome depends on nothing but the card's document
and the domain code. A start-up that finds a card's record does not validate it again: a restart,
another worker, or the server after ``make run``'s ``check-cards`` starts in about 2 s (reading
and compiling the cards). A changed card, a changed domain module, another sympy or Python is
another digest, so that card is validated again. A record is written only after a whole
validation passed; a folder that cannot be written only costs the next start-up the validation.
The combinations a question is generated from are then built as they are first asked for (about
2 ms each) instead of at start-up.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import tempfile
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

import sympy

from app.domain.cards import Card
from app.domain.manifests import document_hash

log = logging.getLogger(__name__)
DOMAIN = Path(__file__).resolve().parents[1] / "domain"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of what validation runs: every module of ``app/domain`` (validation imports only
    the domain), sympy's version and Python's."""
    digest = hashlib.sha256()
    for path in sorted(DOMAIN.rglob("*.py")):
        digest.update(path.relative_to(DOMAIN).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    digest.update(f"sympy {sympy.__version__}, python {platform.python_version()}".encode())
    return digest.hexdigest()


def validation_digest(card: Card) -> str:
    """The digest a record of ``card``'s validation is named by."""
    return hashlib.sha256(f"{code_digest()}:{document_hash(card.document)}".encode()).hexdigest()


class ValidatedCards:
    """The records in ``folder`` (:func:`app.domain.catalog.load_cards` asks and records).
    ``reuse`` off: every card is validated whole and recorded (``check-cards``)."""

    def __init__(self, folder: Path, *, reuse: bool = True) -> None:
        self.folder = folder
        self.reuse = reuse

    def _path(self, card: Card) -> Path:
        return self.folder / f"{card.id}-{validation_digest(card)[:40]}.json"

    def holds(self, card: Card) -> bool:
        """Whether this very document was validated whole by this very code."""
        return self.reuse and self._path(card).is_file()

    def record(self, card: Card) -> None:
        """Record that ``card`` passed a whole validation (best effort: a folder that cannot be
        written is logged, and the next start-up validates it again)."""
        path = self._path(card)
        body = {
            "card": card.id,
            "version": card.version,
            "document": document_hash(card.document),
            "code": code_digest(),
            "validated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # written whole or not at all: another process may read the folder meanwhile
            fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(body, out)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            log.warning(
                "card %s: its validation was not recorded in %s (%s); the next start-up "
                "validates it whole again",
                card.id,
                self.folder,
                exc.strerror or exc,
            )
