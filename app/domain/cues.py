"""What a validation problem about a give-away cue shows: the family, the strategy, and a few
sample variants where the cue points at the key (found by :func:`app.domain.giveaways.examples`).

Plain data, so that a problem carrying it crosses the validation sandbox's process boundary and
the API's JSON alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bilingual import Text
from .messages import Message, contextual_message

# What each family (app.domain.giveaways.FAMILIES) is called where people read it: the
# dashboard's cue line and validation's refusal ("gives the key away by its ...").
FAMILY_LABELS: dict[str, Message] = {
    "length": contextual_message("giveaway family", "length"),
    "rank": contextual_message("giveaway family", "rank"),
    "unit": contextual_message("giveaway family", "unit"),
    "form": contextual_message("giveaway family", "form"),
    "richness": contextual_message("giveaway family", "richness"),
    "register": contextual_message("giveaway family", "register"),
    "convergence": contextual_message("giveaway family", "convergence"),
    "ratio hub": contextual_message("giveaway family", "ratio hub"),
    "magnitude": contextual_message("giveaway family", "magnitude"),
    "retry": contextual_message("giveaway family", "retry"),
    "echo": contextual_message("giveaway family", "echo of the stem"),
    "stem words": contextual_message("giveaway family", "words shared with the stem"),
}
# How the choices were read: "reading the choices in English".
READING: dict[str, Message] = {"en": Message("in English"), "zh": Message("in Chinese")}


def family_label(family: str) -> Text:
    """The family as people read it (its own name when it has no label)."""
    return FAMILY_LABELS.get(family) or Text.verbatim(family)


def reading(lang: str) -> Text:
    """In which language the choices were read, as people read it."""
    return READING.get(lang) or Text.verbatim(lang)


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

    @property
    def label(self) -> Text:
        return family_label(self.family)

    @property
    def reading(self) -> Text:
        return reading(self.lang)

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "strategy": self.strategy,
            "lang": self.lang,
            "share": round(self.share, 4),
            "examples": [e.to_json(self.lang) for e in self.examples],
        }
