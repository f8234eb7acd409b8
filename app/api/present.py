"""Domain objects and use-case results to API schemas, texts in the requested language."""

from __future__ import annotations

import functools
import weakref
from typing import Any

import pydantic_core

from app.api.batch_schemas import AnswerBatchStoredPublic, AnswerBatchWithheldPublic
from app.api.deck_schemas import (
    CardProgressSummaryPublic,
    CardSummaryPublic,
    PointSummaryPublic,
)
from app.catalog.demo import DEMO_COMMANDS, DemoResults
from app.domain.cards import Card, Pitfall
from app.domain.generation import Choice, Combination, Variant
from app.domain.texts import Text
from app.domain.typed import accepted_units, typed_figures
from app.practice.mistakes import AttemptView
from app.practice.questions import Question
from app.practice.sessions import summary_path
from app.practice.storing import AnswerOutcome
from app.rendering import latex_to_mathml, render_inline, render_paragraphs
from app.review.service import CardProgress
from app.schemas import (
    AnswerPublic,
    AnswerStoredPublic,
    AttemptPublic,
    CardPublic,
    DemoCommandPublic,
    DemoPublic,
    FormulaPublic,
    PitfallPublic,
    PointPublic,
    QuestionPublic,
)


def card_summary(card: Card, lang: str, progress: CardProgress | None = None) -> CardSummaryPublic:
    return CardSummaryPublic(
        id=card.id,
        version=card.version,
        title=card.title.get(lang),
        points=[
            PointSummaryPublic(slug=p.slug, number=p.number, title=p.title.get(lang))
            for p in card.points
        ],
        prerequisites=list(card.prerequisites),
        progress=CardProgressSummaryPublic(
            answered=progress.answered, right=progress.right, due=progress.due
        )
        if progress is not None
        else None,
    )


def card_detail(card: Card, demo: DemoResults | None, lang: str) -> CardPublic:
    return CardPublic(
        id=card.id,
        version=card.version,
        title=card.title.get(lang),
        definition=card.definition.get(lang),
        use_cases=card.use_cases.get(lang),
        problems_solved=card.problems_solved.get(lang),
        formulas=[
            FormulaPublic(
                id=f.id,
                title=f.title.get(lang),
                latex=f.latex,
                mathml=str(latex_to_mathml(f.latex, display=True, lang=lang)),
                unit=f.unit,
            )
            for f in card.formulas.values()
        ],
        points=[
            PointPublic(
                slug=p.slug,
                number=p.number,
                title=p.title.get(lang),
                explanation=p.explanation.get(lang),
                explanation_mathml=str(render_paragraphs(p.explanation.get(lang), lang)),
            )
            for p in card.points
        ],
        demo=DemoPublic(
            commands=[DemoCommandPublic(where=c.where, command=c.command) for c in DEMO_COMMANDS],
            results=demo.raw if demo is not None else None,
        ),
    )


def _question_fields(
    item: Question, lang: str, point_number: int | None, typed: bool
) -> dict[str, Any]:
    """A question as :class:`QuestionPublic`'s fields, in its order, of its types (values as
    floats), behind :func:`question`; :func:`question_json` writes the same fields from kept
    parts (tests/test_api.py compares the two). ``typed``: asked without choices when it can
    be typed (a statement keeps its choices)."""
    variant: Variant = item.variant
    units = accepted_units(variant)
    typed = typed and bool(units)
    identity = variant.id
    stem = variant.stem.get(lang)
    return {
        "token": item.token,
        "card_id": identity.card_id,
        "point": identity.point,
        "point_number": point_number,
        "template_id": identity.template_id,
        "template_version": identity.template_version,
        "seed": identity.seed if item.show_seed else None,
        "kind": variant.kind,
        "params": dict(variant.params),
        "params_display": dict(variant.params_display),
        "stem": stem,
        "stem_mathml": str(render_inline(stem, lang)),
        "choices": [
            {
                "id": c.id,
                "text": (text := c.text.get(lang)),
                "text_mathml": str(render_inline(text, lang)),
                "value": None if c.value is None else float(c.value),
                "unit": c.unit,
            }
            for c in ([] if typed else variant.choices)
        ],
        "expires_at": item.expires_at,
        "mode": "typed" if typed else "choices",
        "typed_units": list(units),
        "typed_figures": typed_figures(variant),
    }


def question(
    item: Question, lang: str, point_number: int | None, typed: bool = False
) -> QuestionPublic:
    return QuestionPublic.model_validate(_question_fields(item, lang, point_number, typed))


def question_json(
    item: Question, lang: str, point_number: int | None, typed: bool = False
) -> bytes:
    """:func:`question` as its JSON body, byte for byte (tests/test_api.py compares them), put
    together from the JSON of its parts: what many variants share (a choice's text, a stem, a
    combination's parameters) is serialized once and kept (callgrind: 621.6k -> 576.4k
    instructions per question GET; about 23 MB more per process once three cards' questions
    in two languages have all been shown)."""
    variant = item.variant
    units = accepted_units(variant)
    typed = typed and bool(units)
    identity = variant.id
    choices = (
        b"[]" if typed else b"[" + b",".join(_choice_json(c, lang) for c in variant.choices) + b"]"
    )
    return b"".join(
        (
            b'{"token":',
            _to_json(item.token),
            _identity_json(
                identity.card_id,
                identity.point,
                point_number,
                identity.template_id,
                identity.template_version,
            ),
            b',"seed":',
            str(identity.seed).encode() if item.show_seed else b"null",
            _content_json(variant),
            _stem_json(variant.stem.get(lang), lang),
            b',"choices":',
            choices,
            b',"expires_at":',
            _to_json(item.expires_at),
            _mode_json(typed, units, typed_figures(variant)),
        )
    )


_to_json = pydantic_core.to_json


def _fields_json(fields: dict[str, Any]) -> bytes:
    """``fields`` as the inside of a JSON object, with a leading comma: ``,"a":1,"b":2``."""
    return b"," + _to_json(fields)[1:-1]


@functools.lru_cache(maxsize=1024)
def _identity_json(
    card_id: str, point: str, point_number: int | None, template_id: str, version: int
) -> bytes:
    return _fields_json(
        {
            "card_id": card_id,
            "point": point,
            "point_number": point_number,
            "template_id": template_id,
            "template_version": version,
        }
    )


# The JSON of what many variants share. A combination's, while it lives (app.domain.generation
# keeps it while its questions are asked). A stem's and a choice's by their texts: the three
# cards' questions show about 12,600 texts in the two languages (as render_inline keeps them),
# and the same choice text comes under every label and in many combinations.
_CONTENT_JSON: weakref.WeakKeyDictionary[Combination, bytes] = weakref.WeakKeyDictionary()


def _content_json(variant: Variant) -> bytes:
    """``kind``, ``params`` and ``params_display``: the variant's combination's."""
    found = _CONTENT_JSON.get(variant.content)
    if found is None:
        found = _CONTENT_JSON[variant.content] = _fields_json(
            {
                "kind": variant.kind,
                "params": variant.params,
                "params_display": variant.params_display,
            }
        )
    return found


@functools.lru_cache(maxsize=16384)
def _stem_json(stem: str, lang: str) -> bytes:
    return _fields_json({"stem": stem, "stem_mathml": str(render_inline(stem, lang))})


def _choice_json(choice: Choice, lang: str) -> bytes:
    value = None if choice.value is None else float(choice.value)
    return _choice_id_json(choice.id) + _choice_text_json(
        choice.text.get(lang), lang, value, choice.unit
    )


@functools.lru_cache(maxsize=64)
def _choice_id_json(choice_id: str) -> bytes:
    return b'{"id":' + _to_json(choice_id)


@functools.lru_cache(maxsize=16384)
def _choice_text_json(text: str, lang: str, value: float | None, unit: str | None) -> bytes:
    """A choice's fields after its id, and the closing brace."""
    return (
        _fields_json(
            {
                "text": text,
                "text_mathml": str(render_inline(text, lang)),
                "value": value,
                "unit": unit,
            }
        )
        + b"}"
    )


@functools.lru_cache(maxsize=256)
def _mode_json(typed: bool, units: tuple[str, ...], figures: int | None) -> bytes:
    return (
        _fields_json(
            {
                "mode": "typed" if typed else "choices",
                "typed_units": list(units),
                "typed_figures": figures,
            }
        )
        + b"}"
    )


def _pitfall_fields(
    pitfall: Pitfall | None, explanation: Text | None, lang: str
) -> dict[str, Any] | None:
    """:class:`PitfallPublic`'s fields: the variant's own ``explanation`` (its numbers) when it
    has one, else the pitfall's general one."""
    if pitfall is None:
        return None
    return {
        "id": pitfall.id,
        "title": pitfall.title.get(lang),
        "explanation": (explanation or pitfall.explanation).get(lang),
    }


def pitfall(pitfall: Pitfall | None, explanation: Text | None, lang: str) -> PitfallPublic | None:
    """A pitfall with its explanation (the variant's own when given), or None."""
    fields = _pitfall_fields(pitfall, explanation, lang)
    return None if fields is None else PitfallPublic.model_validate(fields)


def _answer_fields(outcome: AnswerOutcome, lang: str) -> dict[str, Any]:
    """An answer's result as :class:`AnswerPublic`'s fields, in its order (an exam's answer
    before it ends: :class:`AnswerStoredPublic`'s, nothing of the result): the one mapping
    behind :func:`answer` and :func:`answer_json`."""
    if outcome.withheld:
        session_id = outcome.attempt.practice_session_id
        assert session_id is not None
        return {
            "outcome": "withheld",
            "attempt_id": outcome.attempt.id,
            "client_answer_id": outcome.client_answer_id,
            "stored": True,
            "replayed": outcome.replayed,
            "feedback": None,
            "summary_url": summary_path(session_id),
        }
    grade_ = outcome.grade
    return {
        "outcome": "stored",
        "attempt_id": outcome.attempt.id,
        "client_answer_id": outcome.client_answer_id,
        "correct": grade_.correct,
        "choice_id": grade_.chosen_choice_id,
        "correct_choice_id": grade_.correct_choice_id,
        "pitfall": _pitfall_fields(grade_.pitfall, grade_.pitfall_explanation, lang),
        "explanation": grade_.explanation.get(lang),
        "solution": [step.get(lang) for step in grade_.solution],
        "choices": [
            {
                "id": c.id,
                "text": c.text.get(lang),
                "correct": c.correct,
                "pitfall": _pitfall_fields(c.pitfall, c.explanation, lang),
            }
            for c in ([] if grade_.typed is not None else outcome.variant.choices)
        ],
        "replayed": outcome.replayed,
        "value": grade_.typed.text if grade_.typed is not None else None,
        "unit": grade_.typed.unit if grade_.typed is not None else None,
        "answer": outcome.variant.answer.get(lang),
    }


def answer(outcome: AnswerOutcome, lang: str) -> AnswerPublic | AnswerStoredPublic:
    model = AnswerStoredPublic if outcome.withheld else AnswerPublic
    return model.model_validate(_answer_fields(outcome, lang))


def batch_result(
    outcome: AnswerOutcome, lang: str
) -> AnswerBatchStoredPublic | AnswerBatchWithheldPublic:
    """:func:`answer` as a batch item's result (the same fields, ``outcome`` among them)."""
    fields = _answer_fields(outcome, lang)
    if outcome.withheld:
        return AnswerBatchWithheldPublic.model_validate(fields)
    return AnswerBatchStoredPublic.model_validate(fields)


def answer_json(outcome: AnswerOutcome, lang: str) -> bytes:
    """:func:`answer` as its JSON body, byte for byte, without building the models first."""
    return pydantic_core.to_json(_answer_fields(outcome, lang))


def attempt(view: AttemptView, lang: str) -> AttemptPublic:
    row = view.attempt
    title = view.pitfall_title()
    explanation = view.pitfall_explanation()
    pitfall = None
    if row.pitfall_id is not None:
        pitfall = PitfallPublic(
            id=row.pitfall_id,
            title=(title or Text.verbatim(row.pitfall_id)).get(lang),
            explanation=explanation.get(lang) if explanation else None,
        )
    return AttemptPublic(
        attempt_id=row.id,
        client_answer_id=row.client_answer_id,
        card_id=row.card_id,
        point=row.point,
        template_id=row.template_id,
        template_version=row.template_version,
        stem=view.variant.stem.get(lang) if view.variant is not None else None,
        choice_id=row.choice_id,
        choice_text=view.chosen_text().get(lang),
        correct_choice_id=row.correct_choice_id,
        correct_choice_text=view.correct_text().get(lang),
        correct=row.correct,
        pitfall=pitfall,
        answered_at=view.answered_at,
        typed_value=row.typed_value,
        typed_unit=row.typed_unit,
        dismissed=row.dismissed,
    )
