"""What runs inside a formula sandbox's worker process: the loop that takes tasks under a CPU
limit, and the tasks themselves (:mod:`app.authoring.sandbox` is the pool that drives it).

Before every task the soft ``RLIMIT_CPU`` is set to the CPU time used so far plus ``cpu_limit_s``,
rounded up to whole seconds (the kernel counts whole seconds, so a task gets ``cpu_limit_s`` to
``cpu_limit_s + 1`` s), and ``SIGXCPU`` ends the task with a formula error; the worker then exits
and is replaced (the interrupted code may have left a cache half-written). The hard limit is the
worker's lifetime budget (``lifetime_cpu_s``): a worker nobody watches any more is killed by the
kernel, and one close to its budget retires and is replaced.

Tasks are module-level functions (the pool pickles them by name) that return their result or
raise; every failure is sent back as a reply, never raised in the caller.
"""

from __future__ import annotations

import math
import os
import signal
from dataclasses import dataclass
from fractions import Fraction
from multiprocessing.connection import Connection
from typing import Any

from app.domain.formulas import FormulaError, parse_formula, parse_number
from app.domain.messages import Message


@dataclass(frozen=True)
class FormulaCheck:
    """A formula that parses: the parameters it uses and, when values were given, its value."""

    text: str
    names: frozenset[str]
    value: Fraction | None = None


@dataclass(frozen=True)
class CardCheck:
    """Every problem of a card document (:class:`app.domain.authoring.CardProblem`)."""

    problems: tuple[Any, ...]
    publishable: bool


class _CpuLimit(Exception):
    """Raised in a worker by SIGXCPU: the task used its CPU seconds."""


# --- the worker -------------------------------------------------------------------------------


def _cpu_used() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _on_cpu_limit(signum: int, frame: object) -> None:
    raise _CpuLimit


def serve(conn: Connection, cpu_limit_s: int, lifetime_cpu_s: int) -> None:
    """A worker's loop: receive (function, args, CPU seconds or None for ``cpu_limit_s``), answer
    (kind, payload, retiring): ("ok", result) or a failure; ``retiring`` when the worker exits
    after this answer."""
    import resource

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    signal.signal(signal.SIGXCPU, _on_cpu_limit)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    lifetime = math.ceil(_cpu_used()) + lifetime_cpu_s
    if hard != resource.RLIM_INFINITY:
        lifetime = min(lifetime, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (lifetime, lifetime))
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        function, args, task_cpu_s = message
        used = _cpu_used()
        soft = min(math.ceil(used + (task_cpu_s or cpu_limit_s)), lifetime)
        _task_limit[:] = [task_cpu_s or cpu_limit_s, lifetime]
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, lifetime))
            try:
                reply: tuple[str, Any] = ("ok", function(*args))
            finally:
                resource.setrlimit(resource.RLIMIT_CPU, (lifetime, lifetime))
        except _CpuLimit:
            # The interrupted code may have left state half-written: retire.
            _send(conn, ("cpu", round(_cpu_used() - used, 3)), retiring=True)
            return
        except FormulaError as exc:
            reply = ("formula-error", (exc.message, exc.column))
        except Exception as exc:  # any other failure is reported, never raised in the caller
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            reply = ("error", f"{exc.__class__.__name__}: {first}"[:300])
        # Retire before the kernel's hard limit; the pool starts a fresh worker.
        retiring = _cpu_used() + max(cpu_limit_s, task_cpu_s or 0) + 1 >= lifetime
        if not _send(conn, reply, retiring=retiring) or retiring:
            return


def _send(conn: Connection, reply: tuple[str, Any], *, retiring: bool) -> bool:
    try:
        conn.send((*reply, retiring))
    except (OSError, ValueError, TypeError, AttributeError) as exc:  # a broken pipe, or an
        try:  # unpicklable result
            conn.send(("error", f"cannot send the result: {exc.__class__.__name__}", retiring))
        except OSError:
            return False
    return True


# --- tasks (run in the worker) ----------------------------------------------------------------


def check_formula_task(
    text: str,
    names: frozenset[str],
    definitions: tuple[tuple[str, str], ...],
    values: tuple[tuple[str, object], ...] | None,
) -> FormulaCheck:
    compiled = {}
    for name, definition in definitions:
        try:
            compiled[name] = parse_formula(definition, names, compiled)
        except FormulaError as exc:
            raise FormulaError(
                Message("card formula %(name)s: %(reason)s", name=repr(name), reason=exc.message)
            ) from None
    formula = parse_formula(text, names, compiled)
    value = None
    if values is not None:
        numbers = {name: parse_number(number) for name, number in values}
        value = formula.evaluate(numbers)
    return FormulaCheck(text=text, names=formula.names, value=value)


def check_card_task(document: object) -> CardCheck:
    from app.domain.authoring import check_document

    checked = check_document(document)
    return CardCheck(problems=tuple(checked.problems), publishable=checked.publishable)


# --- card documents: compiled once per worker, validated one template per task ------------------

# The card documents this worker compiled last, by digest: a validation job sends every task the
# document, and each worker compiles it once for all the templates it validates.
_COMPILED: dict[str, Any] = {}
_COMPILED_KEPT = 2


# CPU seconds compiling a card document may use in a worker, apart from the task's own limit:
# a template's validation task that finds the document not yet compiled compiles it first.
COMPILE_CPU_S = 10
# The running task's CPU seconds and the worker's lifetime limit (set by serve).
_task_limit: list[int] = []


def _limit_cpu(seconds: int) -> None:
    """From now, the running task may use ``seconds`` more CPU seconds."""
    import resource

    if not _task_limit:  # not in a worker (a test calling a task directly)
        return
    lifetime = _task_limit[1]
    soft = min(math.ceil(_cpu_used() + seconds), lifetime)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, lifetime))


def compiled_document(digest: str, document: object) -> Any:
    """:func:`app.domain.authoring.compile_document` of ``document``, cached by ``digest``;
    compiling has its own CPU bound (``COMPILE_CPU_S``), after which the task's starts again."""
    from app.domain.authoring import compile_document

    found = _COMPILED.get(digest)
    if found is None:
        _limit_cpu(COMPILE_CPU_S)
        found = compile_document(document)
        while len(_COMPILED) >= _COMPILED_KEPT:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[digest] = found
        if _task_limit:
            _limit_cpu(_task_limit[0])
    return found


@dataclass(frozen=True)
class DocumentCompiled:
    """A card document compiled in a worker: its shape and compilation problems, the templates
    left to validate, and its warnings (none when it did not compile)."""

    problems: tuple[Any, ...]
    to_validate: tuple[str, ...]
    warnings: tuple[Any, ...]
    compiled: bool
    not_compiled: int = 0  # templates that did not compile (each has its problem)


def compile_document_task(digest: str, document: object) -> DocumentCompiled:
    from app.domain.authoring import warnings

    compiled = compiled_document(digest, document)
    if compiled.card is None:
        return DocumentCompiled(compiled.problems, (), (), False)
    return DocumentCompiled(
        compiled.problems,
        compiled.to_validate,
        tuple(warnings(compiled.card)),
        True,
        compiled.not_compiled,
    )


def validate_template_task(digest: str, document: object, template_id: str) -> tuple[Any, ...]:
    """The problems of one template of the document, validated over its whole domain."""
    from app.domain.authoring import template_problems

    compiled = compiled_document(digest, document)
    if compiled.card is None:
        return ()
    return tuple(template_problems(compiled.card, template_id))


# The card formulas of the draft last checked in this worker (the editor checks formula after
# formula against the same ones).
_DEFINITIONS: dict[str, Any] = {}


def draft_formula_task(
    text: str,
    names: frozenset[str],
    card_params: tuple[str, ...],
    card_formulas: tuple[object, ...],
) -> FormulaCheck:
    """One formula as the editor types it, with the draft's card formulas (compiled here too;
    when they do not compile, the card page reports it and the formula is checked without)."""
    from app.domain.cards import CardError, card_definitions

    key = repr((card_params, card_formulas))
    definitions = _DEFINITIONS.get(key)
    if definitions is None:
        try:
            definitions = card_definitions(
                {"params": list(card_params), "formulas": list(card_formulas)}
            )
        except CardError:
            definitions = {}
        _DEFINITIONS.clear()  # the draft being edited: one entry
        _DEFINITIONS[key] = definitions
    formula = parse_formula(text, names, definitions)
    return FormulaCheck(text=text, names=formula.names)


def card_formulas_task(card_params: tuple[str, ...], card_formulas: tuple[object, ...]) -> Any:
    """The first problem of a card's own parameters and named formulas, as a draft's validation
    reports it (field and column), or None when they compile."""
    from app.domain.authoring import CardProblem
    from app.domain.cards import CardError, card_definitions

    try:
        card_definitions({"params": list(card_params), "formulas": list(card_formulas)})
    except CardError as exc:
        return CardProblem("error", None, exc.field, exc.text, exc.position, exc.reason)
    return None


def preview_task(
    digest: str,
    document: object,
    template_id: str,
    seed: int | None,
    params: tuple[tuple[str, str], ...] | None,
) -> Any:
    """A variant of the document as learners would see it (:mod:`app.authoring.preview`)."""
    from app.authoring.preview import make_preview

    return make_preview(compiled_document(digest, document), template_id, seed, params)


def compare_task(digest: str, document: object, published: object) -> Any:
    """The document's changed templates compared with the published version's, value for value
    (:func:`app.domain.versions.compare_cards`); None when either does not compile."""
    from app.domain.cards import CardError, parse_card
    from app.domain.versions import compare_cards

    compiled = compiled_document(digest, document)
    if compiled.card is None:
        return None
    try:
        old = parse_card(published)
    except CardError:
        return None
    return compare_cards(old, compiled.card)
