"""The safe formula parser: exact values, a strict whitelist, bounded work, clear errors."""

import time
from fractions import Fraction

import pytest
import sympy

from app.domain import formulas
from app.domain.formulas import FormulaError, parse_formula, parse_number

NAMES = {"psi", "n_d"}


def value(text, **params):
    return parse_formula(text, NAMES).evaluate(params)


def test_card_formulas_are_exact():
    psi, n_d = 70 * 10**9, 16
    assert value("16*psi", psi=psi) == 1_120_000_000_000
    assert value("2*psi + 2*psi + 12*psi/n_d", psi=psi, n_d=n_d) == 332_500_000_000
    assert value("2*psi + (2*psi + 12*psi)/n_d", psi=psi, n_d=n_d) == 201_250_000_000
    assert value("16*psi/n_d", psi=psi, n_d=n_d) == 70_000_000_000


def test_decimal_literals_are_exact_rationals():
    assert value("0.1 + 0.2") == Fraction(3, 10)
    assert value("1.3e9") == 1_300_000_000
    assert value("7.5e9 / 64") == Fraction(7_500_000_000, 64)
    assert value("70_000") == 70_000
    assert parse_number("1.3e9") == 1_300_000_000
    assert parse_number(7.5e9) == 7_500_000_000
    assert parse_number(0.1) == Fraction(1, 10)


def test_functions_and_powers():
    assert value("ceil(16*psi/(80*10**9))", psi=70 * 10**9) == 14
    assert value("floor(7/2)") == 3
    assert value("max(psi, n_d) - min(2, 3)", psi=5, n_d=9) == 7
    assert value("2**30") == 1_073_741_824
    assert value("abs(-3)") == 3
    assert [value(f"pow2ceil({x})") for x in ("1", "14", "16", "16.5", "0.3")] == [1, 16, 16, 32, 1]
    assert value("pow2ceil(ceil(16*psi/(80*10**9)))", psi=70 * 10**9) == 16
    assert value("sqrt(16)") == 4
    assert abs(float(value("sqrt(2)")) - 2**0.5) < 1e-15


def test_named_definitions_are_substituted():
    ddp = parse_formula("16*psi", NAMES)
    zero3 = parse_formula("ddp/n_d", NAMES, {"ddp": ddp})
    assert zero3.names == {"psi", "n_d"}
    assert zero3.evaluate({"psi": 70 * 10**9, "n_d": 16}) == 70 * 10**9


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("__import__('os').system('id')", "attribute access cannot be called"),
        ("psi.real", "attribute access is not allowed"),
        ("().__class__", "attribute access is not allowed"),
        ("9**9**9", "power too large"),
        ("x" * 10_000, "limit is 500"),
        ("'abc'", "string is not allowed"),
        ("psi[0]", "subscript is not allowed"),
        ("(lambda: 1)()", "cannot be called"),
        ("[p for p in psi]", "comprehension is not allowed"),
        ("open('f')", "function 'open' is not allowed"),
        ("max(psi, n_d, key=1)", "keyword arguments are not allowed"),
        ("foo + 1", "unknown name 'foo'"),
        ("psi ** n_d", "exponent must be a number"),
        ("psi ** 100", "too large"),
        ("1 / 0", "division by zero"),
        ("psi +", "syntax error"),
        ("psi if n_d else 1", "conditional expression is not allowed"),
        ("psi < n_d", "comparison is not allowed"),
        ("ceil", "must be called"),
        ("ceil(1, 2)", "takes 1 arguments"),
        ("True", "boolean is not allowed"),
        ("1j", "complex constant is not allowed"),
        ("-" * 30 + "1", "nested deeper"),
        ("+".join(["max(1,2,3,4,5,6,7,8)"] * 22), "more than 200 elements"),
        ("", "empty"),
    ],
)
def test_rejects_with_a_clear_reason_quickly(text, reason):
    started = time.perf_counter()
    with pytest.raises(FormulaError) as caught:
        parse_formula(text, NAMES)
    assert time.perf_counter() - started < 0.1
    assert reason in str(caught.value)


def test_errors_name_the_column():
    with pytest.raises(FormulaError) as caught:
        parse_formula("16*psi + foo", NAMES)
    assert caught.value.column == 10
    assert "at column 10" in str(caught.value)


def test_pow2ceil_of_a_non_positive_number_is_undefined():
    with pytest.raises(FormulaError, match="undefined"):
        value("pow2ceil(psi - 1)", psi=1)


def test_division_by_zero_at_evaluation_is_a_formula_error():
    with pytest.raises(FormulaError, match="undefined"):
        value("psi / n_d", psi=1, n_d=0)


def test_missing_parameter_value_is_reported():
    with pytest.raises(FormulaError, match="no value for n_d"):
        value("psi / n_d", psi=1)


def test_no_text_reaches_code_executing_sympy_entry_points(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("text reached a code-executing sympy function")

    for name in ("sympify", "parse_expr", "lambdify"):
        monkeypatch.setattr(sympy, name, forbidden, raising=False)
    monkeypatch.setattr(sympy.parsing.sympy_parser, "parse_expr", forbidden)
    monkeypatch.setattr(formulas.sympy, "sympify", forbidden, raising=False)
    formula = parse_formula("ceil(2*psi + (2*psi + 12*psi)/n_d) + 2**30 + 1.5", NAMES)
    assert formula.evaluate({"psi": 10, "n_d": 4}) == Fraction(
        2 * 10 + 140 // 4
    ) + 2**30 + Fraction(3, 2)
