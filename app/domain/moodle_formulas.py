"""The engine's formulas in Moodle's formula language, for calculated questions.

Moodle's calculated questions (``qtype_calculated``, ``qtype_calculatedmulti``) write a formula
as PHP arithmetic over *wildcards*: ``{=16*{psi}/{n_d}}`` in a text or an answer, where Moodle puts
each wildcard's value in brackets, ``(70000000000)``, and PHP computes the result in IEEE doubles.
The functions it allows are a fixed list (its formula check, ``get_formula_errors``); of those
this module writes ``ceil floor min max sqrt log log10 abs pow round``.

:func:`translate` walks a formula's compiled form (the sympy tree the engine built node by node,
never its text) into a small :class:`MoodleExpr` tree: :func:`moodle_text` writes that tree in
Moodle's syntax (no spaces: Moodle's own editor finds ``{=...}`` only without them) and
:func:`approximate` computes it as PHP would, in doubles, so that an export can check, at every
parameter combination it lists, that Moodle's value is the engine's exact one. Powers are
``pow(x, n)`` (PHP's ``^`` is a bitwise operator), ``sqrt`` is ``sqrt``, a logarithm in base b is
``log(x)/log(b)``; ``pow2ceil`` has no exact equivalent (``pow(2,ceil(log(x,2)))`` goes wrong in
doubles at exact powers of two) and is refused with :class:`Untranslatable`, as is anything else
Moodle lacks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import sympy

from .bilingual import Text
from .formulas import Formula, pow2ceil
from .messages import Message


class Untranslatable(ValueError):
    """A formula Moodle's formula language cannot write; ``reason`` in every language."""

    def __init__(self, reason: Text) -> None:
        super().__init__(reason.en)
        self.reason = reason


@dataclass(frozen=True)
class Number:
    """A whole number at or above zero (a fraction is a division of two)."""

    value: int


@dataclass(frozen=True)
class Wildcard:
    name: str


@dataclass(frozen=True)
class Negated:
    operand: MoodleExpr


@dataclass(frozen=True)
class Binary:
    operator: str  # + - * /
    left: MoodleExpr
    right: MoodleExpr


@dataclass(frozen=True)
class Call:
    function: str  # one of FUNCTIONS
    args: tuple[MoodleExpr, ...]


MoodleExpr = Number | Wildcard | Negated | Binary | Call

# Moodle's formula functions this module writes (all in qtype_calculated's list), with their
# number of arguments (None: two or more).
FUNCTIONS: dict[str, int | None] = {
    "abs": 1,
    "ceil": 1,
    "floor": 1,
    "sqrt": 1,
    "log": 1,
    "log10": 1,
    "pow": 2,
    "round": 2,
    "min": None,
    "max": None,
}

_SIMPLE = {
    sympy.ceiling: "ceil",
    sympy.floor: "floor",
    sympy.Abs: "abs",
    sympy.Min: "min",
    sympy.Max: "max",
}


def translate(formula: Formula) -> MoodleExpr:
    """``formula`` in Moodle's terms; :class:`Untranslatable` when Moodle lacks what it uses."""
    return _walk(formula.expr)


def number(value: Fraction | int) -> MoodleExpr:
    """A rational constant: ``3``, ``3/8``, ``-(3/8)``."""
    value = Fraction(value)
    magnitude = abs(value)
    if magnitude.denominator == 1:
        expr: MoodleExpr = Number(magnitude.numerator)
    else:
        expr = Binary("/", Number(magnitude.numerator), Number(magnitude.denominator))
    return Negated(expr) if value < 0 else expr


def scaled(expr: MoodleExpr, scale: Fraction) -> MoodleExpr:
    """``expr`` divided by ``scale`` (a display unit's base units per unit): ``x/1000000000``
    for GB, ``x*1000`` for ms, ``x*100`` for a percentage."""
    if scale == 1:
        return expr
    if scale.numerator == 1:
        return Binary("*", expr, Number(scale.denominator))
    if scale.denominator == 1:
        return Binary("/", expr, Number(scale.numerator))
    return Binary("/", Binary("*", expr, Number(scale.denominator)), Number(scale.numerator))


def rounded(expr: MoodleExpr, figures: int, *, positive: bool = False) -> MoodleExpr:
    """``expr`` shown with ``figures`` significant figures, never rounding digits before the
    point (as the engine's texts show a computed value):
    ``round(x,max(0,F-1-floor(log10(abs(x)))))`` (no ``abs`` for a value known ``positive``).
    Only for a value that is never zero (log10 of zero is minus infinity)."""
    size = expr if positive else Call("abs", (expr,))
    magnitude = Call("floor", (Call("log10", (size,)),))
    decimals = Call("max", (Number(0), Binary("-", Number(max(figures, 1) - 1), magnitude)))
    return Call("round", (expr, decimals))


def rounded_to(expr: MoodleExpr, decimals: int) -> MoodleExpr:
    """``expr`` rounded to ``decimals`` places: ``round(x,2)``."""
    return Call("round", (expr, Number(decimals)))


def _walk(expr: sympy.Expr) -> MoodleExpr:
    if expr.is_Rational:
        return number(Fraction(int(expr.p), int(expr.q)))
    if expr.is_Symbol:
        return Wildcard(str(expr))
    if isinstance(expr, sympy.Add):
        return _sum(expr.args)
    if isinstance(expr, sympy.Mul):
        return _product(expr)
    if isinstance(expr, sympy.Pow):
        base, exponent = expr.args
        if exponent.is_Rational and exponent < 0:
            return Binary("/", Number(1), _power(base, -exponent))
        return _power(base, exponent)
    if isinstance(expr, sympy.log):
        return Call("log", (_walk(expr.args[0]),))
    if isinstance(expr, pow2ceil):
        raise Untranslatable(
            Message(
                "pow2ceil (the smallest power of two at or above a number) has no exact "
                "equivalent in Moodle's formulas"
            )
        )
    for kind, name in _SIMPLE.items():
        if isinstance(expr, kind):
            return Call(name, tuple(_walk(arg) for arg in expr.args))
    raise Untranslatable(
        Message("%(what)s has no equivalent in Moodle's formulas", what=type(expr).__name__)
    )


def _power(base: sympy.Expr, exponent: sympy.Expr) -> MoodleExpr:
    if exponent == 1:
        return _walk(base)
    if exponent == sympy.Rational(1, 2):
        return Call("sqrt", (_walk(base),))
    if not exponent.is_Rational:
        raise Untranslatable(Message("an exponent must be a number"))
    return Call("pow", (_walk(base), number(Fraction(int(exponent.p), int(exponent.q)))))


def _negative_term(term: sympy.Expr) -> sympy.Expr | None:
    """``x`` when ``term`` is ``-x`` as the engine writes it (``Mul(-1, x)``), else None."""
    if isinstance(term, sympy.Mul) and term.args and term.args[0] == -1:
        rest = term.args[1:]
        return rest[0] if len(rest) == 1 else sympy.Mul(*rest, evaluate=False)
    if term.is_Rational and term < 0:
        return -term
    return None


def _sum(terms: tuple[sympy.Expr, ...]) -> MoodleExpr:
    result: MoodleExpr | None = None
    for term in terms:
        negative = _negative_term(term)
        part = _walk(negative if negative is not None else term)
        if result is None:
            result = Negated(part) if negative is not None else part
        else:
            result = Binary("-" if negative is not None else "+", result, part)
    assert result is not None
    return result


def _factors(expr: sympy.Expr) -> list[sympy.Expr]:
    if isinstance(expr, sympy.Mul):
        return [f for arg in expr.args for f in _factors(arg)]
    return [expr]


def _product(expr: sympy.Expr) -> MoodleExpr:
    """Numerator factors multiplied first, then each denominator divided out in turn (an exact
    quotient of whole numbers stays exact in doubles): ``16*{psi}/{n_d}``."""
    negative = False
    above: list[MoodleExpr] = []
    below: list[MoodleExpr] = []
    for factor in _factors(expr):
        if factor == -1:
            negative = not negative
        elif isinstance(factor, sympy.Pow) and factor.args[1].is_Rational and factor.args[1] < 0:
            below.append(_power(factor.args[0], -factor.args[1]))
        else:
            above.append(_walk(factor))
    result: MoodleExpr = above[0] if above else Number(1)
    for factor in above[1:]:
        result = Binary("*", result, factor)
    for factor in below:
        result = Binary("/", result, factor)
    return Negated(result) if negative else result


# --- writing ----------------------------------------------------------------------------------

_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_ATOM = 4


def _precedence(expr: MoodleExpr) -> int:
    if isinstance(expr, Binary):
        return _PRECEDENCE[expr.operator]
    if isinstance(expr, Negated):
        return 3
    return _ATOM


def moodle_text(expr: MoodleExpr) -> str:
    """The formula in Moodle's syntax, without spaces: ``16*{psi}/{n_d}/1000000000``."""
    if isinstance(expr, Number):
        return str(expr.value)
    if isinstance(expr, Wildcard):
        return "{" + expr.name + "}"
    if isinstance(expr, Negated):
        inner = moodle_text(expr.operand)
        return "-" + (inner if _precedence(expr.operand) == _ATOM else f"({inner})")
    if isinstance(expr, Call):
        return expr.function + "(" + ",".join(moodle_text(arg) for arg in expr.args) + ")"
    own = _PRECEDENCE[expr.operator]
    left, right = moodle_text(expr.left), moodle_text(expr.right)
    # A negation is always bracketed inside an operation: PHP reads "a--b" as a decrement.
    if _precedence(expr.left) < own or isinstance(expr.left, Negated):
        left = f"({left})"
    if (
        _precedence(expr.right) < own
        or (_precedence(expr.right) == own and expr.operator in "-/")
        or isinstance(expr.right, Negated)
    ):
        right = f"({right})"
    return f"{left}{expr.operator}{right}"


def in_text(expr: MoodleExpr) -> str:
    """The formula as a Moodle text shows its value: ``{=...}``."""
    return "{=" + moodle_text(expr) + "}"


# --- computing as Moodle does -----------------------------------------------------------------


def approximate(expr: MoodleExpr, values: Mapping[str, float]) -> float:
    """The formula's value as Moodle computes it: every number a double, PHP's functions (nan
    for what PHP leaves undefined, such as the square root of a negative number)."""
    if isinstance(expr, Number):
        return float(expr.value)
    if isinstance(expr, Wildcard):
        return float(values[expr.name])
    if isinstance(expr, Negated):
        return -approximate(expr.operand, values)
    if isinstance(expr, Binary):
        a, b = approximate(expr.left, values), approximate(expr.right, values)
        if expr.operator == "+":
            return a + b
        if expr.operator == "-":
            return a - b
        if expr.operator == "*":
            return a * b
        return a / b if b != 0 else math.nan  # PHP throws: no value either way
    args = [approximate(arg, values) for arg in expr.args]
    return _call(expr.function, args)


def _call(function: str, args: list[float]) -> float:
    x = args[0]
    try:
        if function == "abs":
            return abs(x)
        if function == "ceil":
            return float(math.ceil(x))
        if function == "floor":
            return float(math.floor(x))
        if function == "sqrt":
            return math.sqrt(x)
        if function == "log":
            return math.log(x)
        if function == "log10":
            return math.log10(x)
        if function == "pow":
            return math.pow(x, args[1])
        if function == "round":
            return php_round(x, int(args[1]))
        if function == "min":
            return min(args)
        if function == "max":
            return max(args)
    except (ValueError, OverflowError):
        return math.nan
    raise AssertionError(f"unknown function {function}")


def php_round(x: float, decimals: int) -> float:
    """PHP's ``round``: halves away from zero."""
    factor = 10.0**decimals
    shifted = abs(x) * factor
    whole = math.floor(shifted)
    if shifted - whole >= 0.5:
        whole += 1
    return math.copysign(whole / factor, x)


def agrees(approximation: float, exact: Fraction) -> bool:
    """Whether Moodle's double is the engine's exact value, up to a billionth of it."""
    if math.isnan(approximation) or math.isinf(approximation):
        return False
    if exact == 0:
        return abs(approximation) < 1e-12
    return abs(Fraction(approximation) - exact) <= abs(exact) / 10**9
