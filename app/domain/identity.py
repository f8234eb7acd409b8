"""What identifies a question: one value used by generation, tokens, attempts and reviews."""

from __future__ import annotations

from dataclasses import dataclass

MAX_SEED = 2**31 - 1


@dataclass(frozen=True, order=True)
class QuestionId:
    """A generated question: regenerating from it always gives the same variant.

    ``point`` is the exam point's stable slug (not its number, which may change when points are
    reordered); ``template_version`` pins the template's content, so an old question stays
    gradeable after the template is edited (the catalog keeps every published version).
    """

    card_id: str
    point: str
    template_id: str
    template_version: int
    seed: int

    @property
    def rng_key(self) -> str:
        """The seed string of the variant's random stream (the point is not part of it)."""
        return f"{self.card_id}:{self.template_id}:{self.template_version}:{self.seed}"

    @property
    def template_key(self) -> tuple[str, str, int]:
        return (self.card_id, self.template_id, self.template_version)
