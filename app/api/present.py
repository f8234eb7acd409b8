"""Domain objects and service results to API schemas, texts in the requested language."""

from __future__ import annotations

from app.domain.cards import Card
from app.domain.generation import Variant
from app.schemas import (
    AnswerPublic,
    CardPublic,
    CardSummaryPublic,
    ChoicePublic,
    DemoCommandPublic,
    DemoPublic,
    FormulaPublic,
    MistakePublic,
    PitfallCountPublic,
    PitfallPublic,
    PointPublic,
    PointSummaryPublic,
    QuestionPublic,
)
from app.services.cards import DEMO_COMMANDS, DemoResults
from app.services.mistakes import Mistake, PitfallCount
from app.services.practice import AnswerOutcome
from app.services.questions import Question


def card_summary(card: Card, lang: str) -> CardSummaryPublic:
    return CardSummaryPublic(
        id=card.id,
        title=card.title.get(lang),
        points=[PointSummaryPublic(number=p.number, title=p.title.get(lang)) for p in card.points],
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
            FormulaPublic(id=f.id, title=f.title.get(lang), latex=f.latex, unit=f.unit)
            for f in card.formulas.values()
        ],
        points=[
            PointPublic(
                number=p.number, title=p.title.get(lang), explanation=p.explanation.get(lang)
            )
            for p in card.points
        ],
        demo=DemoPublic(
            commands=[DemoCommandPublic(where=c.where, command=c.command) for c in DEMO_COMMANDS],
            results=demo.raw if demo is not None else None,
        ),
    )


def question(item: Question, lang: str) -> QuestionPublic:
    variant: Variant = item.variant
    return QuestionPublic(
        token=item.token,
        card_id=variant.card_id,
        point=variant.point,
        template_id=variant.template_id,
        template_version=variant.template_version,
        seed=variant.seed,
        kind=variant.kind,
        params=dict(variant.params),
        params_display=dict(variant.params_display),
        stem=variant.stem.get(lang),
        choices=[
            ChoicePublic(id=c.id, text=c.text.get(lang), value=c.value, unit=c.unit)
            for c in variant.choices
        ],
    )


def answer(outcome: AnswerOutcome, lang: str) -> AnswerPublic:
    grade = outcome.grade
    pitfall = None
    if grade.pitfall is not None:
        explanation = grade.pitfall_explanation or grade.pitfall.explanation
        pitfall = PitfallPublic(
            id=grade.pitfall.id,
            title=grade.pitfall.title.get(lang),
            explanation=explanation.get(lang),
        )
    return AnswerPublic(
        attempt_id=outcome.attempt.id,
        correct=grade.correct,
        choice_id=grade.chosen_choice_id,
        correct_choice_id=grade.correct_choice_id,
        pitfall=pitfall,
        explanation=grade.explanation.get(lang),
        solution=[step.get(lang) for step in grade.solution],
    )


def mistake(item: Mistake, lang: str) -> MistakePublic:
    pitfall = None
    if item.pitfall_id is not None:
        pitfall = PitfallPublic(
            id=item.pitfall_id,
            title=item.pitfall_title.get(lang),
            explanation=item.pitfall_explanation.get(lang) if item.pitfall_explanation else None,
        )
    return MistakePublic(
        attempt_id=item.attempt_id,
        card_id=item.card_id,
        point=item.point,
        template_id=item.template_id,
        template_version=item.template_version,
        seed=item.seed,
        params=item.params,
        stem=item.stem.get(lang) if item.stem is not None else None,
        choice_id=item.choice_id,
        choice_text=item.choice_text.get(lang),
        correct_choice_id=item.correct_choice_id,
        correct_choice_text=item.correct_choice_text.get(lang)
        if item.correct_choice_text
        else None,
        pitfall=pitfall,
        answered_at=item.answered_at,
    )


def pitfall_count(item: PitfallCount, lang: str) -> PitfallCountPublic:
    return PitfallCountPublic(
        card_id=item.card_id,
        pitfall_id=item.pitfall_id,
        title=item.title.get(lang),
        count=item.count,
    )
