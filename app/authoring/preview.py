"""Preview: a variant of a card's draft exactly as learners would see it, for a seed or for
parameter values the instructor chose.

The draft is compiled and the variant generated in the formula sandbox (:func:`preview_task` in
:mod:`app.authoring.sandbox_worker` runs :func:`make_preview`), never in the web process: a
draft is instructor input, and compiling it costs what its formulas cost. The answer is a
:class:`Preview`, plain data that crosses the process boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.authoring.sandbox import default_sandbox, failure_text
from app.authoring.sandbox_worker import preview_task
from app.domain.identity import MAX_SEED
from app.domain.messages import Message
from app.domain.sides import SideTable
from app.domain.texts import Text
from app.problems import InvalidInput, NotFound, Problem

PARAMETER_SEARCH_SEEDS = 20_000
# Wall-clock seconds a preview may take in the sandbox (compiling the draft included), and its
# CPU seconds there.
PREVIEW_TIMEOUT_S = 20.0
PREVIEW_CPU_S = 10


@dataclass(frozen=True)
class PreviewChoice:
    id: str
    text: Text
    numeric: bool  # a value (shown as a quantity) rather than a statement
    correct: bool
    pitfall_id: str | None
    pitfall_title: Text | None
    explanation: Text | None


@dataclass(frozen=True)
class Preview:
    """A variant as learners see it, with its key and every pitfall's explanation."""

    template_id: str
    template_version: int
    seed: int
    point_number: int
    point_title: Text
    params_display: dict[str, str]
    # Every parameter with its values as displayed (the page's parameter choosers).
    param_values: tuple[tuple[str, tuple[str, ...]], ...]
    stem: Text
    choices: tuple[PreviewChoice, ...]
    correct_choice_id: str
    solution: tuple[Text, ...]
    # The key and each pitfall's side of it per parameter combination (the rule behind
    # ``choices``); None when a value cannot be computed (the draft's problems say which).
    sides: SideTable | None = None


@dataclass(frozen=True)
class PreviewRefused:
    """Why no preview was made: a problem code, its HTTP status and the message."""

    code: str
    status_code: int
    text: Text


def preview(
    *,
    db: Session,
    card_id: str,
    template_id: str,
    seed: int | None = None,
    params: dict[str, str] | None = None,
) -> Preview:
    """A variant of the card's draft (or latest version), made in the sandbox; 4xx problems for
    a draft with errors, an unknown template, values no variant draws, or a draft too large."""
    from app.authoring.service import checked_size, get_draft
    from app.domain.catalog import document_hash

    document = checked_size(get_draft(db=db, card_id=card_id).document)
    chosen = tuple(params.items()) if params else None
    kind, payload = default_sandbox().call(
        preview_task,
        document_hash(document),
        document,
        template_id,
        seed,
        chosen,
        timeout_s=PREVIEW_TIMEOUT_S,
        cpu_limit_s=PREVIEW_CPU_S,
    )
    if kind != "ok":
        raise InvalidInput(failure_text(kind, payload, PREVIEW_CPU_S), code="preview_failed")
    if isinstance(payload, PreviewRefused):
        problem = Problem(payload.text, code=payload.code)
        problem.status_code = payload.status_code
        raise problem
    assert isinstance(payload, Preview)
    return payload


def make_preview(
    compiled: Any,
    template_id: str,
    seed: int | None,
    params: tuple[tuple[str, str], ...] | None,
) -> Preview | PreviewRefused:
    """The preview of a compiled document (:class:`app.domain.authoring.Compiled`); runs in a
    sandbox worker. For chosen values the first seed that draws them is used, so the preview is
    a real, reproducible variant (and its seed a permalink)."""
    from app.domain.formulas import FormulaError
    from app.domain.generation import draw_params, generate, question_id, variant_rng
    from app.domain.sides import side_table

    card = compiled.card
    if card is None:
        first = compiled.problems[0].text if compiled.problems else Message("card")
        return PreviewRefused("card_has_errors", InvalidInput.status_code, first)
    template = card.template(template_id)
    if template is None:
        failed = next((p for p in compiled.problems if p.template_id == template_id), None)
        if failed is not None:
            return PreviewRefused("card_has_errors", InvalidInput.status_code, failed.text)
        return PreviewRefused(
            "template_not_found",
            NotFound.status_code,
            Message("the card has no template %(template)s", template=repr(template_id)),
        )
    if params:
        wanted = {}
        for name, text in params:
            param = template.params.get(name)
            if param is None:
                return PreviewRefused(
                    "invalid_param",
                    InvalidInput.status_code,
                    Message("the template has no parameter %(name)s", name=repr(name)),
                )
            match = next(
                (v for v in param.values if param.display(v) == text or str(v) == text), None
            )
            if match is None:
                return PreviewRefused(
                    "invalid_param",
                    InvalidInput.status_code,
                    Message(
                        "%(value)s is not among the values of %(name)s",
                        value=repr(text),
                        name=repr(name),
                    ),
                )
            wanted[name] = match
        for candidate in range(PARAMETER_SEARCH_SEEDS):
            drawn = draw_params(
                template, variant_rng(question_id(card, template, candidate), template.generator)
            )
            if all(drawn[n] == v for n, v in wanted.items()):
                seed = candidate
                break
        else:
            return PreviewRefused(
                "invalid_param",
                InvalidInput.status_code,
                Message("no variant with these values was found"),
            )
    seed = 0 if seed is None else seed
    if not 0 <= seed <= MAX_SEED:
        return PreviewRefused(
            "invalid_seed",
            InvalidInput.status_code,
            Message("seed must be between 0 and %(limit)s", limit=MAX_SEED),
        )
    variant = generate(card, template, seed)
    try:
        sides = side_table(template)
    except FormulaError:
        sides = None
    point = card.point_by_slug(variant.id.point)
    assert point is not None
    return Preview(
        template_id=variant.id.template_id,
        template_version=variant.id.template_version,
        seed=variant.id.seed,
        point_number=point.number,
        point_title=point.title,
        params_display=dict(variant.params_display),
        param_values=tuple(
            (name, tuple(param.display(v) for v in param.values))
            for name, param in template.params.items()
        ),
        stem=variant.stem,
        choices=tuple(
            PreviewChoice(
                id=c.id,
                text=c.text,
                numeric=c.value is not None,
                correct=c.correct,
                pitfall_id=c.pitfall.id if c.pitfall else None,
                pitfall_title=c.pitfall.title if c.pitfall else None,
                explanation=(c.explanation or c.pitfall.explanation) if c.pitfall else None,
            )
            for c in variant.choices
        ),
        correct_choice_id=variant.correct_choice_id,
        solution=tuple(variant.solution),
        sides=sides,
    )
