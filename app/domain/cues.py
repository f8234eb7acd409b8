"""What a validation problem about a give-away cue shows: the family, the strategy, and a few
sample variants where the cue points at the key (found by :func:`app.domain.giveaways.examples`).

Plain data, so that a problem carrying it crosses the validation sandbox's process boundary and
the API's JSON alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bilingual import Text


@dataclass(frozen=True)
class CueExample:
    """One shown question: its parameters as the stem shows them, its choices as labelled, the
    key marked."""

    params: tuple[tuple[str, str], ...]
    choices: tuple[tuple[str, Text, bool], ...]  # (label, text, is the key)

    def to_json(self, lang: str) -> dict[str, Any]:
        return {
            "params": dict(self.params),
            "choices": [
                {"id": label, "text": text.get(lang), "correct": correct}
                for label, text, correct in self.choices
            ],
        }


@dataclass(frozen=True)
class Cue:
    """A content-blind strategy that finds the key too often, read in ``lang``."""

    family: str  # app.domain.giveaways.FAMILIES: length, register, magnitude ...
    strategy: str  # e.g. 'shortest', 'with absolute words'
    lang: str  # the language the choices were read in (the examples are shown in it)
    share: float  # held out
    examples: tuple[CueExample, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "strategy": self.strategy,
            "lang": self.lang,
            "share": round(self.share, 4),
            "examples": [e.to_json(self.lang) for e in self.examples],
        }
