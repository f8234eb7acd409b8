"""Typed answers: a numeric question answered with a number and a unit instead of a choice.

``read_typed(variant, value, unit)`` checks what the learner typed (:class:`TypedError` names the
field at fault: ``value`` or ``unit``); ``grade_typed(variant, typed)`` grades it.

- **The number** is read strictly: an optional sign, digits with an optional decimal point, an
  optional exponent (``1.5e3``); surrounding spaces are ignored. Thousands separators (``1,200``,
  ``1 200``) and a decimal comma are refused with a message saying so, never guessed at. At most
  :data:`MAX_LENGTH` characters and exponents up to :data:`MAX_EXPONENT`; the value is exact (a
  ``Fraction`` of the decimal typed), never a float or anything a parser evaluates.
- **The unit** is one of the units measuring what the question's unit measures
  (:func:`app.domain.units.dimension`): a question in GB takes B ... PB and KiB ... TiB, one in
  seconds µs, ms and s. Other units are refused.
- **Grading** is at the template's precision, the same for the key and for every pitfall: in the
  unit the learner typed, the value must lie within half a unit of the candidate's last
  significant figure at the template's figures (:func:`app.domain.generation.figures_of`;
  :func:`app.domain.units.within_figures`), bounds included, so both roundings of a half (26.2
  and 26.3 for 26.25 GB) and both readings of a long number (2410 and 2412 for 2411.7 GB) count;
  whole counts (GPUs): the same whole number. That window is at most 0.5 % of the value either
  side at 3 figures, and no pitfall comes within :data:`~app.domain.generation.MIN_RELATIVE_GAP`
  (5 %) of the key, so no typed value matches the key and a pitfall at once. A value that misses the key is matched against *every* pitfall of the
  template (not only those a choice question would show); when several match (pitfalls equal for
  these parameters), the first in the template's order is the diagnosis and the others are named.
- Statements cannot be typed.
"""

from __future__ import annotations

from fractions import Fraction

from .generation import Grade, Variant, figures_of
from .messages import Message
from .texts import Text
from .typed_number import MAX_EXPONENT, MAX_LENGTH, TypedAnswer, TypedError, parse_number
from .units import dimension, get_unit, scaled, within_figures

__all__ = [
    "MAX_EXPONENT",
    "MAX_LENGTH",
    "TypedAnswer",
    "TypedError",
    "accepted_units",
    "grade_typed",
    "parse_number",
    "read_typed",
    "same_at_precision",
    "typed_figures",
    "unit_label",
]


def accepted_units(variant: Variant) -> tuple[str, ...]:
    """The units a typed answer to ``variant`` may be in (empty: it cannot be typed)."""
    unit = variant.content.template.unit
    if variant.kind != "numeric" or unit is None:
        return ()
    return dimension(unit)


def typed_figures(variant: Variant) -> int | None:
    """The significant figures a typed answer to ``variant`` is graded at (0: a whole number);
    None for a statement."""
    if not accepted_units(variant):
        return None
    template = variant.content.template
    assert template.unit is not None
    return 0 if get_unit(template.unit).whole else figures_of(template)


def read_typed(variant: Variant, value: str, unit: str) -> TypedAnswer:
    """What the learner typed, checked against the question (:class:`TypedError` otherwise)."""
    units = accepted_units(variant)
    if not units:
        raise TypedError(
            "value",
            Message(
                "This question is answered by choosing a statement: it cannot be typed. "
                "Send a choice_id."
            ),
        )
    number = parse_number(value)
    unit = unit.strip()
    if unit not in units:
        raise TypedError(
            "unit",
            Message(
                "%(unit)s is not a unit this question takes: use one of %(units)s.",
                unit=repr(unit),
                units=", ".join(units),
            ),
        )
    return TypedAnswer(value.strip(), unit, number * get_unit(unit).scale)


def same_at_precision(typed: Fraction, target: Fraction, unit: str, figures: int) -> bool:
    """Whether ``typed`` is ``target`` (both in base units) in ``unit`` at ``figures``
    significant figures (0: whole numbers)."""
    if get_unit(unit).whole:
        figures = 0
    return within_figures(scaled(typed, unit), scaled(target, unit), figures)


def grade_typed(variant: Variant, typed: TypedAnswer) -> Grade:
    """Right at the template's precision, or the pitfall whose value it is, or neither."""
    content = variant.content
    figures = figures_of(content.template)
    answer = content.answer
    assert answer.value is not None
    key = answer.text
    if same_at_precision(typed.value, answer.value, typed.unit, figures):
        return Grade(
            correct=True,
            chosen_choice_id=None,
            correct_choice_id=None,
            pitfall=None,
            pitfall_explanation=None,
            explanation=Message("%(typed)s is right.", typed=_typed_text(typed)),
            solution=content.solution(answer),
            typed=typed,
        )
    matched = [
        c
        for c in content.pitfalls
        if c.value is not None and same_at_precision(typed.value, c.value, typed.unit, figures)
    ]
    if not matched:
        return Grade(
            correct=False,
            chosen_choice_id=None,
            correct_choice_id=None,
            pitfall=None,
            pitfall_explanation=None,
            explanation=Message(
                "%(typed)s matches no pitfall we know; the answer is %(answer)s.",
                typed=_typed_text(typed),
                answer=key,
            ),
            solution=content.solution(answer),
            typed=typed,
        )
    first = matched[0]
    assert first.pitfall is not None
    others = [c.pitfall for c in matched[1:] if c.pitfall is not None]
    if others:
        explanation: Text = Message(
            "%(typed)s is the value the pitfall “%(pitfall)s” gives (and %(others)s gives it "
            "too); the answer is %(answer)s.",
            typed=_typed_text(typed),
            pitfall=first.pitfall.title,
            others=Text(
                ", ".join(f"“{p.title.en}”" for p in others),
                "、".join(f"「{p.title.zh}」" for p in others),
            ),
            answer=key,
        )
    else:
        explanation = Message(
            "%(typed)s is the value the pitfall “%(pitfall)s” gives; the answer is %(answer)s.",
            typed=_typed_text(typed),
            pitfall=first.pitfall.title,
            answer=key,
        )
    return Grade(
        correct=False,
        chosen_choice_id=None,
        correct_choice_id=None,
        pitfall=first.pitfall,
        pitfall_explanation=content.explanation(first, answer),
        explanation=explanation,
        solution=content.solution(answer),
        typed=typed,
        also_matched=tuple(others),
    )


def _typed_text(typed: TypedAnswer) -> Text:
    return Text(typed.shown("en"), typed.shown("zh"))


def unit_label(unit: str) -> Text:
    """A unit as a unit select shows it: its suffix (µs, ×, 张 GPU), or "no unit"."""
    spec = get_unit(unit)
    en, zh = spec.suffix_for("2", "en"), spec.suffix_for("2", "zh")
    return Text(en, zh) if en else Message("no unit")
