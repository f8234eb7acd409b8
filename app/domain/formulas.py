"""Safe formula parsing and exact evaluation.

Formulas come from card files written by instructors, so they are untrusted text. They are parsed
with :mod:`ast` against a whitelist and the sympy tree is built node by node here; no text ever
reaches ``sympify``, ``parse_expr``, ``eval`` or ``lambdify`` (all of which execute code).

Bounds keep a hostile formula from stalling the process: input length, AST node count and depth,
and the size of every power (``9**9**9`` is refused before anything is computed).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeAlias

import sympy

MAX_LENGTH = 500
MAX_NODES = 200
MAX_DEPTH = 24
# Largest number of decimal digits a constant power may produce (10**400 is allowed, 10**401 not).
MAX_POWER_DIGITS = 400
# Largest exponent applied to an expression that contains parameters.
MAX_SYMBOLIC_EXPONENT = 16

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,31}")


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
    """A formula that cannot be parsed or evaluated; the message names position and reason."""

    def __init__(self, reason: str, *, text: str | None = None, column: int | None = None):
        self.reason = reason
        self.column = column
        where = f" at column {column}" if column is not None else ""
        shown = f" in {text!r}" if text is not None and len(text) <= 80 else ""
        super().__init__(f"{reason}{where}{shown}")


def is_identifier(name: str) -> bool:
    return _IDENTIFIER.fullmatch(name) is not None


@dataclass(frozen=True)
class Formula:
    """A parsed formula: its source text, the sympy expression and the parameters it uses."""

    text: str
    expr: sympy.Expr
    names: frozenset[str] = field(default_factory=frozenset)
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


def decimal_to_fraction(text: str) -> Fraction:
    """Exact value of a decimal literal such as ``1.3e9`` or ``70_000``."""
    try:
        return Fraction(text.replace("_", "").strip())
    except (ValueError, ZeroDivisionError) as exc:
        raise FormulaError(f"{text!r} is not a number") from exc


def parse_number(value: object) -> Fraction:
    """A parameter value from a card file: an int, a decimal string, or a float read by YAML."""
    if isinstance(value, bool):
        raise FormulaError(f"{value!r} is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FormulaError(f"{value!r} is not a finite number")
        # repr gives the shortest decimal that reads back as this float: 1.3e9 stays 1.3e9.
        return decimal_to_fraction(repr(value))
    if isinstance(value, str):
        return decimal_to_fraction(value)
    raise FormulaError(f"{value!r} is not a number")


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
        raise FormulaError("a formula must be text")
    if len(text) > MAX_LENGTH:
        raise FormulaError(f"formula is {len(text)} characters long; the limit is {MAX_LENGTH}")
    if not text.strip():
        raise FormulaError("formula is empty")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"syntax error: {exc.msg}", text=text, column=exc.offset) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise FormulaError(f"cannot parse: {exc.__class__.__name__}", text=text) from None
    builder = _Builder(text.strip(), frozenset(names), dict(definitions or {}))
    expr = builder.build(tree.body, depth=1)
    return Formula(text=text, expr=expr, names=frozenset(builder.used))


class _Builder:
    def __init__(self, text: str, names: frozenset[str], definitions: dict[str, Formula]):
        self.text = text
        self.names = names
        self.definitions = definitions
        self.nodes = 0
        self.used: set[str] = set()

    def fail(self, reason: str, node: ast.AST) -> FormulaError:
        column = getattr(node, "col_offset", None)
        return FormulaError(reason, text=self.text, column=None if column is None else column + 1)

    def build(self, node: ast.AST, depth: int) -> sympy.Expr:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(f"formula has more than {MAX_NODES} elements", node)
        if depth > MAX_DEPTH:
            raise self.fail(f"formula is nested deeper than {MAX_DEPTH} levels", node)

        if isinstance(node, ast.Constant):
            return self.constant(node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.build(node.operand, depth + 1)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left = self.build(node.left, depth + 1)
            right = self.build(node.right, depth + 1)
            return self.binary(node, left, right)
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        raise self.fail(f"{_describe(node)} is not allowed", node)

    def constant(self, node: ast.Constant) -> sympy.Expr:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{_describe(node)} is not allowed", node)
        source = ast.get_source_segment(self.text, node) or repr(value)
        exact = decimal_to_fraction(source)
        return sympy.Rational(exact.numerator, exact.denominator)

    def name(self, node: ast.Name) -> sympy.Expr:
        name = node.id
        if not is_identifier(name):
            raise self.fail(f"name {name!r} is not allowed (lower-case letters, digits, _)", node)
        if name in self.names:
            self.used.add(name)
            return sympy.Symbol(name)
        if name in self.definitions:
            formula = self.definitions[name]
            self.used.update(formula.names)
            return formula.expr
        if name in FUNCTIONS:
            raise self.fail(f"function {name!r} must be called", node)
        allowed = ", ".join(sorted(self.names | set(self.definitions))) or "none"
        raise self.fail(f"unknown name {name!r} (allowed: {allowed})", node)

    def binary(self, node: ast.BinOp, left: sympy.Expr, right: sympy.Expr) -> sympy.Expr:
        op = type(node.op)
        if op is ast.Add:
            return left + right
        if op is ast.Sub:
            return left - right
        if op is ast.Mult:
            return left * right
        if op is ast.Div:
            if right.is_zero:
                raise self.fail("division by zero", node)
            return left / right
        return self.power(node, left, right)

    def power(self, node: ast.BinOp, base: sympy.Expr, exponent: sympy.Expr) -> sympy.Expr:
        if exponent.free_symbols:
            raise self.fail("an exponent must be a number, not depend on parameters", node)
        if not exponent.is_Rational:
            raise self.fail("an exponent must be a rational number", node)
        if base.free_symbols:
            if abs(exponent) > MAX_SYMBOLIC_EXPONENT:
                raise self.fail(
                    f"exponent {exponent} is too large (limit {MAX_SYMBOLIC_EXPONENT})", node
                )
            return base**exponent
        if base.is_zero and exponent.is_negative:
            raise self.fail("division by zero", node)
        magnitude = abs(base)
        if magnitude not in (0, 1):
            digits = abs(float(exponent)) * abs(_log10(magnitude))
            if digits > MAX_POWER_DIGITS:
                raise self.fail(
                    f"power too large: about {digits:.3g} digits (limit {MAX_POWER_DIGITS})", node
                )
        return base**exponent

    def call(self, node: ast.Call, depth: int) -> sympy.Expr:
        if not isinstance(node.func, ast.Name):
            raise self.fail(f"{_describe(node.func)} cannot be called", node)
        name = node.func.id
        if name not in FUNCTIONS:
            allowed = ", ".join(FUNCTIONS)
            raise self.fail(f"function {name!r} is not allowed (allowed: {allowed})", node)
        if node.keywords:
            raise self.fail("keyword arguments are not allowed", node)
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            raise self.fail("starred arguments are not allowed", node)
        constructor, low, high = FUNCTIONS[name]
        if not low <= len(node.args) <= high:
            expected = str(low) if low == high else f"{low} to {high}"
            raise self.fail(f"{name}() takes {expected} arguments, got {len(node.args)}", node)
        args = [self.build(arg, depth + 1) for arg in node.args]
        if name == "log" and len(args) == 2:
            return sympy.log(args[0], args[1])
        return constructor(*args)


def _log10(value: sympy.Expr) -> float:
    number = sympy.Rational(value) if value.is_Rational else value
    if number.is_Rational:
        return math.log10(number.p) - math.log10(number.q)
    return math.log10(float(number))


_DESCRIPTIONS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscript",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehension",
    ast.GeneratorExp: "comprehension",
    ast.SetComp: "comprehension",
    ast.DictComp: "comprehension",
    ast.Compare: "comparison",
    ast.BoolOp: "boolean operator",
    ast.IfExp: "conditional expression",
    ast.NamedExpr: "assignment",
    ast.List: "list",
    ast.Tuple: "tuple",
    ast.Dict: "dict",
    ast.Set: "set",
    ast.JoinedStr: "f-string",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.Starred: "starred expression",
}


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        kind = type(node.value).__name__
        return {"str": "string", "bytes": "bytes", "bool": "boolean"}.get(kind, f"{kind} constant")
    if isinstance(node, ast.BinOp):
        return f"operator {type(node.op).__name__}"
    if isinstance(node, ast.UnaryOp):
        return f"operator {type(node.op).__name__}"
    return _DESCRIPTIONS.get(type(node), type(node).__name__)


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
        raise FormulaError(f"no value for {', '.join(sorted(missing))}", text=formula.text)
    if formula.rational is not None and all(
        isinstance(values[name], Fraction | int) and not isinstance(values[name], bool)
        for name in formula.names
    ):
        try:
            return formula.rational(values)  # type: ignore[arg-type]
        except (ZeroDivisionError, _Undefined):
            raise FormulaError(
                "the value is undefined (division by zero?)", text=formula.text
            ) from None
    substitution = {sympy.Symbol(name): _to_rational(values[name]) for name in formula.names}
    result = formula.expr.xreplace(substitution)
    if result.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo) or not result.is_number:
        raise FormulaError("the value is undefined (division by zero?)", text=formula.text)
    if result.is_Rational:
        return Fraction(int(result.p), int(result.q))
    if not result.is_real:
        raise FormulaError("the value is not a real number", text=formula.text)
    approx = sympy.N(result, 30)
    return Fraction(str(approx))


def _to_rational(value: Number) -> sympy.Rational:
    if isinstance(value, sympy.Rational):
        return value
    if isinstance(value, Fraction):
        return sympy.Rational(value.numerator, value.denominator)
    if isinstance(value, int) and not isinstance(value, bool):
        return sympy.Integer(value)
    raise FormulaError(f"{value!r} is not an exact number")
