"""A text in the product's two languages: card content (the data the cards carry), and the base of
the catalogs' :class:`~app.domain.messages.Message`. Re-exported by :mod:`app.domain.texts`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Text:
    """A text in English and Simplified Chinese."""

    en: str
    zh: str

    def get(self, lang: str) -> str:
        if lang == "zh" and self.zh:
            return self.zh
        return self.en

    @staticmethod
    def verbatim(text: str) -> Text:
        """A text that reads the same in every language: an id, what the learner typed, a
        framework's or a library's own words. The product's words are catalog messages."""
        return Text(text, text)
