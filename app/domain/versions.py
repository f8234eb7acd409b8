"""Whether an edit of a template changes what its questions ask: wording only, or values.

A template edit that leaves its questions' values alone is a *minor* revision (``3`` → ``3.1``):
the same parameters with the same values in the same order (and the same constraints and derived
parameters), the same choices count, unit and precision, the same pitfalls by id in the same order, the same generator and exam point, and for
every parameter combination the same key and the same value of every pitfall (statement
templates: the same key and pitfall statements, which decide the choices' order by their
lengths; other wordings may change). Then every seed draws the same parameters and the same
choices in the same order, so a question generated before the edit grades the same after it and
its attempts count with the new wording's (it keeps ``QuestionId.template_version``). Anything
else is a *major* version: a new ``version``, new variants, its own item statistics.

:func:`compare_templates` proves it over the whole domain (or, beyond
:data:`WHOLE_DOMAIN_LIMIT` combinations, over the combinations validation walks) and says why
not: what changed in the structure, and which values changed for which parameters.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from .bilingual import Text
from .cards import Card, Template, find_template_document
from .formulas import FormulaError
from .generation import candidates, named_values
from .manifests import template_body_hash as body_hash
from .messages import Message
from .sampling import parameter_combinations

# Up to this many parameter combinations the comparison walks every one; a larger domain is
# compared on the combinations validation walks (app.domain.sampling).
WHOLE_DOMAIN_LIMIT = 20_000
# Value changes listed by name (the comparison counts the others).
SHOWN_CHANGES = 3


@dataclass(frozen=True)
class ValueChange:
    """One value that differs: the key's or a pitfall's, at one parameter combination."""

    choice: str | None  # the pitfall's id; None for the key
    params: str  # the combination as texts show it: {psi=70B, n_d=8}
    before: Text
    after: Text


@dataclass(frozen=True)
class Comparison:
    """What separates two forms of a template (the published one and its edit)."""

    structure: tuple[Text, ...]  # what differs besides the values (pitfalls, unit, parameters…)
    values: tuple[ValueChange, ...]  # the first :data:`SHOWN_CHANGES` value changes
    differing: int  # how many (combination, choice) values differ in all
    combinations: int  # how many combinations were compared

    @property
    def minor(self) -> bool:
        """Wording only: every value is the same."""
        return not self.structure and not self.differing

    @property
    def reasons(self) -> tuple[Text, ...]:
        """Why it is a major version, one sentence a reason (none when it is minor)."""
        shown = tuple(_value_reason(change) for change in self.values)
        more = self.differing - len(self.values)
        if more > 0:
            shown += (Message("and %(count)s other value(s)", count=more),)
        return self.structure + shown

    def to_json(self, lang: str = "en") -> dict[str, object]:
        return {
            "kind": "minor" if self.minor else "major",
            "reasons": [r.get(lang) for r in self.reasons],
            "value_changes": [
                {
                    "pitfall_id": change.choice,
                    "params": change.params,
                    "before": change.before.get(lang),
                    "after": change.after.get(lang),
                }
                for change in self.values
            ],
            "values_differing": self.differing,
            "combinations_compared": self.combinations,
        }


def _value_reason(change: ValueChange) -> Text:
    if change.choice is None:
        return Message(
            "the key at %(params)s: %(before)s → %(after)s",
            params=change.params,
            before=change.before,
            after=change.after,
        )
    return Message(
        "pitfall %(pitfall)s at %(params)s: %(before)s → %(after)s",
        pitfall=repr(change.choice),
        params=change.params,
        before=change.before,
        after=change.after,
    )


def structure_changes(old: Template, new: Template) -> list[Text]:
    """What differs between two forms of a template besides the values, read in this order:
    a difference here makes every value comparison moot."""
    found: list[Text] = []
    if old.kind != new.kind:
        found.append(Message("the kind changed (%(old)s → %(new)s)", old=old.kind, new=new.kind))
        return found
    if old.generator != new.generator:
        found.append(
            Message(
                "the card draws variants from generator %(new)s instead of %(old)s",
                old=old.generator,
                new=new.generator,
            )
        )
    if old.point != new.point:
        found.append(
            Message(
                "the template moved from exam point %(old)s to %(new)s",
                old=repr(old.point),
                new=repr(new.point),
            )
        )
    before = [(name, p.values) for name, p in old.params.items()]
    after = [(name, p.values) for name, p in new.params.items()]
    if before != after or old.allowed != new.allowed:
        found.append(
            Message(
                "the parameters, their values or their constraints changed (each seed draws others)"
            )
        )
    derived_before = [(d.name, d.formula.text) for d in old.derived]
    derived_after = [(d.name, d.formula.text) for d in new.derived]
    if derived_before != derived_after:
        found.append(Message("the derived parameters changed"))
    if old.choices != new.choices:
        found.append(
            Message(
                "the number of choices changed (%(old)s → %(new)s)",
                old=old.choices,
                new=new.choices,
            )
        )
    if old.unit != new.unit:
        found.append(Message("the unit changed (%(old)s → %(new)s)", old=old.unit, new=new.unit))
    if new.kind == "numeric" and old.precision != new.precision:
        found.append(
            Message(
                "the significant figures changed (%(old)s → %(new)s)",
                old=old.precision,
                new=new.precision,
            )
        )
    old_ids, new_ids = [p.id for p in old.pitfalls], [p.id for p in new.pitfalls]
    if old_ids != new_ids:
        gone = [i for i in old_ids if i not in new_ids]
        added = [i for i in new_ids if i not in old_ids]
        if gone:
            found.append(Message("pitfall(s) removed: %(ids)s", ids=", ".join(gone)))
        if added:
            found.append(Message("pitfall(s) added: %(ids)s", ids=", ".join(added)))
        if not gone and not added:
            found.append(Message("the pitfalls' order changed (each seed shows others)"))
    if new.kind == "statement" and not found:
        if old.answer_statement != new.answer_statement:
            found.append(
                Message(
                    "the key's statement changed: %(before)s → %(after)s",
                    before=_quoted(old.answer_statement),
                    after=_quoted(new.answer_statement),
                )
            )
        for a, b in zip(old.pitfalls, new.pitfalls, strict=True):
            if a.statement != b.statement:
                found.append(
                    Message(
                        "the statement of pitfall %(pitfall)s changed: %(before)s → %(after)s",
                        pitfall=repr(a.id),
                        before=_quoted(a.statement),
                        after=_quoted(b.statement),
                    )
                )
    return found


def _quoted(text: Text | None) -> Text:
    if text is None:
        return Text.verbatim("—")
    return Text(f"“{text.en}”", f"“{text.zh}”")


def combinations(template: Template) -> Iterator[dict[str, Fraction]]:
    """The combinations compared: the whole domain up to :data:`WHOLE_DOMAIN_LIMIT`, else the
    ones validation walks."""
    if template.domain_size() > WHOLE_DOMAIN_LIMIT:
        yield from parameter_combinations(template)
        return
    names = list(template.params)
    combos = (
        template.allowed
        if template.allowed is not None
        else itertools.product(*(template.params[n].values for n in names))
    )
    for combo in combos:
        yield template.complete(dict(zip(names, combo, strict=True)))


def compare_templates(old: Template, new: Template) -> Comparison:
    """Whether ``new`` asks what ``old`` asked (see the module's docstring), and if not, why."""
    structure = tuple(structure_changes(old, new))
    if structure or new.kind != "numeric":
        return Comparison(structure, (), 0, 0)
    shown: list[ValueChange] = []
    differing = compared = 0
    for values in combinations(new):
        compared += 1
        try:
            answer_before, pitfalls_before = candidates(old, values)
            answer_after, pitfalls_after = candidates(new, values)
        except FormulaError:  # a form validation refuses: nothing is proven
            problem = Message("a value cannot be computed at %(params)s", params=_show(new, values))
            return Comparison((problem,), tuple(shown), differing, compared)
        pairs = [(None, answer_before, answer_after)] + [
            (a.pitfall.id if a.pitfall else None, a, b)
            for a, b in zip(pitfalls_before, pitfalls_after, strict=True)
        ]
        for choice, a, b in pairs:
            if a.value == b.value:
                continue
            differing += 1
            if len(shown) < SHOWN_CHANGES:
                shown.append(ValueChange(choice, _show(new, values), a.text, b.text))
    return Comparison((), tuple(shown), differing, compared)


def _show(template: Template, values: dict[str, Fraction]) -> str:
    shown = named_values(template, values)
    return "{" + ", ".join(f"{k}={v}" for k, v in shown.items()) + "}"


def compare_cards(old: Card, new: Card) -> dict[str, Comparison]:
    """Every template of ``new`` that ``old`` has too, changed (content or generator), compared
    with its form in ``old``, by id in ``new``'s order."""
    found: dict[str, Comparison] = {}
    for template in new.templates():
        before = old.template(template.id)
        if before is None:
            continue
        a = find_template_document(old.document, template.id)
        b = find_template_document(new.document, template.id)
        same_body = a is not None and b is not None and body_hash(a[1]) == body_hash(b[1])
        if same_body and before.generator == template.generator and before.point == template.point:
            continue
        found[template.id] = compare_templates(before, template)
    return found
