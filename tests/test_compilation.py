"""Compiling a card is linear in its formulas and placeholders: work is counted (definitions
read, lines of the engine run), never timed."""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

from app.domain.cards import parse_card
from app.domain.formulas import Formula, parse_formula
from app.domain.texts import Text, compile_text

DOMAIN = str(Path(__file__).resolve().parents[1] / "app" / "domain")
CARD = yaml.safe_load(
    (Path(__file__).parents[1] / "cards" / "zero-memory-offload.yaml").read_text()
)


class CountingDefinitions(Mapping[str, Formula]):
    """Card formulas that count every entry read (a copy reads them all)."""

    def __init__(self, formulas: dict[str, Formula]) -> None:
        self.formulas = formulas
        self.reads = 0

    def __getitem__(self, name: str) -> Formula:
        self.reads += 1
        return self.formulas[name]

    def __iter__(self) -> Iterator[str]:
        for name in self.formulas:
            self.reads += 1
            yield name

    def __len__(self) -> int:
        return len(self.formulas)

    def __contains__(self, name: object) -> bool:
        return name in self.formulas


def chained(count: int) -> dict[str, Formula]:
    """``count`` card formulas, each using an earlier one (a tree: bounded size, log depth)."""
    formulas: dict[str, Formula] = {}
    for i in range(count):
        text = "psi" if i == 0 else f"psi + f{i // 2}"
        formulas[f"f{i}"] = parse_formula(text, {"psi"}, formulas)
    return formulas


def test_a_formula_reads_only_the_card_formulas_it_names():
    definitions = CountingDefinitions(chained(500))
    formula = parse_formula("f499 * 2 + f7 - psi", {"psi"}, definitions)
    assert formula.names == {"psi"}
    assert definitions.reads <= 2


def test_placeholders_read_only_the_card_formulas_they_name():
    definitions = CountingDefinitions(chained(300))
    stem = " ".join(f"{{=f{i % 300} + {i}}}" for i in range(600))
    compiled = compile_text(Text(stem, stem), frozenset({"psi"}), frozenset(), definitions)
    assert len([s for s in compiled.en if not isinstance(s, str)]) == 600
    assert definitions.reads <= 2 * 600


def _card_with_formulas(count: int) -> dict[str, object]:
    document = copy.deepcopy(CARD)
    document["points"] = document["points"][:1]
    document["points"][0]["templates"] = document["points"][0]["templates"][:1]
    document["formulas"] = list(document["formulas"]) + [
        {
            "id": f"f{i}",
            "title": {"en": "f", "zh": "f"},
            "expr": "psi" if i == 0 else f"psi * {i % 7 + 1} + f{i // 2}",
            "latex": "f",
        }
        for i in range(count)
    ]
    return document


def _lines_run(document: dict[str, object]) -> int:
    """Lines of app/domain executed compiling ``document`` (loop iterations included)."""
    count = 0

    def local(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):  # type: ignore[no-untyped-def]
        return local if frame.f_code.co_filename.startswith(DOMAIN) else None

    sys.settrace(calls)
    try:
        card = parse_card(document)
    finally:
        sys.settrace(None)
    assert len(card.formulas) == len(document["formulas"])  # type: ignore[arg-type]
    return count


def test_compiling_a_card_is_linear_in_its_formulas():
    small, large = _lines_run(_card_with_formulas(300)), _lines_run(_card_with_formulas(600))
    # The template's own compilation is a constant part of both; twice the formulas must cost
    # about twice the work (a per-formula rebuild of the earlier ones made it 3.5 times).
    assert large < 2.2 * small, (small, large)
