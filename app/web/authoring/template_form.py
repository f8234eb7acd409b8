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
# Fields of a template, and of its pitfalls, that the editor does not show: kept as they were.
_KEPT = ("conventions", "sources")
_KEPT_IN_PITFALLS = ("convention", "phrasings")


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
        params[name.strip()] = spec
    return params


def template_from_form(
    form: Mapping[str, str], existing: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The template document a submitted editor form describes."""
    kind = form.get("kind", "numeric")
    template: dict[str, Any] = {
        "id": form.get("id", "").strip(),
        "kind": kind,
        "params": parse_params(form.get("params", "")),
        "stem": {"en": form.get("stem_en", ""), "zh": form.get("stem_zh", "")},
        "choices": _int(form.get("choices"), 4),
        "solution": _steps(form.get("solution_en", ""), form.get("solution_zh", "")),
        "pitfalls": [],
    }
    if existing is not None and "version" in existing:
        template["version"] = existing["version"]
    # What the form does not show is kept as the template had it.
    for name in _KEPT:
        if existing is not None and existing.get(name):
            template[name] = existing[name]
    if kind == "numeric":
        template["answer"] = form.get("answer", "").strip()
        template["unit"] = form.get("unit", "").strip() or "B"
        template["precision"] = _int(form.get("precision"), MIN_FIGURES)
    else:
        template["answer"] = {"en": form.get("answer_en", ""), "zh": form.get("answer_zh", "")}
        phrasings = _steps(form.get("answer_phrasings_en", ""), form.get("answer_phrasings_zh", ""))
        if phrasings:
            template["answer_phrasings"] = phrasings
    for index in range(MAX_PITFALLS):
        prefix = f"pitfall{index}_"
        pitfall_id = form.get(prefix + "id", "").strip()
        if not pitfall_id:
            continue
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
        kept = _existing_pitfall(existing, pitfall_id)
        for name in _KEPT_IN_PITFALLS:
            if kept.get(name) and (name != "phrasings" or kind == "statement"):
                pitfall[name] = kept[name]
        if kind == "numeric":
            pitfall["formula"] = form.get(prefix + "formula", "").strip()
        else:
            pitfall["statement"] = {
                "en": form.get(prefix + "statement_en", ""),
                "zh": form.get(prefix + "statement_zh", ""),
            }
        template["pitfalls"].append(pitfall)
    return template


def _existing_pitfall(existing: Mapping[str, Any] | None, pitfall_id: str) -> Mapping[str, Any]:
    for pitfall in (existing or {}).get("pitfalls") or []:
        if isinstance(pitfall, Mapping) and pitfall.get("id") == pitfall_id:
            return pitfall
    return {}


def form_problems(template: Mapping[str, Any]) -> list[CardProblem]:
    """What the form refuses before the draft is saved, each at its field: significant figures
    are 0 (whole numbers) or 3 to 12, never silently raised to 3."""
    figures = template.get("precision")
    if template.get("kind") != "numeric" or figures is None:
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


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default


def _steps(en: str, zh: str) -> list[dict[str, str]]:
    """Solution steps, one per line, the two languages paired line by line."""
    left = [line.strip() for line in en.splitlines() if line.strip()]
    right = [line.strip() for line in zh.splitlines() if line.strip()]
    count = max(len(left), len(right))
    return [
        {"en": left[i] if i < len(left) else "", "zh": right[i] if i < len(right) else ""}
        for i in range(count)
    ]
