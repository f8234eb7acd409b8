"""The template editor form read into a template document, and a template's parameters written
back as the form's text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.authoring import CardProblem
from app.domain.generation import MIN_FIGURES
from app.domain.messages import Message
from app.problems import InvalidInput

MAX_PITFALLS = 30
MAX_FIGURES = 12


def params_text(params: Mapping[str, Any]) -> str:
    """A template's ``params`` as the editor shows them: ``name = v1, v2 | format`` per line."""
    lines = []
    for name, spec in params.items():
        values = ", ".join(str(v) for v in spec.get("values", []))
        fmt = spec.get("format")
        lines.append(f"{name} = {values}" + (f" | {fmt}" if fmt else ""))
    return "\n".join(lines)


def parse_params(text: str) -> dict[str, Any]:
    """``name = v1, v2 | format`` per line → the template's ``params``."""
    params: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, rest = line.partition("=")
        if not sep:
            raise InvalidInput(
                Message("parameters, line %(line)s: write 'name = value, value, ...'", line=number)
            )
        values_text, _, fmt = rest.partition("|")
        values: list[int | float | str] = []
        for raw in values_text.split(","):
            raw = raw.strip()
            if not raw:
                continue
            try:
                values.append(int(raw))
            except ValueError:
                values.append(raw)
        spec: dict[str, Any] = {"values": values}
        if fmt.strip():
            spec["format"] = fmt.strip()
        name = name.strip()
        if name and name in params:  # the later line would replace it unsaid
            raise InvalidInput(
                Message(
                    "parameters, line %(line)s: %(name)s is given on an earlier line already",
                    line=number,
                    name=repr(name),
                )
            )
        params[name] = spec
    return params


def derived_text(derived: Mapping[str, Any]) -> str:
    """A template's ``derived`` parameters as the editor shows them: ``name = formula | format``."""
    lines = []
    for name, spec in derived.items():
        fmt = spec.get("format")
        lines.append(f"{name} = {spec.get('formula', '')}" + (f" | {fmt}" if fmt else ""))
    return "\n".join(lines)


def parse_derived(text: str) -> dict[str, Any]:
    """``name = formula | format`` per line → the template's ``derived``."""
    derived: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, rest = line.partition("=")
        if not sep or not rest.strip():
            raise InvalidInput(
                Message("derived parameters, line %(line)s: write 'name = formula'", line=number)
            )
        formula, _, fmt = rest.partition("|")
        spec: dict[str, Any] = {"formula": formula.strip()}
        if fmt.strip():
            spec["format"] = fmt.strip()
        name = name.strip()
        if name and name in derived:
            raise InvalidInput(
                Message(
                    "derived parameters, line %(line)s: %(name)s is given on an earlier line"
                    " already",
                    line=number,
                    name=repr(name),
                )
            )
        derived[name] = spec
    return derived


_BOUNDS = (">=", "<=")


def constraints_text(constraints: list[Mapping[str, Any]]) -> str:
    """A template's ``constraints`` as the editor shows them, one per line: ``a/t integer``,
    ``t*p <= 64``, ``s >= h``, or several of them joined with ``;``."""
    lines = []
    for item in constraints:
        value = str(item.get("value", ""))
        parts = []
        if item.get("integer"):
            parts.append(f"{value} integer")
        if item.get("at_least") is not None:
            parts.append(f"{value} >= {item['at_least']}")
        if item.get("at_most") is not None:
            parts.append(f"{value} <= {item['at_most']}")
        lines.append("; ".join(parts))
    return "\n".join(lines)


def parse_constraints(text: str) -> list[dict[str, Any]]:
    """One constraint per line (see :func:`constraints_text`) → the template's ``constraints``."""
    constraints: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        item: dict[str, Any] = {}
        for part in line.split(";"):
            part = part.strip()
            if part.endswith(" integer"):
                value, bound, key = part.removesuffix(" integer"), None, "integer"
            else:
                op = next((op for op in _BOUNDS if op in part), None)
                if op is None:
                    raise InvalidInput(
                        Message(
                            "constraints, line %(line)s: write %(forms)s",
                            line=number,
                            forms="'formula integer' | 'formula >= formula' | 'formula <= formula'",
                        )
                    )
                value, _, bound = part.partition(op)
                key = "at_least" if op == ">=" else "at_most"
            value = value.strip()
            if item.get("value", value) != value or not value:
                raise InvalidInput(
                    Message(
                        "constraints, line %(line)s: one formula per line, compared with bounds",
                        line=number,
                    )
                )
            item["value"] = value
            item[key] = True if bound is None else bound.strip()
        constraints.append(item)
    return constraints


# What the editor shows and reads; a template's other fields (conventions, sources, the
# pitfalls' other wordings, a pitfall's convention) are kept as they were, and so are a
# statement's other wordings of the answer when the form does not send them.
_FORM_FIELDS = frozenset(
    {"id", "kind", "params", "derived", "constraints", "stem", "choices", "solution", "pitfalls"}
    | {"answer", "unit", "precision", "version"}
)
_PITFALL_FORM_FIELDS = frozenset({"id", "title", "explanation", "formula", "statement"})


def template_from_form(
    form: Mapping[str, str], existing: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The template document a submitted editor form describes (InvalidInput: the first thing
    the form refuses, see :func:`read_template_form`)."""
    template, problems = read_template_form(form, existing)
    if problems:
        raise InvalidInput(problems[0].text)
    return template


def kind_fields_missing(form: Mapping[str, str]) -> bool:
    """Whether the form was shown for the other kind than the one chosen (a new template whose
    kind was switched): it has none of the chosen kind's answer fields."""
    if form.get("kind", "numeric") == "statement":
        return "answer_en" not in form and "answer_zh" not in form
    return "answer" not in form


def read_template_form(
    form: Mapping[str, str], existing: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[CardProblem]]:
    """The template document a submitted editor form describes, and what the form refuses at
    its field (a line of parameters, derived parameters or constraints that does not read, a
    count that is not a whole number, a kind changed): the template then shows what was typed,
    and is not saved."""
    problems: list[CardProblem] = []
    template_id = form.get("id", "").strip()

    def refuse(field: str, text: Message) -> None:
        problems.append(CardProblem("error", template_id or "new", field, text))

    def parsed(field: str, parse: Any, empty: Any) -> Any:
        try:
            return parse(form.get(field, ""))
        except InvalidInput as refusal:
            refuse(field, refusal.text)
            return empty

    kind = form.get("kind", "numeric")
    if existing is not None and existing.get("kind", "numeric") != kind:
        refuse("kind", CHANGED_KIND)
        kind = existing.get("kind", "numeric")  # read as the form was shown
    template: dict[str, Any] = {
        "id": template_id,
        "kind": kind,
        "params": parsed("params", parse_params, {}),
        "stem": {"en": form.get("stem_en", ""), "zh": form.get("stem_zh", "")},
        "choices": _whole(form, "choices", 4, refuse),
        "solution": _steps(form.get("solution_en", ""), form.get("solution_zh", "")),
        "pitfalls": [],
    }
    if existing is not None and "version" in existing:
        template["version"] = existing["version"]
    if kind == "numeric":
        template["answer"] = form.get("answer", "").strip()
        template["unit"] = form.get("unit", "").strip() or "B"
        template["precision"] = _whole(form, "precision", MIN_FIGURES, refuse)
    else:
        template["answer"] = {"en": form.get("answer_en", ""), "zh": form.get("answer_zh", "")}
        if "answer_phrasings_en" in form or "answer_phrasings_zh" in form:
            template["answer_phrasings"] = _steps(
                form.get("answer_phrasings_en", ""), form.get("answer_phrasings_zh", "")
            )
    for index in range(MAX_PITFALLS):
        prefix = f"pitfall{index}_"
        pitfall_id = form.get(prefix + "id", "").strip()
        if not pitfall_id and not _row_filled(form, prefix):
            continue  # the blank row the form offers for a new pitfall
        pitfall: dict[str, Any] = {
            "id": pitfall_id,
            "title": {
                "en": form.get(prefix + "title_en", ""),
                "zh": form.get(prefix + "title_zh", ""),
            },
            "explanation": {
                "en": form.get(prefix + "explanation_en", ""),
                "zh": form.get(prefix + "explanation_zh", ""),
            },
        }
        if kind == "numeric":
            pitfall["formula"] = form.get(prefix + "formula", "").strip()
        else:
            pitfall["statement"] = {
                "en": form.get(prefix + "statement_en", ""),
                "zh": form.get(prefix + "statement_zh", ""),
            }
        template["pitfalls"].append(pitfall)
        if not pitfall_id:
            # Typed into but unnamed: kept on the form and refused, never dropped unsaid.
            refuse(f"pitfalls.#{len(template['pitfalls'])}.id", UNNAMED_PITFALL)
    derived = parsed("derived", parse_derived, {})
    constraints = parsed("constraints", parse_constraints, [])
    if derived:
        template["derived"] = derived
    if constraints:
        template["constraints"] = constraints
    if existing is not None:
        _keep_stored_values(template["params"], existing.get("params"))
        _keep_what_the_form_does_not_show(template, existing)
    return template, problems


def _keep_stored_values(params: Mapping[str, Any], before: object) -> None:
    """A parameter whose values are typed as the editor showed them keeps them as stored: a
    card file's 0.0005 is a number, the form's text "0.0005", and saving a template unchanged
    must change nothing."""
    if not isinstance(before, Mapping):
        return
    for name, spec in params.items():
        stored = before.get(name)
        values = stored.get("values") if isinstance(stored, Mapping) else None
        if isinstance(values, list) and [str(v) for v in values] == [
            str(v) for v in spec["values"]
        ]:
            spec["values"] = list(values)


UNNAMED_PITFALL = Message(
    "this pitfall has no id: give it one (lowercase letters, digits and dashes, such as"
    " forgot-the-master-copy), or clear its fields to leave it out"
)
_PITFALL_ROW_FIELDS = (
    "title_en", "title_zh", "explanation_en", "explanation_zh", "formula", "statement_en",
    "statement_zh",
)  # fmt: skip


def _row_filled(form: Mapping[str, str], prefix: str) -> bool:
    """Whether anything was typed in a pitfall row besides its id."""
    return any(form.get(prefix + field, "").strip() for field in _PITFALL_ROW_FIELDS)


CHANGED_KIND = Message(
    "a template's kind cannot be changed: a numeric template's answer and pitfalls are formulas,"
    " a statement template's are sentences. Add a template of the other kind to this exam point"
    " instead, and delete this one once the new one is ready."
)


def _keep_what_the_form_does_not_show(
    template: dict[str, Any], existing: Mapping[str, Any]
) -> None:
    """Carry the fields of the template as it was that the form has no field for: an edit in
    the dashboard never drops a convention, a source or another wording."""
    for key, value in existing.items():
        if key not in _FORM_FIELDS and key not in template:
            if key == "answer_phrasings" and value and template["kind"] != "statement":
                continue
            template[key] = value
    before = {p.get("id"): p for p in existing.get("pitfalls", []) if isinstance(p, Mapping)}
    for pitfall in template["pitfalls"]:
        for key, value in before.get(pitfall["id"], {}).items():
            if key not in _PITFALL_FORM_FIELDS and key not in pitfall:
                if key == "phrasings" and value and template["kind"] != "statement":
                    continue
                pitfall[key] = value


def form_problems(template: Mapping[str, Any]) -> list[CardProblem]:
    """What the form refuses before the draft is saved, each at its field: significant figures
    are 0 (whole numbers) or 3 to 12, never silently raised to 3."""
    figures = template.get("precision")
    if template.get("kind") != "numeric" or not isinstance(figures, int):
        return []
    if figures == 0 or MIN_FIGURES <= figures <= MAX_FIGURES:
        return []
    text = Message(
        "significant figures must be 0 (whole numbers) or %(least)s to %(most)s, got %(value)s:"
        " with fewer, values 5%% apart could read alike",
        least=MIN_FIGURES,
        most=MAX_FIGURES,
        value=figures,
    )
    return [CardProblem("error", template.get("id") or "new", "precision", text)]


def _whole(form: Mapping[str, str], field: str, default: int, refuse: Any) -> int | str:
    """The whole number typed in ``field`` (``default`` when blank); anything else is refused at
    the field and kept as typed."""
    typed = form.get(field, "").strip()
    if not typed:
        return default
    try:
        return int(typed)
    except ValueError:
        refuse(field, Message("must be a whole number"))
        return typed


def _steps(en: str, zh: str) -> list[dict[str, str]]:
    """Solution steps, one per line, the two languages paired line by line."""
    left = [line.strip() for line in en.splitlines() if line.strip()]
    right = [line.strip() for line in zh.splitlines() if line.strip()]
    count = max(len(left), len(right))
    return [
        {"en": left[i] if i < len(left) else "", "zh": right[i] if i < len(right) else ""}
        for i in range(count)
    ]
