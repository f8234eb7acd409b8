"""Checking a card document as an instructor edits it: every problem, located, at once.

:func:`check_document` reports the document's shape errors (every one, with its field), then the
templates that do not compile (each with the field and the column in its formula), then each
compiled template's validation over its whole domain (with the parameter values that trigger
it), and warnings that do not block publishing. :func:`next_version` decides the version numbers
of a publication, so instructors never manage versions by hand: a template whose content changed
since the last publication gets a new version, an unchanged one keeps its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import ValidationError

from .bilingual import Text
from .cards import (
    CHOICE_PATTERN,
    NAME_PATTERN,
    SLUG_PATTERN,
    Card,
    CardError,
    _CardIn,
    _TextIn,
    document_templates,
    parse_card,
    stored_document,
)
from .cues import Cue
from .generation import LATEST_GENERATOR
from .manifests import TemplateEntry, VersionManifest, template_body_hash
from .markup import markup_problems
from .messages import Message, plural_message
from .numerals import is_digits
from .validation import validate_template

Severity = Literal["error", "warning"]
_PLACEHOLDER = re.compile(r"\{(=[^{}]*|[a-z][a-z0-9_]*)\}")


@dataclass(frozen=True)
class CardProblem:
    severity: Severity
    template_id: str | None
    field: str | None
    text: Text  # the message, in every language (the dashboard shows the page's)
    position: int | None = None
    # The problem alone, where the message also names card, template, field and column (which a
    # page shows beside it); the text otherwise.
    detail: Text | None = None
    cue: Cue | None = None  # a give-away cue: its family and sample variants
    # Validation stopped at this problem, before any template was validated (the document's
    # structure, or a card-level part, is wrong): the templates' own problems are not known.
    halts: bool = False

    @property
    def reason(self) -> Text:
        return self.detail if self.detail is not None else self.text

    @property
    def shown_field(self) -> str | None:
        """The field as a page numbers things, from 1 (``points.1.title`` for the API's
        ``points.0.title``): the dashboard lists exam point 1 first."""
        if self.field is None:
            return None
        return ".".join(str(int(p) + 1) if is_digits(p) else p for p in self.field.split("."))

    @property
    def message(self) -> str:
        """The message in English."""
        return self.text.en

    def to_json(self, lang: str = "en") -> dict[str, Any]:
        return {
            "severity": self.severity,
            "template_id": self.template_id,
            "field": self.field,
            "message": self.text.get(lang),
            "position": self.position,
            "giveaway": self.cue.to_json() if self.cue is not None else None,
            "halts": self.halts,
        }


# A draft's size limits (cards/README.md), checked on the document before anything compiles:
# the ZeRO card has 59 templates, 470 formulas and 1,900 placeholders, so a card five times
# its size is accepted; beyond, compiling and validating it would outgrow a validation job.
MAX_TEMPLATES = 300
# Card formulas, numeric answers, pitfall formulas and the calculator's formulas.
MAX_FORMULAS = 3_000
# {name} and {=formula} placeholders in every text of every language.
MAX_PLACEHOLDERS = 12_000


@dataclass(frozen=True)
class DraftSize:
    templates: int
    formulas: int
    placeholders: int


def draft_size(raw: object) -> DraftSize:
    """What a card document holds, counted on its data (one pass, nothing compiled)."""
    if not isinstance(raw, Mapping):
        return DraftSize(0, 0, 0)
    formulas = raw.get("formulas")
    count = len(formulas) if isinstance(formulas, list) else 0
    templates = 0
    for _, template in document_templates(raw):
        templates += 1
        count += isinstance(template.get("answer"), str)
        pitfalls = template.get("pitfalls")
        for pitfall in pitfalls if isinstance(pitfalls, list) else []:
            count += isinstance(pitfall, dict) and isinstance(pitfall.get("formula"), str)
    count += _calculator_formulas(raw.get("calculator"))
    placeholders = 0
    stack: list[object] = [raw]
    while stack:  # iterative: a document's nesting cannot exhaust the stack
        item = stack.pop()
        if isinstance(item, str):
            placeholders += sum(1 for _ in _PLACEHOLDER.finditer(item))
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return DraftSize(templates, count, placeholders)


def _calculator_formulas(calculator: object) -> int:
    """The formulas of a calculator section: outputs, their cases, rules and checks."""
    if not isinstance(calculator, Mapping):
        return 0
    parts: list[object] = []
    for key in ("outputs", "rules", "checks"):
        items = calculator.get(key)
        parts += items if isinstance(items, list) else []
    count = 0
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        cases = part.get("cases")
        formulas = [part] + (list(cases) if isinstance(cases, list) else [])
        for item in formulas:
            if isinstance(item, Mapping):
                count += sum(
                    isinstance(item.get(k), str)
                    for k in ("formula", "value", "at_least", "at_most")
                )
    return count


def size_problem(raw: object) -> Text | None:
    """Why the document is over a draft's size limits, or None."""
    size = draft_size(raw)
    if size.templates > MAX_TEMPLATES:
        return Message(
            "the draft has %(count)s templates; a draft may have at most %(limit)s",
            count=size.templates,
            limit=MAX_TEMPLATES,
        )
    if size.formulas > MAX_FORMULAS:
        return Message(
            "the draft has %(count)s formulas (card formulas, answers, pitfalls and the "
            "calculator's); a draft "
            "may have at most %(limit)s",
            count=size.formulas,
            limit=MAX_FORMULAS,
        )
    if size.placeholders > MAX_PLACEHOLDERS:
        return Message(
            "the draft's texts have %(count)s placeholders; a draft may have at most %(limit)s",
            count=size.placeholders,
            limit=MAX_PLACEHOLDERS,
        )
    return None


@dataclass(frozen=True)
class Checked:
    card: Card | None  # None when the document's shape is wrong
    problems: tuple[CardProblem, ...]

    @property
    def errors(self) -> list[CardProblem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def publishable(self) -> bool:
        return self.card is not None and not self.errors

    @property
    def stopped(self) -> bool:
        """Whether validation stopped before the templates: no template was validated, so no
        page may say that they passed."""
        return any(p.halts for p in self.problems)


def check_document(raw: object, *, validate: bool = True) -> Checked:
    """Every problem of a card document (the structure of ``cards/*.yaml``, as JSON data).

    It is :func:`compile_document`, then :func:`template_problems` for each template that
    compiled (what a validation job runs as one task per template), then :func:`warnings`.
    """
    compiled = compile_document(raw)
    if compiled.card is None:
        return Checked(None, compiled.problems)
    problems = list(compiled.problems)
    if validate:
        for template_id in compiled.to_validate:
            problems.extend(template_problems(compiled.card, template_id))
    problems.extend(warnings(compiled.card))
    return Checked(compiled.card, tuple(problems))


@dataclass(frozen=True)
class Compiled:
    """A card document compiled: the card (None when its shape or a card-level part is wrong),
    the problems found so far, and the templates left to validate, in the card's order."""

    card: Card | None
    problems: tuple[CardProblem, ...]
    to_validate: tuple[str, ...]
    not_compiled: int = 0  # templates that did not compile (each has its problem)


def compile_document(raw: object) -> Compiled:
    """The document's shape errors (every one) or its compilation problems (every template that
    does not compile, located); what compiled is left for :func:`template_problems`."""
    try:
        _CardIn.model_validate(raw)
    except ValidationError as exc:
        return Compiled(None, _shape_problems(raw, exc.errors()), ())
    compile_errors: list[CardError] = []
    try:
        card = parse_card(raw, problems=compile_errors)
    except CardError as exc:  # a card-level problem (formulas, numbering, duplicate ids)
        return Compiled(None, (replace(_from_error(exc), halts=True),), ())
    problems = tuple(_from_error(exc) for exc in compile_errors)
    failed = {p.template_id for p in problems}
    # Markup in a text stops nothing: its template is validated all the same.
    markup = tuple(_from_error(exc) for exc in markup_problems(card.document))
    return Compiled(
        card,
        problems + markup,
        tuple(t.id for t in card.templates() if t.id not in failed),
        len(failed),
    )


def template_problems(card: Card, template_id: str) -> list[CardProblem]:
    """The template validated over its whole domain: its problem, or none."""
    template = card.template(template_id)
    if template is None:
        raise KeyError(template_id)
    try:
        validate_template(card, template)
    except CardError as exc:
        return [_from_error(exc, template.id)]
    return []


# What pydantic puts in an error's location for a member of a union (``answer: str | _TextIn``
# fails as ``answer.str`` and ``answer._TextIn.en``): no field of a card document.
_UNION_MEMBERS = frozenset({"str", "int", "float", "bool", "list", "dict"})
# Errors saying a value is not of one member's type: noise beside another member's errors.
_TYPE_ERRORS = frozenset(
    {"string_type", "int_type", "float_type", "list_type", "dict_type", "model_type"}
)


def _union_member(part: object) -> bool:
    return isinstance(part, str) and (part in _UNION_MEMBERS or part.startswith("_") or "[" in part)


def _shape_problems(raw: object, errors: Sequence[Mapping[str, Any]]) -> tuple[CardProblem, ...]:
    """Every shape error at its document field (a union's members left out of the location);
    a value of a union that is none of its members is named once, by the member it resembles
    (a text object's empty language, not also "must be text")."""
    located = [
        ({**error, "loc": tuple(p for p in error.get("loc", ()) if not _union_member(p))}, error)
        for error in errors
    ]
    kept = []
    for error, original in located:
        in_union = any(_union_member(p) for p in original.get("loc", ()))
        here = error["loc"]
        if in_union and error.get("type") in _TYPE_ERRORS:
            others = [e for e, o in located if o is not original and e["loc"][: len(here)] == here]
            if others:
                continue
        kept.append(_shape_problem(raw, error))
    return tuple(kept)


def _shape_problem(raw: object, error: Mapping[str, Any]) -> CardProblem:
    location = [part for part in error.get("loc", ())]
    template_id = None
    # points.<i>.templates.<j>.rest → the template's id when the document has one there.
    if len(location) >= 4 and location[0] == "points" and location[2] == "templates":
        try:
            template = raw["points"][location[1]]["templates"][location[3]]  # type: ignore[index]
            template_id = str(template.get("id")) if isinstance(template, dict) else None
        except (KeyError, IndexError, TypeError):
            template_id = None
        location = location[4:]
    field = ".".join(str(part) for part in location) or None
    return CardProblem("error", template_id, field, shape_message(error), None, halts=True)


def shape_message(error: Mapping[str, Any]) -> Text:
    """A document shape error (one of pydantic's) in every language: the common kinds are
    translated, with their limits; any other keeps pydantic's English message."""
    context = error.get("ctx") or {}
    kind = error.get("type")
    if kind == "missing":
        return Message("required")
    if kind == "extra_forbidden":
        return Message("not a field of a card document")
    if kind in ("string_type", "string_sub_type"):
        return Message("must be text")
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return Message("must be a whole number")
    if kind in ("list_type",):
        return Message("must be a list")
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return Message("must be an object with its fields")
    if kind == "string_too_short" and context.get("min_length") == 1:
        return Message("must not be empty")
    if kind == "string_too_short":
        return Message(
            "must be at least %(limit)s characters long", limit=context.get("min_length")
        )
    if kind == "string_too_long":
        return Message("must be at most %(limit)s characters long", limit=context.get("max_length"))
    if kind == "string_pattern_mismatch":
        return _pattern_words(context.get("pattern"), error.get("loc", ()))
    if kind == "too_short" and isinstance(context.get("min_length"), int):
        least = context["min_length"]
        return plural_message("needs at least %(num)s item", "needs at least %(num)s items", least)
    if kind == "too_long" and isinstance(context.get("max_length"), int):
        most = context["max_length"]
        return plural_message("takes at most %(num)s item", "takes at most %(num)s items", most)
    if kind == "greater_than_equal":
        return Message("must be at least %(limit)s", limit=context.get("ge"))
    if kind == "less_than_equal":
        return Message("must be at most %(limit)s", limit=context.get("le"))
    if kind == "literal_error":
        return Message("must be one of %(expected)s", expected=context.get("expected"))
    english = str(error.get("msg", "invalid"))
    return Text.verbatim(english)


# An id of each kind as the cards spell it, shown with the rule an id of its kind breaks.
_ID_EXAMPLES = {
    "templates": "p1-ddp-per-rank",
    "pitfalls": "ideal-time",
    "checks": "pipeline-fills",
}


def _pattern_words(pattern: object, location: Sequence[object]) -> Text:
    """What an id, a slug or a name that does not match its pattern must be, in words (the raw
    pattern only for one this does not know)."""
    if pattern == SLUG_PATTERN:
        within = next((p for p in reversed(location[:-1]) if isinstance(p, str)), None)
        if location[-1:] == ("slug",):
            example = "per-layer-formula"
        else:
            example = _ID_EXAMPLES.get(within or "", "kv-cache")
        return Message(
            "must be lower-case letters and digits, words joined by single hyphens "
            "(e.g. %(example)s)",
            example=example,
        )
    if pattern == CHOICE_PATTERN:
        return Message(
            "must be lower-case letters and digits, words joined by single hyphens or "
            "underscores (e.g. %(example)s)",
            example="selective",
        )
    if pattern == NAME_PATTERN:
        return Message(
            "must be a name of at most 40 letters, digits and underscores, not starting with a "
            "digit (e.g. %(example)s)",
            example="n_d",
        )
    return Message("must match %(pattern)s", pattern=pattern)


def _from_error(exc: CardError, template_id: str | None = None) -> CardProblem:
    return CardProblem(
        "error",
        exc.template_id or template_id,
        exc.field,
        exc.text,
        exc.position,
        exc.reason,
        exc.cue,
    )


def warnings(card: Card) -> list[CardProblem]:
    """What does not block publishing: a numeric template's explanations without numbers (a
    statement's have none to show), numeric templates without parameters."""
    found = []
    for template in card.templates():
        for pitfall in template.pitfalls if template.kind == "numeric" else ():
            source = pitfall.explanation.en
            if not _PLACEHOLDER.search(source):
                found.append(
                    CardProblem(
                        "warning",
                        template.id,
                        f"pitfalls.{pitfall.id}.explanation",
                        Message(
                            "the explanation shows none of this variant's numbers ({value}, "
                            "{answer} or a parameter): learners read it with their numbers"
                        ),
                    )
                )
        if template.kind == "numeric" and not template.params:
            found.append(
                CardProblem(
                    "warning",
                    template.id,
                    "params",
                    Message("the template has no parameters: every variant asks the same numbers"),
                )
            )
    return found


def template_documents(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The templates of a card document by id."""
    return {str(t["id"]): t for _, t in document_templates(document) if "id" in t}


def canonical(document: Mapping[str, Any]) -> dict[str, Any]:
    """A document with every field spelled out as stored (defaults included), when it is valid."""
    try:
        return stored_document(_CardIn.model_validate(document))
    except ValidationError:
        copy: dict[str, Any] = json.loads(json.dumps(document))
        return copy


def next_version(
    draft: Mapping[str, Any],
    published: Sequence[VersionManifest],
    *,
    wording_only: Collection[str] = (),
) -> dict[str, Any]:
    """The draft as the next publication: card version = newest + 1, and every template whose
    content differs from its newest published form gets a version above any it had, or, when
    its id is in ``wording_only`` (its values proven unchanged: :mod:`app.domain.versions`), the
    same version with the next revision (``3.1`` after ``3``).

    ``published`` are the manifests of the card's stored versions: no older document is read.
    """
    document = canonical(draft)
    newest = max((m.version for m in published), default=0)
    document["version"] = newest + 1
    # Each published template with the generator its card drew it from: a template drawn from
    # another generator shows other variants, so it is new content (app.domain.catalog).
    latest: dict[str, tuple[int, TemplateEntry]] = {}
    highest: dict[str, int] = {}
    revisions: dict[tuple[str, int], int] = {}  # the highest revision of each template version
    for old in sorted(published, key=lambda m: m.version):
        for template_id, entry in old.templates.items():
            latest[template_id] = (old.generator, entry)
            highest[template_id] = max(highest.get(template_id, 0), entry.version)
            key = (template_id, entry.version)
            revisions[key] = max(revisions.get(key, 0), entry.revision)
    generator = _generator(document)
    for point in document.get("points", []):
        for template in point.get("templates", []):
            template.pop("revision", None)
            if template["id"] not in latest:
                template["version"] = max(1, int(template.get("version", 1)))
                continue
            latest_generator, entry = latest[template["id"]]
            same_generator = latest_generator == generator
            if same_generator and entry.body == template_body_hash(template):
                template["version"] = entry.version
                revision = entry.revision
            elif same_generator and template["id"] in wording_only:
                template["version"] = entry.version
                revision = revisions[(template["id"], entry.version)] + 1
            else:
                template["version"] = highest[template["id"]] + 1
                revision = 0
            if revision:
                template["revision"] = revision
    return document


def _generator(document: Mapping[str, Any]) -> int:
    """The generator a card document's templates draw from (1 when it names none)."""
    return int(document.get("generator") or 1)


# --- editing a document piece by piece (the dashboard's forms) --------------------------------


def put_template(
    document: Mapping[str, Any],
    point_slug: str,
    template: Mapping[str, Any],
    *,
    replaces: str | None,
) -> dict[str, Any]:
    """A copy of ``document`` with ``template`` in exam point ``point_slug`` (replacing the
    template ``replaces`` where it was, or appended)."""
    out: dict[str, Any] = json.loads(json.dumps(document))
    new = json.loads(json.dumps(template))
    if replaces is not None:
        for point in out.get("points", []):
            templates = point.get("templates", [])
            for index, existing in enumerate(templates):
                if existing.get("id") == replaces:
                    if point.get("slug") == point_slug:
                        new.setdefault("version", existing.get("version", 1))
                        templates[index] = new
                        return out
                    templates.pop(index)
                    break
    for point in out.get("points", []):
        if point.get("slug") == point_slug:
            new.setdefault("version", 1)
            point.setdefault("templates", []).append(new)
            return out
    raise KeyError(point_slug)


def remove_template(document: Mapping[str, Any], template_id: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(document))
    for point in out.get("points", []):
        point["templates"] = [t for t in point.get("templates", []) if t.get("id") != template_id]
    return out


# The card's own texts, each in every language (cards/README.md).
CARD_TEXTS = ("title", "definition", "use_cases", "problems_solved")


class PointInUse(ValueError):
    """An exam point that templates still use: removing it would remove them too."""

    def __init__(self, slug: str, templates: Sequence[str]) -> None:
        super().__init__(slug)
        self.slug = slug
        self.templates = tuple(templates)


def text_problems(field: str, text: object) -> list[CardProblem]:
    """What the card format refuses in one text of every language at ``field`` (a language
    missing or empty): the problems a draft's validation reports there."""
    try:
        _TextIn.model_validate(text)
    except ValidationError as exc:
        return [
            CardProblem(
                "error",
                None,
                ".".join([field, *(str(part) for part in error.get("loc", ()))]),
                shape_message(error),
            )
            for error in exc.errors()
        ]
    return []


def put_card_texts(
    document: Mapping[str, Any], texts: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    """A copy of ``document`` with the card's texts (``CARD_TEXTS``) given in ``texts``."""
    out: dict[str, Any] = json.loads(json.dumps(document))
    for name, text in texts.items():
        if name not in CARD_TEXTS:
            raise KeyError(name)
        out[name] = dict(text)
    return out


def put_card_formulas(
    document: Mapping[str, Any], params: Sequence[str], formulas: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A copy of ``document`` with the card's parameters and named formulas, in this order."""
    out: dict[str, Any] = json.loads(json.dumps(document))
    out["params"] = list(params)
    out["formulas"] = json.loads(json.dumps(list(formulas)))
    return out


def _renumbered(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for number, point in enumerate(points, start=1):
        point["number"] = number
    return points


def add_point(
    document: Mapping[str, Any],
    slug: str,
    title: Mapping[str, str],
    explanation: Mapping[str, str],
) -> dict[str, Any]:
    """A copy of ``document`` with a new last exam point (no template yet); ``KeyError`` when
    the card has a point ``slug`` already."""
    out: dict[str, Any] = json.loads(json.dumps(document))
    points = out.setdefault("points", [])
    if any(point.get("slug") == slug for point in points):
        raise KeyError(slug)
    points.append(
        {
            "number": len(points) + 1,
            "slug": slug,
            "title": dict(title),
            "explanation": dict(explanation),
            "templates": [],
        }
    )
    return out


def _point_index(points: Sequence[Mapping[str, Any]], slug: str) -> int:
    for index, point in enumerate(points):
        if point.get("slug") == slug:
            return index
    raise KeyError(slug)


def put_point(
    document: Mapping[str, Any],
    slug: str,
    title: Mapping[str, str],
    explanation: Mapping[str, str],
) -> dict[str, Any]:
    """A copy of ``document`` with exam point ``slug``'s title and explanation replaced (its
    slug, number and templates kept); ``KeyError`` when there is no such point."""
    out: dict[str, Any] = json.loads(json.dumps(document))
    points = out.get("points", [])
    point = points[_point_index(points, slug)]
    point["title"] = dict(title)
    point["explanation"] = dict(explanation)
    return out


def remove_point(document: Mapping[str, Any], slug: str) -> dict[str, Any]:
    """A copy of ``document`` without exam point ``slug``, the others renumbered 1..n.

    Refused (:class:`PointInUse`) while templates are in it: removing a point never removes
    templates with it (delete or move them first).
    """
    out: dict[str, Any] = json.loads(json.dumps(document))
    points = out.get("points", [])
    index = _point_index(points, slug)
    templates = [str(t.get("id")) for t in points[index].get("templates", [])]
    if templates:
        raise PointInUse(slug, templates)
    points.pop(index)
    _renumbered(points)
    return out


def move_point(document: Mapping[str, Any], slug: str, step: int) -> dict[str, Any]:
    """A copy of ``document`` with exam point ``slug`` moved ``step`` places (-1: up one; at
    either end it stays), the points renumbered 1..n. Slugs, not numbers, identify points in
    attempts and reviews, so renumbering loses nothing."""
    out: dict[str, Any] = json.loads(json.dumps(document))
    points = out.get("points", [])
    index = _point_index(points, slug)
    target = max(0, min(len(points) - 1, index + step))
    points.insert(target, points.pop(index))
    _renumbered(points)
    return out


def new_card_document(card_id: str, title: Mapping[str, str]) -> dict[str, Any]:
    """A card to start from: its title, the rest to be written (validation lists every empty
    text, and a card needs an exam point: no placeholder a learner could read), its variants
    drawn from the latest generator (app.domain.generation.LATEST_GENERATOR)."""
    empty = {"en": "", "zh": ""}
    return {
        "id": card_id,
        "version": 1,
        "generator": LATEST_GENERATOR,
        "params": [],
        "title": dict(title),
        "definition": dict(empty),
        "use_cases": dict(empty),
        "problems_solved": dict(empty),
        "formulas": [],
        "points": [],
    }
