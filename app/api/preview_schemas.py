"""A template's preview as the instructor's API shows it: a variant with its key and every
pitfall's explanation, and the rule behind ``choices`` laid out per parameter combination."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.domain.sides import SideTable


class PreviewChoicePublic(BaseModel):
    id: str
    text: str
    correct: bool
    pitfall_id: str | None
    pitfall_title: str | None
    explanation: str | None


class SideCellPublic(BaseModel):
    pitfall_id: str
    text: str = Field(description="The value (or statement) as a choice shows it.")
    side: int = Field(description="-1: below the key (shorter), 1: above (longer), 0: neither.")
    clashes_with_key: bool
    same_as: str | None = Field(
        description="The pitfall before it on its side that it cannot be told apart from."
    )


class SideRowPublic(BaseModel):
    params: dict[str, str]
    key: str
    pitfalls: list[SideCellPublic]
    below: int = Field(description="Distinct pitfalls that surely remain below the key.")
    above: int
    breaks_rule: bool


class SidesPublic(BaseModel):
    needed: int = Field(description="Distinct pitfalls needed on each side: choices - 1.")
    combinations: int = Field(description="Parameter combinations checked.")
    failing: int = Field(description="Combinations that break the rule.")
    rows: list[SideRowPublic] = Field(
        description="The first combinations checked, then every one that breaks the rule."
    )


class PreviewPublic(BaseModel):
    template_id: str
    template_version: int
    seed: int
    params: dict[str, str]
    stem: str
    choices: list[PreviewChoicePublic]
    correct_choice_id: str
    solution: list[str]
    sides: SidesPublic | None = Field(
        default=None,
        description="Each pitfall's side of the key per parameter combination (the rule behind "
        "choices); null when a value cannot be computed.",
    )


def sides_public(table: SideTable | None, lang: str) -> SidesPublic | None:
    if table is None:
        return None
    return SidesPublic(
        needed=table.needed,
        combinations=table.combinations,
        failing=table.failing,
        rows=[
            SideRowPublic(
                params=dict(row.params),
                key=row.key.get(lang),
                pitfalls=[
                    SideCellPublic(
                        pitfall_id=pitfall_id,
                        text=cell.text.get(lang),
                        side=cell.side,
                        clashes_with_key=cell.clashes,
                        same_as=cell.same_as,
                    )
                    for pitfall_id, cell in zip(table.pitfall_ids, row.cells, strict=True)
                ],
                below=row.below,
                above=row.above,
                breaks_rule=row.failing(table.needed),
            )
            for row in table.rows
        ],
    )
