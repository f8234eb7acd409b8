"""Safe formula parsing and exact evaluation.

Formulas come from card files written by instructors, so they are untrusted text. They are parsed
with :mod:`ast` against a whitelist and the sympy tree is built node by node here; no text ever
reaches ``sympify``, ``parse_expr``, ``eval`` or ``lambdify`` (all of which execute code).

Bounds keep a hostile formula from stalling the process (see "Safety of formulas" in the README):
the text (500 plain ASCII characters), its AST (200 nodes, 24 levels), every decimal literal's
exponent, the power each parameter is raised to once sympy-style folding multiplies nested
powers out, and the exact size of every intermediate value (numerator and denominator at most
:data:`MAX_BITS` bits each, a power estimated before it is computed), at parse time for constant
subformulas and at every evaluation. sympy only holds the tree (built unevaluated, so it computes
nothing); values are computed by closures over :class:`~fractions.Fraction`, and irrational ones
(``sqrt``, ``log``, fractional powers) as certified intervals (mpmath's low-level functions) that
are narrowed until the key's 30 digits, a ``ceil`` or a comparison is decided. Every failure is a
:class:`FormulaError` whose one-line message names the column and the reason. To bound CPU time as
well, :mod:`app.authoring.sandbox` evaluates formulas typed by instructors in worker processes.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeAlias

import sympy
from mpmath.libmp import (  # type: ignore[import-untyped]
    from_rational,
    fzero,
    mpf_abs,
    mpf_add,
    mpf_div,
    mpf_exp,
    mpf_le,
    mpf_log,
    mpf_lt,
    mpf_mul,
    mpf_neg,
    mpf_shift,
    mpf_sign,
    mpf_sqrt,
    mpf_sub,
    round_ceiling,
    round_floor,
    to_int,
    to_rational,
)
from mpmath.libmp.libmpi import mpi_pow_int  # type: ignore[import-untyped]

from .bilingual import Text
from .messages import Message, plural_message

MAX_LENGTH = 500
MAX_NODES = 200
MAX_DEPTH = 24
# Brackets, counted before Python's parser sees the text (it gives up at 200, and with a
# MemoryError on some deeply nested broken texts); redundant ones do not count towards MAX_DEPTH.
MAX_BRACKETS = 100
# Largest size, in bits, of the numerator and of the denominator of every exact value a formula
# computes: about 1233 decimal digits (10**1233 fits, 10**1234 not). Arithmetic on such numbers
# takes microseconds, and they still print (Python refuses str() of ints over 4300 digits).
MAX_BITS = 4096
# Largest decimal exponent a literal or parameter value may write (1e1233), checked before the
# power of ten is computed.
MAX_DECIMAL_EXPONENT = 1233
# Largest exponent applied to an expression that contains parameters, and the largest power any
# parameter reaches once nested powers and products multiply out: (psi**4)**4 is psi**16,
# (psi**16)**2 is refused, as is psi**16 * psi.
MAX_SYMBOLIC_EXPONENT = 16
# Bounds once card formulas (definitions) are substituted, so that chains of definitions that
# use each other many times cannot grow the work without limit.
MAX_EXPANDED_NODES = 2000
MAX_EXPANDED_DEPTH = 100
# Logarithms and fractional powers (each an exp and a log of an interval, the costly operations
# at the finest precision), once card formulas are substituted.
MAX_TRANSCENDENTAL = 32
# Bits of the interval bounds of irrational values, finest last: 2048 bits decide
# ceil(sqrt(10**400 + 1)) exactly; what the finest cannot decide is a formula error.
PRECISIONS = (128, 512, 2048)

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,31}")
# Formulas are plain printable ASCII (a line feed allowed, for a long formula written over lines):
# no lookalike letters that Python would fold into names (NFKC turns a full-width "ｐｓｉ" into
# psi), no other control character (a tab or a carriage return included), no backslash (escapes
# and line continuations have no place in a formula).
_NOT_ALLOWED = re.compile(r"[^\x20-\x5b\x5d-\x7e\n]")
# A number running into a name ("1if", "2psi", "0x1f"): Python's tokenizer warns about it on
# stderr (a SyntaxWarning, for every hostile text), so it is refused before ast sees it. Escape
# sequences, the other source of tokenizer warnings, cannot occur: backslashes are refused.
_RUN_ON = re.compile(
    r"(?<![A-Za-z0-9_.])(?>(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?[jJ]?)"
    r"(?=[A-Za-z_])"
)
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
_RATIO = re.compile(r"([+-]?)(\d+)/(\d+)")


class pow2ceil(sympy.Function):  # type: ignore[misc]  # noqa: N801 (named as formulas spell it)
    """The smallest power of two at or above a positive number: pow2ceil(14) = 16, pow2ceil(16) = 16.

    Exponents may not depend on parameters (that is how a formula could ask for an unbounded
    power), so "round up to a power of two" is a function of its own, evaluated on integers.
    """

    @classmethod
    def eval(cls, x: Any) -> Any:
        if x.is_Rational:
            if x <= 0:
                return sympy.nan  # reported as an undefined value
            whole = int(sympy.ceiling(x))
            return sympy.Integer(1 << (whole - 1).bit_length())
        return None


FUNCTIONS: dict[str, tuple[Callable[..., sympy.Expr], int, int]] = {
    # name: (sympy constructor, min args, max args)
    "ceil": (sympy.ceiling, 1, 1),
    "floor": (sympy.floor, 1, 1),
    "min": (sympy.Min, 2, 8),
    "max": (sympy.Max, 2, 8),
    "sqrt": (sympy.sqrt, 1, 1),
    "log": (sympy.log, 1, 2),
    "abs": (sympy.Abs, 1, 1),
    "pow2ceil": (pow2ceil, 1, 1),
}

_BINARY: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
}

# sympy ships no type information, so its rationals are typed as Any.
Number: TypeAlias = int | Fraction | Any


class FormulaError(ValueError):
    """A formula that cannot be parsed or evaluated; the message names position and reason.

    ``reason`` is the English reason (``str(exc)`` adds the column and the formula), ``message``
    the reason in every language and :attr:`localized` the whole message in every language.
    """

    def __init__(
        self, reason: str | Text, *, text: str | None = None, column: int | None = None
    ) -> None:
        self.message = reason if isinstance(reason, Text) else Text.verbatim(reason)
        self.reason = self.message.en
        self.column = column
        self.shown = text if text is not None and len(text) <= 80 else None
        where = f" at column {column}" if column is not None else ""
        shown = f" in {self.shown!r}" if self.shown is not None else ""
        super().__init__(f"{self.reason}{where}{shown}")

    @property
    def localized(self) -> Text:
        """The reason with its column and formula, in every language."""
        if self.column is not None and self.shown is not None:
            return Message(
                "%(reason)s at column %(column)s in %(formula)s",
                reason=self.message,
                column=self.column,
                formula=repr(self.shown),
            )
        if self.column is not None:
            return Message(
                "%(reason)s at column %(column)s", reason=self.message, column=self.column
            )
        if self.shown is not None:
            return Message(
                "%(reason)s in %(formula)s", reason=self.message, formula=repr(self.shown)
            )
        return self.message


_NEVER_CLOSED = re.compile(r"^'(.)' was never closed$")
_UNMATCHED = re.compile(r"^unmatched '(.)'$")


def syntax_reason(detail: str) -> Text:
    """Python's parser's message for a formula, in every language: the common ones worded for
    people (an unclosed bracket, a stray one, a bad number); any other quoted as it is."""
    if found := _NEVER_CLOSED.match(detail):
        return Message("syntax error: %(bracket)s is never closed", bracket=repr(found.group(1)))
    if found := _UNMATCHED.match(detail):
        return Message("syntax error: %(bracket)s closes nothing", bracket=repr(found.group(1)))
    if detail == "invalid syntax":
        return Message("syntax error: this cannot be read as a formula")
    if detail.startswith("invalid decimal literal") or detail.startswith("invalid digit"):
        return Message("syntax error: a number is written wrongly")
    if detail.startswith("unterminated string literal"):
        return Message("syntax error: quotes have no place in a formula")
    return Message("syntax error: %(detail)s", detail=detail)


def is_identifier(name: str) -> bool:
    return _IDENTIFIER.fullmatch(name) is not None


@dataclass(frozen=True)
class Formula:
    """A parsed formula: its source text, the sympy expression and the parameters it uses."""

    text: str
    expr: sympy.Expr
    names: frozenset[str] = field(default_factory=frozenset)
    # The bounded evaluator parse_formula compiled (None for a Formula built by hand).
    program: _Program | None = field(default=None, compare=False, repr=False)
    # The same expression as a closure over exact Fractions (no sympy per evaluation), when every
    # node is rational arithmetic or one of the whitelisted functions; None otherwise (sqrt, log).
    rational: Callable[[Mapping[str, Fraction]], Fraction] | None = field(
        default=None, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.rational is None:
            object.__setattr__(self, "rational", _compile_rational(self.expr))

    def evaluate(self, values: Mapping[str, Number]) -> Fraction:
        """The exact value for these parameters (a decimal approximation to 30 digits when the
        result is irrational, e.g. after ``sqrt``)."""
        return evaluate(self, values)


@dataclass(frozen=True, eq=False)
class Constraint:
    """``value`` is a whole number (``integer``) and lies within ``at_least``..``at_most``."""

    value: Formula
    integer: bool = False
    at_least: Formula | None = None
    at_most: Formula | None = None

    def holds(self, values: Mapping[str, Fraction]) -> bool:
        x = self.value.evaluate(values)
        if self.integer and x.denominator != 1:
            return False
        if self.at_least is not None and x < self.at_least.evaluate(values):
            return False
        return self.at_most is None or x <= self.at_most.evaluate(values)


def decimal_to_fraction(text: str) -> Fraction:
    """Exact value of a decimal literal such as ``1.3e9``, ``70_000`` or ``3/8``, refused (a
    :class:`FormulaError`) before anything is computed when its exponent is over
    :data:`MAX_DECIMAL_EXPONENT`, and when its value needs more than :data:`MAX_BITS` bits."""
    shown = repr(text) if len(text) <= 40 else repr(text[:37] + "...")
    cleaned = text.replace("_", "").strip()
    if len(cleaned) > MAX_LENGTH:
        raise FormulaError(
            Message(
                "%(value)s is not a number (over %(limit)s characters)",
                value=shown,
                limit=MAX_LENGTH,
            )
        )
    ratio = _RATIO.fullmatch(cleaned)
    decimal = None if ratio else _DECIMAL.fullmatch(cleaned)
    if ratio:
        if int(ratio[3]) == 0:
            raise FormulaError(Message("%(value)s is not a number (division by zero)", value=shown))
        value = Fraction(int(ratio[2]), int(ratio[3]))
        sign = ratio[1]
    elif decimal and (decimal[2] or decimal[3]):
        exponent = int(decimal[4] or 0)
        if abs(exponent) > MAX_DECIMAL_EXPONENT:
            written = decimal[4] if len(decimal[4]) <= 12 else f"{decimal[4][:9]}..."
            if exponent > 0:
                reason = Message(
                    "decimal exponent %(exponent)s is too large (limit %(limit)s)",
                    exponent=written,
                    limit=MAX_DECIMAL_EXPONENT,
                )
            else:
                reason = Message(
                    "decimal exponent %(exponent)s is too small (limit -%(limit)s)",
                    exponent=written,
                    limit=MAX_DECIMAL_EXPONENT,
                )
            raise FormulaError(reason)
        fraction = decimal[3] or ""
        digits = int((decimal[2] or "") + fraction or "0")
        scale = exponent - len(fraction)
        value = Fraction(digits * 10**scale) if scale >= 0 else Fraction(digits, 10**-scale)
        sign = decimal[1]
    else:
        raise FormulaError(Message("%(value)s is not a number", value=shown))
    try:
        return _exact(-value if sign == "-" else value, None)
    except _Failure as exc:
        raise FormulaError(
            Message("%(value)s: %(reason)s", value=shown, reason=exc.message)
        ) from None


def parse_number(value: object) -> Fraction:
    """A parameter value from a card file: an int, a decimal string, or a float read by YAML."""
    if isinstance(value, bool):
        raise FormulaError(Message("%(value)s is not a number", value=repr(value)))
    if isinstance(value, int):
        try:
            return _exact(Fraction(value), None)
        except _Failure as exc:
            raise FormulaError(exc.message) from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FormulaError(Message("%(value)s is not a finite number", value=repr(value)))
        # repr gives the shortest decimal that reads back as this float: 1.3e9 stays 1.3e9.
        return decimal_to_fraction(repr(value))
    if isinstance(value, str):
        return decimal_to_fraction(value)
    raise FormulaError(Message("%(value)s is not a number", value=repr(value)))


def parse_formula(
    text: str,
    names: Collection[str],
    definitions: Mapping[str, Formula] | None = None,
) -> Formula:
    """Parse ``text`` into a :class:`Formula`.

    ``names`` are the parameters the formula may use; ``definitions`` are named formulas it may
    refer to (they are substituted). Anything outside the whitelist raises :class:`FormulaError`.
    """
    if not isinstance(text, str):
        raise FormulaError(Message("a formula must be text"))
    if len(text) > MAX_LENGTH:
        raise FormulaError(
            Message(
                "formula is %(length)s characters long; the limit is %(limit)s",
                length=len(text),
                limit=MAX_LENGTH,
            ),
            column=MAX_LENGTH + 1,
        )
    bad = _NOT_ALLOWED.search(text)
    if bad:
        character = bad.group()
        raise FormulaError(
            Message(
                "character %(character)s (U+%(code)s) is not allowed: formulas are plain ASCII "
                "letters, digits and operators",
                character=repr(character),
                code=f"{ord(character):04X}",
            ),
            text=text,
            column=bad.start() + 1,
        )
    run_on = _RUN_ON.search(text)
    if run_on:
        raise FormulaError(
            Message("a number runs into a name (write a space or an operator between them)"),
            text=text,
            column=run_on.end() + 1,
        )
    depth = 0
    for index, character in enumerate(text):
        if character in "([{":
            depth += 1
            if depth > MAX_BRACKETS:
                raise FormulaError(
                    Message("brackets are nested deeper than %(limit)s levels", limit=MAX_BRACKETS),
                    text=text,
                    column=index + 1,
                )
        elif character in ")]}":
            depth -= 1
    stripped = text.strip()
    if not stripped:
        raise FormulaError(Message("formula is empty"), column=1)
    # The definitions are read, never copied: a card's formulas and placeholders each parse
    # against the same mapping, so compiling a card is linear in its formulas.
    builder = _Builder(text, stripped, frozenset(names), definitions or {})
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as exc:
        message = " ".join(str(exc.msg).split())
        column = None
        if exc.lineno is not None and exc.offset is not None:
            line = min(max(exc.lineno, 1), len(builder.starts))
            column = builder.lead + builder.starts[line - 1] + max(exc.offset, 1)
        raise FormulaError(syntax_reason(message), text=text, column=column) from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise FormulaError(
            Message("cannot parse: %(error)s", error=exc.__class__.__name__), text=text, column=1
        ) from None
    try:
        node = builder.build(tree.body, depth=1)
    except RecursionError:  # not expected under MAX_DEPTH; still a formula error
        raise FormulaError(Message("formula is nested too deeply"), text=text, column=1) from None
    program = _Program(
        root=node.run,
        column=node.column,
        names=frozenset(builder.used),
        first=dict(builder.first),
        degree=node.degree,
        size=node.size,
        depth=node.depth,
        constant=node.value,
        heavy=node.heavy,
    )
    if node.constant and node.value is None:  # an irrational constant: its 30 digits must exist
        program.run(text, {})
    return Formula(text=text, expr=node.expr, names=frozenset(builder.used), program=program)


@dataclass(frozen=True, eq=False)
class _Node:
    """A subformula as parsed: its closure, its sympy form and what bounds it."""

    run: _Eval
    expr: sympy.Expr
    column: int | None
    degree: Mapping[str, Fraction]  # the power each parameter is raised to, at most
    size: int  # nodes, card formulas substituted
    depth: int  # nesting, card formulas substituted
    constant: bool  # no parameters
    value: Fraction | None = None  # the exact value of a constant, None when irrational
    heavy: int = 0  # logarithms and fractional powers, card formulas substituted


_NO_DEGREE: Mapping[str, Fraction] = {}


class _Builder:
    def __init__(
        self,
        text: str,
        stripped: str,
        names: frozenset[str],
        definitions: Mapping[str, Formula],
    ):
        self.text = text
        self.stripped = stripped
        self.lead = len(text) - len(text.lstrip())
        self.starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", stripped)]
        self.names = names
        self.definitions = definitions
        self.nodes = 0
        self.used: set[str] = set()
        self.first: dict[str, int | None] = {}

    def column(self, node: ast.AST) -> int | None:
        """1-based position in the formula's text (formulas are ASCII, so ast's byte offsets
        are character offsets)."""
        line: int | None = getattr(node, "lineno", None)
        offset: int | None = getattr(node, "col_offset", None)
        if line is None or offset is None or not 1 <= line <= len(self.starts):
            return None
        return self.lead + self.starts[line - 1] + offset + 1

    def operator_column(self, node: ast.BinOp) -> int | None:
        """The column of a binary node's operator (``**`` in ``psi**16``), not of its left side."""
        left, right = self.column(node.left), self.column(node.right)
        end = getattr(node.left, "end_col_offset", None)
        end_line = getattr(node.left, "end_lineno", None)
        if left is None or right is None or end is None or end_line is None:
            return self.column(node)
        start = self.starts[end_line - 1] + end if 1 <= end_line <= len(self.starts) else None
        if start is None:
            return self.column(node)
        symbol = _BINARY[type(node.op)]
        found = self.stripped.find(symbol, start, right - self.lead - 1)
        return self.column(node) if found < 0 else self.lead + found + 1

    def segment(self, node: ast.expr) -> str | None:
        """The node's source text (ast.get_source_segment splits the whole text every time)."""
        end_line, end = node.end_lineno, node.end_col_offset
        if end_line is None or end is None or not 1 <= node.lineno <= end_line <= len(self.starts):
            return None
        start = self.starts[node.lineno - 1] + node.col_offset
        return self.stripped[start : self.starts[end_line - 1] + end]

    def fail(self, reason: str | Text, column: int | None) -> FormulaError:
        return FormulaError(reason, text=self.text, column=column)

    def build(self, node: ast.AST, depth: int) -> _Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(
                Message("formula has more than %(limit)s elements", limit=MAX_NODES),
                self.column(node),
            )
        if depth > MAX_DEPTH:
            raise self.fail(
                Message("formula is nested deeper than %(limit)s levels", limit=MAX_DEPTH),
                self.column(node),
            )

        if isinstance(node, ast.Constant):
            return self.constant(node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.build(node.operand, depth + 1)
            if isinstance(node.op, ast.UAdd):
                return operand
            return self.combine(
                lambda v, run, column: _negate(v),
                [operand],
                self.column(node),
                sympy.Mul(sympy.Integer(-1), operand.expr, evaluate=False),
            )
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left = self.build(node.left, depth + 1)
            right = self.build(node.right, depth + 1)
            return self.binary(node, left, right)
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        raise self.fail(_not_allowed(node), self.column(node))

    def constant(self, node: ast.Constant) -> _Node:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(_not_allowed(node), self.column(node))
        source = self.segment(node) or repr(value)
        try:
            exact = decimal_to_fraction(source)
        except FormulaError as exc:
            raise self.fail(exc.message, self.column(node)) from None
        return self.leaf(exact, self.column(node))

    def leaf(self, exact: Fraction, column: int | None) -> _Node:
        return _Node(
            run=_constant(exact),
            expr=sympy.Rational(exact.numerator, exact.denominator),
            column=column,
            degree=_NO_DEGREE,
            size=1,
            depth=1,
            constant=True,
            value=exact,
        )

    def name(self, node: ast.Name) -> _Node:
        name = node.id
        column = self.column(node)
        if not is_identifier(name):
            raise self.fail(
                Message(
                    "name %(name)s is not allowed (lower-case letters, digits, _)",
                    name=repr(name),
                ),
                column,
            )
        if name in self.names:
            self.used.add(name)
            self.first.setdefault(name, column)

            def parameter(env: Mapping[str, Fraction], run: _Run) -> Value:
                return env[name]

            return _Node(parameter, sympy.Symbol(name), column, {name: Fraction(1)}, 1, 1, False)
        if name in self.definitions:
            return self.reference(name, self.definitions[name], column)
        if name in FUNCTIONS:
            raise self.fail(Message("function %(name)s must be called", name=repr(name)), column)
        allowed = ", ".join(sorted(self.names | set(self.definitions)))
        if not allowed:
            raise self.fail(
                Message("unknown name %(name)s (no names are allowed here)", name=repr(name)),
                column,
            )
        raise self.fail(
            Message(
                "unknown name %(name)s (allowed: %(allowed)s)", name=repr(name), allowed=allowed
            ),
            column,
        )

    def reference(self, name: str, formula: Formula, column: int | None) -> _Node:
        """A card formula used by name: its compiled program, with errors located here."""
        program = formula.program
        if program is None:  # a Formula built by hand: compile its text
            try:
                program = parse_formula(formula.text, formula.names).program
            except FormulaError as exc:
                raise self.fail(
                    Message(
                        "card formula %(name)s: %(reason)s", name=repr(name), reason=exc.message
                    ),
                    column,
                ) from None
            assert program is not None
        self.used.update(program.names)
        for used in program.names:
            self.first.setdefault(used, column)
        if program.constant is not None:
            return self.leaf(program.constant, column)
        inner = program.root

        def reference(env: Mapping[str, Fraction], run: _Run) -> Value:
            try:
                return inner(env, run)
            except _Failure as exc:
                if exc.column is not None:
                    reason = Message(
                        "%(reason)s (in %(name)s at its column %(column)s)",
                        reason=exc.message,
                        name=repr(name),
                        column=exc.column,
                    )
                else:
                    reason = Message(
                        "%(reason)s (in %(name)s)", reason=exc.message, name=repr(name)
                    )
                raise _Failure(reason, column) from None

        node = _Node(
            reference,
            formula.expr,
            column,
            program.degree,
            program.size,
            program.depth,
            not program.names,
            heavy=program.heavy,
        )
        self.bounded(node)
        return node

    def combine(
        self,
        operation: Callable[..., Value],
        children: Sequence[_Node],
        column: int | None,
        expr: sympy.Expr,
        degree: Mapping[str, Fraction] | None = None,
        variadic: bool = False,
        heavy: int = 0,
    ) -> _Node:
        """A node applying ``operation(*values, run, column)`` to its children's values
        (``operation(values, run, column)`` when ``variadic``); a node without parameters is
        computed now, so that its errors are found when the formula is parsed."""
        runs = [child.run for child in children]
        if variadic:

            def apply(env: Mapping[str, Fraction], run: _Run) -> Value:
                return operation([part(env, run) for part in runs], run, column)

        elif len(runs) == 1:
            (only,) = runs

            def apply(env: Mapping[str, Fraction], run: _Run) -> Value:
                return operation(only(env, run), run, column)

        elif len(runs) == 2:
            first, second = runs

            def apply(env: Mapping[str, Fraction], run: _Run) -> Value:
                return operation(first(env, run), second(env, run), run, column)

        else:
            raise AssertionError("three or more children are variadic")

        if degree is None:
            degree = _merge([child.degree for child in children], max)
        node = _Node(
            apply,
            expr,
            column,
            degree,
            1 + sum(child.size for child in children),
            1 + max(child.depth for child in children),
            all(child.constant for child in children),
            heavy=heavy + sum(child.heavy for child in children),
        )
        self.bounded(node)
        if not node.constant:
            return node
        try:
            value, folded = _fold(apply)
        except _Failure as exc:
            raise self.fail(exc.message, exc.column) from None
        if value is not None:
            return self.leaf(value, column)
        return _Node(
            folded, expr, column, _NO_DEGREE, node.size, node.depth, True, heavy=node.heavy
        )

    def bounded(self, node: _Node) -> None:
        for name, power in node.degree.items():
            if power > MAX_SYMBOLIC_EXPONENT:
                raise self.fail(
                    Message(
                        "%(name)s is raised to the power %(power)s here (nested powers and "
                        "products multiply out; limit %(limit)s)",
                        name=name,
                        power=power,
                        limit=MAX_SYMBOLIC_EXPONENT,
                    ),
                    node.column,
                )
        if node.size > MAX_EXPANDED_NODES:
            raise self.fail(
                Message(
                    "formula has more than %(limit)s elements once card formulas are substituted",
                    limit=MAX_EXPANDED_NODES,
                ),
                node.column,
            )
        if node.heavy > MAX_TRANSCENDENTAL:
            raise self.fail(
                Message(
                    "formula has more than %(limit)s logarithms and fractional powers once card "
                    "formulas are substituted",
                    limit=MAX_TRANSCENDENTAL,
                ),
                node.column,
            )
        if node.depth > MAX_EXPANDED_DEPTH:
            raise self.fail(
                Message(
                    "formula is nested deeper than %(limit)s levels once card formulas are "
                    "substituted",
                    limit=MAX_EXPANDED_DEPTH,
                ),
                node.column,
            )

    def binary(self, node: ast.BinOp, left: _Node, right: _Node) -> _Node:
        op = type(node.op)
        column = self.operator_column(node)
        a, b = left.expr, right.expr
        if op is ast.Add:
            return self.combine(_add, [left, right], column, sympy.Add(a, b, evaluate=False))
        if op is ast.Sub:
            negated = sympy.Mul(sympy.Integer(-1), b, evaluate=False)
            return self.combine(
                lambda x, y, run, col: _add(x, _negate(y), run, col),
                [left, right],
                column,
                sympy.Add(a, negated, evaluate=False),
            )
        summed = _merge([left.degree, right.degree], operator.add)
        if op is ast.Mult:
            expr = sympy.Mul(a, b, evaluate=False)
            return self.combine(_multiply, [left, right], column, expr, summed)
        if op is ast.Div:
            if right.value == 0:
                raise self.fail(_ZERO_DIVISION, column)
            expr = sympy.Mul(a, sympy.Pow(b, sympy.Integer(-1), evaluate=False), evaluate=False)
            return self.combine(
                lambda x, y, run, col: _divide(x, y, run, col, _ZERO_DIVISION),
                [left, right],
                column,
                expr,
                summed,
            )
        return self.power(column, left, right)

    def power(self, column: int | None, base: _Node, exponent: _Node) -> _Node:
        if not exponent.constant:
            raise self.fail(
                Message("an exponent must be a number, not depend on parameters"), column
            )
        if exponent.value is None:
            raise self.fail(Message("an exponent must be a rational number"), column)
        r = exponent.value
        if not base.constant and abs(r) > MAX_SYMBOLIC_EXPONENT:
            raise self.fail(
                Message(
                    "exponent %(exponent)s is too large (limit %(limit)s)",
                    exponent=_show(r),
                    limit=MAX_SYMBOLIC_EXPONENT,
                ),
                column,
            )
        degree = {name: power * abs(r) for name, power in base.degree.items()}
        return self.combine(
            lambda x, run, col: _power(x, r, run, col),
            [base],
            column,
            sympy.Pow(base.expr, exponent.expr, evaluate=False),
            degree,
            heavy=int(r.denominator != 1 or abs(r) > _SMALL_POWER),
        )

    def call(self, node: ast.Call, depth: int) -> _Node:
        column = self.column(node)
        if not isinstance(node.func, ast.Name):
            raise self.fail(Message("%(what)s cannot be called", what=_describe(node.func)), column)
        name = node.func.id
        if name not in FUNCTIONS:
            allowed = ", ".join(FUNCTIONS)
            raise self.fail(
                Message(
                    "function %(name)s is not allowed (allowed: %(allowed)s)",
                    name=repr(name),
                    allowed=allowed,
                ),
                column,
            )
        if node.keywords:
            raise self.fail(Message("keyword arguments are not allowed"), column)
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            raise self.fail(Message("starred arguments are not allowed"), column)
        constructor, low, high = FUNCTIONS[name]
        if not low <= len(node.args) <= high:
            count = len(node.args)
            takes = (
                plural_message(
                    "%(name)s() takes %(num)s argument, got %(count)s",
                    "%(name)s() takes %(num)s arguments, got %(count)s",
                    low,
                    name=name,
                    count=count,
                )
                if low == high
                else Message(
                    "%(name)s() takes %(low)s to %(high)s arguments, got %(count)s",
                    name=name,
                    low=low,
                    high=high,
                    count=count,
                )
            )
            raise self.fail(takes, column)
        args = [self.build(arg, depth + 1) for arg in node.args]
        exprs = [arg.expr for arg in args]
        if name in ("min", "max"):
            largest = name == "max"
            return self.combine(
                lambda values, run, col: _extreme(values, run, largest),
                args,
                column,
                constructor(*exprs, evaluate=False),
                variadic=True,
            )
        (x,) = args[:1]
        if name == "sqrt":
            half = {n: p / 2 for n, p in x.degree.items()}
            expr = sympy.Pow(x.expr, sympy.Rational(1, 2), evaluate=False)
            return self.combine(_square_root, [x], column, expr, half)
        if name == "log":
            if len(args) == 1:
                expr = sympy.log(x.expr, evaluate=False)
                return self.combine(
                    lambda v, run, col: _logarithm(v, None, run, (col, None)),
                    [x],
                    column,
                    expr,
                    _NO_DEGREE,
                    heavy=1,
                )
            base = args[1]
            if base.value is not None and (base.value <= 0 or base.value == 1):
                shown = _show(base.value)
                reason = (
                    _LOG_BASE_ONE
                    if base.value == 1
                    else Message(
                        "log base %(base)s is undefined (the base must be positive)", base=shown
                    )
                )
                raise self.fail(reason, base.column)
            expr = sympy.Mul(
                sympy.log(x.expr, evaluate=False),
                sympy.Pow(sympy.log(base.expr, evaluate=False), -1, evaluate=False),
                evaluate=False,
            )
            columns = (column, base.column)
            return self.combine(
                lambda v, b, run, col: _logarithm(v, b, run, columns),
                [x, base],
                column,
                expr,
                _NO_DEGREE,
                heavy=2,
            )
        expr = constructor(x.expr, evaluate=False)
        if name == "ceil" or name == "floor":
            up = name == "ceil"
            return self.combine(lambda v, run, col: _rounded(v, run, col, up), [x], column, expr)
        if name == "abs":
            return self.combine(lambda v, run, col: _absolute(v), [x], column, expr)
        assert name == "pow2ceil"
        return self.combine(_power_of_two, [x], column, expr)


def _merge(
    degrees: Sequence[Mapping[str, Fraction]], how: Callable[[Fraction, Fraction], Fraction]
) -> Mapping[str, Fraction]:
    merged: dict[str, Fraction] = {}
    for degree in degrees:
        for name, power in degree.items():
            merged[name] = how(merged[name], power) if name in merged else power
    return merged


_DESCRIPTIONS: dict[type[ast.AST], Text] = {
    ast.Attribute: Message("attribute access"),
    ast.Subscript: Message("subscript"),
    ast.Lambda: Message("lambda"),
    ast.ListComp: Message("comprehension"),
    ast.GeneratorExp: Message("comprehension"),
    ast.SetComp: Message("comprehension"),
    ast.DictComp: Message("comprehension"),
    ast.Compare: Message("comparison"),
    ast.BoolOp: Message("boolean operator"),
    ast.IfExp: Message("conditional expression"),
    ast.NamedExpr: Message("assignment"),
    ast.List: Message("list"),
    ast.Tuple: Message("tuple"),
    ast.Dict: Message("dict"),
    ast.Set: Message("set"),
    ast.JoinedStr: Message("f-string"),
    ast.Await: Message("await"),
    ast.Yield: Message("yield"),
    ast.Starred: Message("starred expression"),
}


_CONSTANTS: dict[str, Text] = {
    "str": Message("string"),
    "bytes": Message("bytes"),
    "bool": Message("boolean"),
}


def _describe(node: ast.AST) -> Text:
    """What a node is, as the messages about it name it."""
    if isinstance(node, ast.Constant):
        kind = type(node.value).__name__
        return _CONSTANTS.get(kind) or Message("%(kind)s constant", kind=kind)
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return Message("operator %(name)s", name=type(node.op).__name__)
    described = _DESCRIPTIONS.get(type(node))
    return described if described is not None else Text.verbatim(type(node).__name__)


def _not_allowed(node: ast.AST) -> Text:
    return Message("%(what)s is not allowed", what=_describe(node))


_UNDEFINED = Message("the value is undefined (division by zero?)")
_LOG_BASE_ONE = Message("log base 1 is undefined")


class _Undefined(ArithmeticError):
    """A rational evaluation met a value sympy calls undefined (pow2ceil of a non-positive)."""


def _compile_rational(expr: sympy.Expr) -> Callable[[Mapping[str, Fraction]], Fraction] | None:
    """A closure computing ``expr`` exactly with Fractions, or None when some node is not plain
    rational arithmetic. It is built from the already-whitelisted sympy tree, never from text."""
    if expr.is_Rational:
        constant = Fraction(int(expr.p), int(expr.q))
        return lambda values: constant
    if expr.is_Symbol:
        name = str(expr)
        return lambda values: Fraction(values[name])
    args = [_compile_rational(arg) for arg in expr.args]
    if any(arg is None for arg in args):
        return None
    parts: list[Callable[[Mapping[str, Fraction]], Fraction]] = args  # type: ignore[assignment]
    if isinstance(expr, sympy.Add):

        def add(values: Mapping[str, Fraction]) -> Fraction:
            return sum((part(values) for part in parts), Fraction(0))

        return add
    if isinstance(expr, sympy.Mul):

        def mul(values: Mapping[str, Fraction]) -> Fraction:
            result = Fraction(1)
            for part in parts:
                result *= part(values)
            return result

        return mul
    if isinstance(expr, sympy.Pow):
        exponent = expr.args[1]
        if not exponent.is_Integer:
            return None
        base, power = parts[0], int(exponent)
        return lambda values: base(values) ** power
    if isinstance(expr, sympy.ceiling):
        inner = parts[0]
        return lambda values: Fraction(math.ceil(inner(values)))
    if isinstance(expr, sympy.floor):
        inner = parts[0]
        return lambda values: Fraction(math.floor(inner(values)))
    if isinstance(expr, sympy.Min):
        return lambda values: min(part(values) for part in parts)
    if isinstance(expr, sympy.Max):
        return lambda values: max(part(values) for part in parts)
    if isinstance(expr, sympy.Abs):
        inner = parts[0]
        return lambda values: abs(inner(values))
    if isinstance(expr, pow2ceil):
        inner = parts[0]

        def power_of_two(values: Mapping[str, Fraction]) -> Fraction:
            x = inner(values)
            if x <= 0:
                raise _Undefined
            return Fraction(1 << (math.ceil(x) - 1).bit_length())

        return power_of_two
    return None


def evaluate(formula: Formula, values: Mapping[str, Number]) -> Fraction:
    """Exact value of ``formula`` for the given parameter values."""
    missing = formula.names - set(values)
    if missing:
        raise FormulaError(
            Message("no value for %(names)s", names=", ".join(sorted(missing))), text=formula.text
        )
    if formula.program is not None:
        return formula.program.run(formula.text, values)
    if formula.rational is not None and all(
        isinstance(values[name], Fraction | int) and not isinstance(values[name], bool)
        for name in formula.names
    ):
        try:
            return formula.rational(values)  # type: ignore[arg-type]
        except (ZeroDivisionError, _Undefined):
            raise FormulaError(_UNDEFINED, text=formula.text) from None
    substitution = {sympy.Symbol(name): _to_rational(values[name]) for name in formula.names}
    result = formula.expr.xreplace(substitution)
    if result.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo) or not result.is_number:
        raise FormulaError(_UNDEFINED, text=formula.text)
    if result.is_Rational:
        return Fraction(int(result.p), int(result.q))
    if not result.is_real:
        raise FormulaError(Message("the value is not a real number"), text=formula.text)
    approx = sympy.N(result, 30)
    return Fraction(str(approx))


def _to_rational(value: Number) -> sympy.Rational:
    if isinstance(value, sympy.Rational):
        return value
    if isinstance(value, Fraction):
        return sympy.Rational(value.numerator, value.denominator)
    if isinstance(value, int) and not isinstance(value, bool):
        return sympy.Integer(value)
    raise FormulaError(Message("%(value)s is not an exact number", value=repr(value)))


# --- bounded evaluation -----------------------------------------------------------------------
#
# parse_formula compiles a formula into closures over exact Fractions; sympy computes nothing.
# Every intermediate is checked: an exact value has at most MAX_BITS bits in its numerator and in
# its denominator, and a power is estimated before it is computed. An irrational value (sqrt, log,
# a fractional power) is an interval [lo, hi] of binary floating-point bounds, computed with
# mpmath's low-level functions (explicit precision and rounding direction, no global state, so
# safe in threads). When a decision cannot be made at the current precision (a sign, a floor, a
# comparison, the 30 digits of the result) the whole evaluation is retried at the next precision
# of PRECISIONS; at the last one it is a formula error.


class _Failure(Exception):
    """A formula error found while evaluating a node; the caller adds the formula's text."""

    def __init__(self, reason: str | Text, column: int | None) -> None:
        self.message = reason if isinstance(reason, Text) else Text.verbatim(reason)
        self.reason = self.message.en
        super().__init__(self.reason)
        self.column = column


class _MorePrecision(Exception):
    """A decision needs a narrower interval: the evaluation is retried at the next precision."""


@dataclass(frozen=True)
class _Run:
    prec: int  # bits of the interval bounds
    last: bool  # no finer precision follows: an undecided question is a formula error


_RUNS = tuple(_Run(prec, i == len(PRECISIONS) - 1) for i, prec in enumerate(PRECISIONS))


class _Interval:
    """A real number known to lie in [lo, hi]; the bounds are mpmath mpf tuples."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: Any, hi: Any) -> None:
        self.lo = lo
        self.hi = hi


Value: TypeAlias = Fraction | _Interval
_Eval: TypeAlias = Callable[[Mapping[str, Fraction], _Run], Value]


def _show(value: Fraction | int) -> str | Text:
    """A short form of a possibly huge number, for messages."""
    value = Fraction(value)
    if max(value.numerator.bit_length(), value.denominator.bit_length()) <= 64:
        return str(value)
    if Fraction(1, 10**300) < abs(value) < 10**300:
        return Message("about %(value)s", value=f"{float(value):.4g}")
    bits = value.numerator.bit_length() - value.denominator.bit_length()
    return Message("about %(value)s", value=f"2**{bits}")


def _count(value: Fraction | int) -> str:
    """A count of bits for a message: 190000001, 1.329e+403."""
    if isinstance(value, int) and value.bit_length() <= 64:
        return str(value)
    size = abs(Fraction(value))  # typeshed types abs(int | Fraction) as an uncomparable _RealLike
    if size < 10**300:
        number = float(value)
        return str(round(number)) if abs(number) < 1e15 else f"{number:.4g}"
    return f"10**{len(str(int(value)).lstrip('-')) - 1}" if size < 10**4000 else "10**4000+"


def _exact(value: Fraction, column: int | None) -> Fraction:
    numerator, denominator = value.numerator.bit_length(), value.denominator.bit_length()
    if numerator > MAX_BITS:
        raise _Failure(
            Message(
                "value too large: %(bits)s bits (limit %(limit)s)", bits=numerator, limit=MAX_BITS
            ),
            column,
        )
    if denominator > MAX_BITS:
        raise _Failure(
            Message(
                "value too fine: a %(bits)s-bit denominator (limit %(limit)s bits)",
                bits=denominator,
                limit=MAX_BITS,
            ),
            column,
        )
    return value


def _undecided(run: _Run, reason: Text, column: int | None) -> None:
    if run.last:
        raise _Failure(reason, column)
    raise _MorePrecision


def _interval(value: Value, prec: int) -> _Interval:
    if isinstance(value, _Interval):
        return value
    p, q = value.numerator, value.denominator
    return _Interval(
        from_rational(p, q, prec, round_floor), from_rational(p, q, prec, round_ceiling)
    )


def _magnitude(bound: Any) -> int | None:
    """k with 2**(k-1) <= |bound| < 2**k, None for zero."""
    if bound == fzero:
        return None
    return int(bound[2]) + int(bound[3])


def _sign(x: _Interval, run: _Run, reason: Text, column: int | None) -> int:
    """1 or -1 for an interval that excludes zero, 0 for [0, 0]; undecided otherwise."""
    if mpf_sign(x.lo) > 0:
        return 1
    if mpf_sign(x.hi) < 0:
        return -1
    if x.lo == fzero and x.hi == fzero:
        return 0
    _undecided(run, reason, column)
    return 0  # not reached


def _bounded(x: _Interval, run: _Run, column: int | None) -> _Interval:
    """The interval, unless its values may exceed 2**MAX_BITS in magnitude."""
    sizes = [m for m in (_magnitude(x.lo), _magnitude(x.hi)) if m is not None]
    if not sizes or max(sizes) <= MAX_BITS:
        return x
    excludes_zero = mpf_sign(x.lo) > 0 or mpf_sign(x.hi) < 0
    nearest = min(sizes) - 1  # 2**nearest <= |value| when the interval excludes zero
    if excludes_zero and nearest >= MAX_BITS:
        raise _Failure(
            Message(
                "value too large: at least 2**%(bits)s (limit 2**%(limit)s)",
                bits=nearest,
                limit=MAX_BITS,
            ),
            column,
        )
    _undecided(run, Message("value may be too large (above 2**%(limit)s)", limit=MAX_BITS), column)
    return x


def _widened(lo: Any, hi: Any, prec: int) -> _Interval:
    """Bounds from a transcendental function, moved outwards by a few units in the last place
    (mpmath rounds them in the asked direction; the margin makes that a certainty)."""
    shift = -(prec - 3)
    lo = mpf_sub(lo, mpf_shift(mpf_abs(lo), shift), prec, round_floor) if lo != fzero else lo
    hi = mpf_add(hi, mpf_shift(mpf_abs(hi), shift), prec, round_ceiling) if hi != fzero else hi
    return _Interval(lo, hi)


def _lowest(bounds: Sequence[Any]) -> Any:
    best = bounds[0]
    for bound in bounds[1:]:
        if mpf_lt(bound, best):
            best = bound
    return best


def _highest(bounds: Sequence[Any]) -> Any:
    best = bounds[0]
    for bound in bounds[1:]:
        if mpf_lt(best, bound):
            best = bound
    return best


def _add(a: Value, b: Value, run: _Run, column: int | None) -> Value:
    if type(a) is Fraction and type(b) is Fraction:
        return _exact(a + b, column)
    x, y, prec = _interval(a, run.prec), _interval(b, run.prec), run.prec
    lo, hi = mpf_add(x.lo, y.lo, prec, round_floor), mpf_add(x.hi, y.hi, prec, round_ceiling)
    return _bounded(_Interval(lo, hi), run, column)


def _negate(a: Value) -> Value:
    if type(a) is Fraction:
        return -a
    assert isinstance(a, _Interval)
    return _Interval(mpf_neg(a.hi), mpf_neg(a.lo))


def _multiply(a: Value, b: Value, run: _Run, column: int | None) -> Value:
    if type(a) is Fraction and type(b) is Fraction:
        return _exact(a * b, column)
    if (type(a) is Fraction and a == 0) or (type(b) is Fraction and b == 0):
        return Fraction(0)
    x, y, prec = _interval(a, run.prec), _interval(b, run.prec), run.prec
    pairs = ((x.lo, y.lo), (x.lo, y.hi), (x.hi, y.lo), (x.hi, y.hi))
    lo = _lowest([mpf_mul(s, t, prec, round_floor) for s, t in pairs])
    hi = _highest([mpf_mul(s, t, prec, round_ceiling) for s, t in pairs])
    return _bounded(_Interval(lo, hi), run, column)


def _divide(a: Value, b: Value, run: _Run, column: int | None, zero: Text) -> Value:
    if type(b) is Fraction and b == 0:
        raise _Failure(zero, column)
    if type(a) is Fraction and type(b) is Fraction:
        return _exact(a / b, column)
    if type(a) is Fraction and a == 0:
        return Fraction(0)
    x, y, prec = _interval(a, run.prec), _interval(b, run.prec), run.prec
    if _sign(y, run, _NEAR_ZERO_DIVISOR, column) == 0:
        raise _Failure(zero, column)
    pairs = ((x.lo, y.lo), (x.lo, y.hi), (x.hi, y.lo), (x.hi, y.hi))
    lo = _lowest([mpf_div(s, t, prec, round_floor) for s, t in pairs])
    hi = _highest([mpf_div(s, t, prec, round_ceiling) for s, t in pairs])
    return _bounded(_Interval(lo, hi), run, column)


_ZERO_DIVISION = Message("division by zero: the value is undefined")
_NEAR_ZERO_DIVISOR = Message("division by a value that cannot be told apart from zero")
# Integer powers of an interval up to this exponent are multiplied out; larger ones (whose base
# must then lie within 2**(MAX_BITS / n) of 1) go through exp(n log x), which costs the same for
# any n, where repeated squaring at n = 10**400 would take a quarter of a second.
_SMALL_POWER = 64
_NEGATIVE_POWER_OF_ZERO = Message("division by zero: 0 to a negative power is undefined")


def _integer_power(v: Fraction, n: int, column: int | None) -> Fraction:
    if n == 0:
        return Fraction(1)
    if v == 0:
        if n < 0:
            raise _Failure(_NEGATIVE_POWER_OF_ZERO, column)
        return Fraction(0)
    if v.denominator == 1 and abs(v.numerator) == 1:
        return v if n % 2 else Fraction(1)
    bits = max(abs(v.numerator).bit_length(), v.denominator.bit_length())
    smallest = abs(n) * (bits - 1) + 1  # the result has at least this many bits
    if smallest > MAX_BITS:
        raise _Failure(
            Message(
                "power too large: its exact value needs about %(bits)s bits (limit %(limit)s)",
                bits=_count(smallest),
                limit=MAX_BITS,
            ),
            column,
        )
    return _exact(v**n, column)


def _nth_root(value: int, n: int) -> int | None:
    """The exact n-th root of a non-negative integer, or None."""
    if value < 2:
        return value
    if n > value.bit_length():
        return None  # 1 < root < 2
    root, exact = sympy.integer_nthroot(value, n)
    return int(root) if exact else None


def _log2(bound: Any) -> Fraction:
    """log2 of a non-zero mpf bound's magnitude, to about 15 digits."""
    return Fraction(math.log2(int(bound[1])) + int(bound[2]))


def _power_range(
    low: Fraction | None, high: Fraction | None, run: _Run, column: int | None
) -> None:
    """Check the bounds ``low``..``high`` of log2 |result| of a power (None: unbounded) against
    2**-MAX_BITS .. 2**MAX_BITS; a margin of one bit covers the estimate's rounding."""
    if low is not None and low > MAX_BITS + 1:
        raise _Failure(
            Message(
                "power too large: about 2**%(bits)s (limit 2**%(limit)s)",
                bits=_count(low),
                limit=MAX_BITS,
            ),
            column,
        )
    if high is not None and high < -(MAX_BITS + 1):
        raise _Failure(
            Message(
                "power too small: about 2**-%(bits)s (limit 2**-%(limit)s)",
                bits=_count(-high),
                limit=MAX_BITS,
            ),
            column,
        )
    if high is None or high > MAX_BITS + 1:
        _undecided(run, _POWER_MAY_BE_TOO_LARGE, column)


_POWER_MAY_BE_TOO_LARGE = Message("power may be too large (above 2**%(limit)s)", limit=MAX_BITS)


def _negative_base(base: str | Text) -> Text:
    """The reason given for a negative base of a fractional power (not a real number)."""
    return Message("a negative number (%(base)s) to a fractional power is not real", base=base)


def _power(v: Value, r: Fraction, run: _Run, column: int | None) -> Value:
    """``v ** r`` for a rational exponent ``r``."""
    if type(v) is Fraction:
        if r.denominator == 1:
            return _integer_power(v, r.numerator, column)
        if v < 0:
            raise _Failure(_negative_base(_show(v)), column)
        if v == 0:
            if r < 0:
                raise _Failure(_NEGATIVE_POWER_OF_ZERO, column)
            return Fraction(0)
        p, q = _nth_root(v.numerator, r.denominator), _nth_root(v.denominator, r.denominator)
        if p is not None and q is not None:
            return _integer_power(Fraction(p, q), r.numerator, column)
        estimate = r * Fraction(math.log2(v.numerator) - math.log2(v.denominator))
        _power_range(estimate, estimate, run, column)
    if r == 0:
        return Fraction(1)
    x, prec = _interval(v, run.prec), run.prec
    excludes_zero = mpf_sign(x.lo) > 0 or mpf_sign(x.hi) < 0
    if r.denominator != 1 and mpf_sign(x.hi) < 0:
        raise _Failure(_negative_base(Message("a negative number")), column)
    if not excludes_zero:
        if x.lo == fzero and x.hi == fzero:
            return _power(Fraction(0), r, run, column)
        if r < 0:
            _undecided(run, _NEAR_ZERO_DIVISOR, column)
        if r.denominator != 1:
            _undecided(
                run,
                Message("cannot decide whether the base of a fractional power is negative"),
                column,
            )
    if r.denominator == 1 and abs(r) <= _SMALL_POWER:
        logs = [_log2(bound) for bound in (x.lo, x.hi) if bound != fzero]
        top, bottom = max(logs), (min(logs) if excludes_zero else None)
        if r > 0:
            _power_range(None if bottom is None else r * bottom, r * top, run, column)
        else:
            assert bottom is not None
            _power_range(r * top, r * bottom, run, column)
        lo, hi = mpi_pow_int((x.lo, x.hi), r.numerator, prec)
        return _bounded(_Interval(lo, hi), run, column)
    if mpf_sign(x.hi) < 0:  # a large integer power of a negative number
        magnitude = _power(_negate(x), r, run, column)
        return _negate(magnitude) if r.numerator % 2 else magnitude
    if not excludes_zero:
        _undecided(run, Message("cannot decide the sign of the base of a large power"), column)
    logs_e = _widened(mpf_log(x.lo, prec, round_floor), mpf_log(x.hi, prec, round_ceiling), prec)
    exponent = _multiply(logs_e, r, run, column)  # the natural log of the result
    assert isinstance(exponent, _Interval)
    if mpf_lt(_LN_LIMIT, exponent.lo):
        raise _Failure(Message("power too large (above 2**%(limit)s)", limit=MAX_BITS), column)
    if mpf_lt(exponent.hi, mpf_neg(_LN_LIMIT)):
        raise _Failure(Message("power too small (below 2**-%(limit)s)", limit=MAX_BITS), column)
    if mpf_lt(_LN_LIMIT, exponent.hi):
        _undecided(run, _POWER_MAY_BE_TOO_LARGE, column)
    return _widened(
        mpf_exp(exponent.lo, prec, round_floor), mpf_exp(exponent.hi, prec, round_ceiling), prec
    )


# ln(2**(MAX_BITS + 2)), rounded up: the natural log of a power's result must stay below it.
_LN_LIMIT = from_rational(int((MAX_BITS + 2) * 0.6932) + 1, 1, 53, round_ceiling)


def _square_root(v: Value, run: _Run, column: int | None) -> Value:
    if type(v) is Fraction:
        if v < 0:
            raise _Failure(
                Message(
                    "the square root of a negative number (%(value)s) is not real", value=_show(v)
                ),
                column,
            )
        p, q = math.isqrt(v.numerator), math.isqrt(v.denominator)
        if p * p == v.numerator and q * q == v.denominator:
            return Fraction(p, q)
    x, prec = _interval(v, run.prec), run.prec
    if mpf_sign(x.hi) < 0:
        raise _Failure(Message("the square root of a negative number is not real"), column)
    if mpf_sign(x.lo) < 0:
        _undecided(run, Message("cannot decide whether the argument of sqrt is negative"), column)
    return _Interval(mpf_sqrt(x.lo, prec, round_floor), mpf_sqrt(x.hi, prec, round_ceiling))


def _natural_log(v: Value, run: _Run, column: int | None, *, base: bool = False) -> Value:
    """The natural log of ``v``: log's argument, or with ``base`` the base log divides by."""
    if type(v) is Fraction:
        if v <= 0:
            shown = _show(v)
            raise _Failure(
                Message(
                    "log base of %(value)s is undefined (it needs a positive number)", value=shown
                )
                if base
                else Message(
                    "log of %(value)s is undefined (it needs a positive number)", value=shown
                ),
                column,
            )
        if v == 1:
            return Fraction(0)
    x, prec = _interval(v, run.prec), run.prec
    if mpf_sign(x.hi) <= 0:
        raise _Failure(
            Message("log base of a non-positive number is undefined")
            if base
            else Message("log of a non-positive number is undefined"),
            column,
        )
    if mpf_sign(x.lo) <= 0:
        _undecided(
            run,
            Message("cannot decide whether the argument of log base is positive")
            if base
            else Message("cannot decide whether the argument of log is positive"),
            column,
        )
    return _widened(mpf_log(x.lo, prec, round_floor), mpf_log(x.hi, prec, round_ceiling), prec)


def _exact_log(x: Fraction, base: Fraction) -> Fraction | None:
    """log(x, base) when it is a rational m/n with a small n (log(8, 2) = 3, log(8, 4) = 3/2)."""
    if x == 1:
        return Fraction(0)
    below = math.log(base.numerator) - math.log(base.denominator)
    if below == 0:
        return None
    guess = Fraction((math.log(x.numerator) - math.log(x.denominator)) / below)
    candidate = guess.limit_denominator(64)
    m, n = candidate.numerator, candidate.denominator
    x_bits = max(x.numerator.bit_length(), x.denominator.bit_length())
    base_bits = max(base.numerator.bit_length(), base.denominator.bit_length())
    if m == 0 or n * x_bits > 2 * MAX_BITS or abs(m) * base_bits > 2 * MAX_BITS:
        return None
    return candidate if x**n == base**m else None


def _logarithm(
    v: Value, base: Value | None, run: _Run, columns: tuple[int | None, int | None]
) -> Value:
    natural = _natural_log(v, run, columns[0])
    if base is None:
        return natural
    if type(base) is Fraction:
        if base <= 0:
            raise _Failure(
                Message(
                    "log base %(base)s is undefined (the base must be positive)", base=_show(base)
                ),
                columns[1],
            )
        if base == 1:
            raise _Failure(_LOG_BASE_ONE, columns[1])
        if type(v) is Fraction:
            exact = _exact_log(v, base)
            if exact is not None:
                return exact
    below = _natural_log(base, run, columns[1], base=True)
    return _divide(natural, below, run, columns[1], _LOG_BASE_ONE)


def _rounded(v: Value, run: _Run, column: int | None, up: bool) -> Fraction:
    if type(v) is Fraction:
        return Fraction(math.ceil(v) if up else math.floor(v))
    assert isinstance(v, _Interval)
    direction = round_ceiling if up else round_floor
    low, high = to_int(v.lo, direction), to_int(v.hi, direction)
    if low != high:
        name = "ceil" if up else "floor"
        _undecided(
            run,
            Message("%(name)s() cannot decide: the value lies too close to an integer", name=name),
            column,
        )
    return Fraction(low)


def _extreme(values: Sequence[Value], run: _Run, largest: bool) -> Value:
    if all(type(v) is Fraction for v in values):
        return max(values) if largest else min(values)  # type: ignore[type-var]
    bounds = [_interval(v, run.prec) for v in values]
    for i, x in enumerate(bounds):
        others = [y for j, y in enumerate(bounds) if j != i]
        if largest and all(mpf_le(y.hi, x.lo) for y in others):
            return values[i]
        if not largest and all(mpf_le(x.hi, y.lo) for y in others):
            return values[i]
    pick = _highest if largest else _lowest
    return _Interval(pick([x.lo for x in bounds]), pick([x.hi for x in bounds]))


def _absolute(v: Value) -> Value:
    if type(v) is Fraction:
        return abs(v)
    assert isinstance(v, _Interval)
    if mpf_sign(v.lo) >= 0:
        return v
    if mpf_sign(v.hi) <= 0:
        return _negate(v)
    return _Interval(fzero, _highest([mpf_neg(v.lo), v.hi]))


def _power_of_two(v: Value, run: _Run, column: int | None) -> Fraction:
    if type(v) is Fraction:
        if v <= 0:
            raise _Failure(
                Message(
                    "pow2ceil of %(value)s is undefined (it needs a positive number)",
                    value=_show(v),
                ),
                column,
            )
    else:
        assert isinstance(v, _Interval)
        if mpf_sign(v.hi) <= 0:
            raise _Failure(Message("pow2ceil of a non-positive number is undefined"), column)
        if mpf_sign(v.lo) <= 0:
            _undecided(
                run, Message("cannot decide whether the argument of pow2ceil is positive"), column
            )
    whole = int(_rounded(v, run, column, up=True))
    return _exact(Fraction(1 << (whole - 1).bit_length()), column)


def _round_significant(value: Fraction, digits: int) -> Fraction:
    """``value`` rounded half-even to ``digits`` significant decimal digits, exactly."""
    if value == 0:
        return value
    size = abs(value)
    exponent = len(str(size.numerator)) - len(str(size.denominator))
    while Fraction(10) ** exponent > size:
        exponent -= 1
    while Fraction(10) ** (exponent + 1) <= size:
        exponent += 1
    shift = digits - 1 - exponent
    if shift >= 0:
        return Fraction(round(value * 10**shift), 10**shift)
    return Fraction(round(value / 10**-shift) * 10**-shift)


# Digits an irrational result is given to, as sympy.N(value, 30) did.
RESULT_DIGITS = 30


_NEGLIGIBLE = -3 * MAX_BITS


def _bound_value(bound: Any, *, upward: bool) -> Fraction:
    """A bound as an exact fraction; one below 2**-3*MAX_BITS in magnitude is moved outwards to
    0 or to +-2**-3*MAX_BITS, so that no conversion makes a fraction too long to print."""
    size = _magnitude(bound)
    if size is None or size >= _NEGLIGIBLE:
        return Fraction(*to_rational(bound))
    negative = mpf_sign(bound) < 0
    if negative == upward:
        return Fraction(0)
    return Fraction(-1 if negative else 1, 2**-_NEGLIGIBLE)


def _finish(v: Value, run: _Run, column: int | None) -> Fraction:
    """The formula's value: exact, or an irrational one to RESULT_DIGITS significant digits."""
    if type(v) is Fraction:
        return v
    assert isinstance(v, _Interval)
    magnitudes = [m for m in (_magnitude(v.lo), _magnitude(v.hi)) if m is not None]
    contains_zero = mpf_sign(v.lo) <= 0 <= mpf_sign(v.hi)
    if not magnitudes:
        return Fraction(0)
    if max(magnitudes) < -MAX_BITS:
        if contains_zero:
            return Fraction(0)
        raise _Failure(Message("value too small: below 2**-%(limit)s", limit=MAX_BITS), column)
    if max(magnitudes) > MAX_BITS + 1:  # kept out by _bounded; checked again before converting
        raise _Failure(Message("value too large (above 2**%(limit)s)", limit=MAX_BITS), column)
    lo, hi = _bound_value(v.lo, upward=False), _bound_value(v.hi, upward=True)
    low, high = _round_significant(lo, RESULT_DIGITS), _round_significant(hi, RESULT_DIGITS)
    if low == high:
        return _exact(low, column)
    if run.last:
        if not contains_zero:
            middle = (lo + hi) / 2
            if (hi - lo) * 10**RESULT_DIGITS <= abs(middle):
                return _exact(_round_significant(middle, RESULT_DIGITS), column)
        elif (hi - lo) * 2**1000 < 1:
            return Fraction(0)  # zero to within 2**-1000: an irrational zero such as sqrt(2)**2 - 2
    _undecided(
        run,
        Message("the value cannot be computed to %(digits)s digits", digits=RESULT_DIGITS),
        column,
    )
    return Fraction(0)  # not reached


def _constant(value: Fraction) -> _Eval:
    return lambda env, run: value


def _cached(fn: _Eval) -> _Eval:
    """A constant subformula with an irrational value: computed once per precision."""
    cache: dict[int, Value] = {}

    def constant(env: Mapping[str, Fraction], run: _Run) -> Value:
        value = cache.get(run.prec)
        if value is None:
            value = cache[run.prec] = fn(env, run)
        return value

    return constant


def _fold(fn: _Eval) -> tuple[Fraction | None, _Eval]:
    """Evaluate a subformula without parameters: its exact value (None when irrational) and the
    closure to use from now on. Errors are raised as _Failure."""
    for run in _RUNS:
        try:
            value = fn({}, run)
        except _MorePrecision:
            continue
        if type(value) is Fraction:
            return value, _constant(value)
        return None, _cached(fn)
    raise AssertionError("the last precision decides or fails")  # pragma: no cover


@dataclass(frozen=True, eq=False)
class _Program:
    """A compiled formula: its root closure and what parsing learned about it."""

    root: _Eval
    column: int | None  # the root node's column
    names: frozenset[str]
    first: Mapping[str, int | None]  # the column of each parameter's first use
    degree: Mapping[str, Fraction]  # the power each parameter is raised to, at most
    size: int  # nodes once card formulas are substituted
    depth: int  # nesting once card formulas are substituted
    constant: Fraction | None  # the exact value of a formula without parameters
    heavy: int = 0  # logarithms and fractional powers once card formulas are substituted

    def run(self, text: str, values: Mapping[str, Number]) -> Fraction:
        try:
            env = {
                name: _parameter_value(name, values[name], self.first.get(name))
                for name in self.names
            }
            for run in _RUNS:
                try:
                    return _finish(self.root(env, run), run, self.column)
                except _MorePrecision:
                    continue
        except _Failure as exc:
            raise FormulaError(exc.message, text=text, column=exc.column) from None
        except (ArithmeticError, ValueError, TypeError, RecursionError, MemoryError) as exc:
            # Not expected (the hostile corpus checks that it never happens); still one line.
            raise FormulaError(
                Message("cannot evaluate (%(error)s)", error=exc.__class__.__name__), text=text
            ) from None
        raise AssertionError("the last precision decides or fails")  # pragma: no cover


def _parameter_value(name: str, value: object, column: int | None) -> Fraction:
    if isinstance(value, bool):
        raise _Failure(Message("the value of %(name)s is not a number", name=name), column)
    if isinstance(value, Fraction):
        exact = value
    elif isinstance(value, int):
        exact = Fraction(value)
    elif getattr(value, "is_Rational", False) is True:
        exact = Fraction(int(value.p), int(value.q))  # type: ignore[attr-defined]
    else:
        raise _Failure(Message("the value of %(name)s is not an exact number", name=name), column)
    try:
        return _exact(exact, column)
    except _Failure as exc:
        raise _Failure(
            Message("the value of %(name)s: %(reason)s", name=name, reason=exc.message), column
        ) from None
