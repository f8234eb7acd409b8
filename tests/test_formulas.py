"""The safe formula parser: exact values, a strict whitelist, bounded work, clear errors."""

import gc
import time
from fractions import Fraction

import pytest
import sympy

from app.domain import formulas
from app.domain.formulas import FormulaError, parse_formula, parse_number

NAMES = {"psi", "n_d"}


@pytest.fixture(autouse=True, scope="module")
def _frozen_heap():
    """What is alive before these tests (sympy, the catalogs) is frozen, as the server freezes it
    at start-up, so that a full garbage collection does not land inside a timed parse."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


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
        ("ceil(1, 2)", "ceil() takes 1 argument, got 2"),
        ("min(1)", "min() takes 2 to 8 arguments, got 1"),
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


@pytest.mark.parametrize(
    ("text", "en", "zh"),
    [
        ("sqrt(1, 2)", "sqrt() takes 1 argument, got 2", "sqrt() 需要 1 个参数，实际给了 2 个"),
        ("log()", "log() takes 1 to 2 arguments, got 0", "log() 需要 1 到 2 个参数，实际给了 0 个"),
    ],
)
def test_a_wrong_number_of_arguments_is_said_in_good_grammar(text, en, zh):
    with pytest.raises(FormulaError) as caught:
        parse_formula(text, NAMES)
    assert (caught.value.message.get("en"), caught.value.message.get("zh")) == (en, zh)


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


# --- bounds on size and time (issue 8) --------------------------------------------------------


def refused(text, reason, column=None, names=NAMES, definitions=None, **params):
    started = time.perf_counter()
    with pytest.raises(FormulaError) as caught:
        parse_formula(text, names, definitions).evaluate(params)
    assert time.perf_counter() - started < 0.1
    assert reason in caught.value.reason, str(caught.value)
    if column is not None:
        assert caught.value.column == column, str(caught.value)
    assert "\n" not in str(caught.value)
    return caught.value


def test_exact_values_are_bounded_to_4096_bits():
    assert value("10**1233") == 10**1233
    refused("10**1234", "value too large: 4100 bits (limit 4096)", column=3)
    refused("10**1233 * 10", "value too large", column=10)
    refused("2**-4096", "power too large", column=2)
    refused("1.000001**(10**7)", "power too large: its exact value needs about 190000001 bits")
    refused("(1+1/10**400)**999", "power too large", column=14)
    refused("psi**16", "power too large", column=4, psi=10**400)
    refused("psi", "the value of psi: value too large", column=1, psi=2**5000)
    assert value("1**(10**1000) + (-1)**(10**400+1) + 0**(10**400)") == 0


def test_decimal_exponents_are_bounded_before_the_power_of_ten_is_computed():
    assert value("1e1233") == 10**1233 and value("1e-1233") == Fraction(1, 10**1233)
    refused("1e1234", "decimal exponent 1234 is too large (limit 1233)", column=1)
    refused("2 + 1e99999999", "decimal exponent 99999999 is too large", column=5)
    for bad in ("1e99999999", "-1e-99999999", 10**5000, "1" * 600):
        with pytest.raises(FormulaError):
            parse_number(bad)
    assert parse_number("3/8") == Fraction(3, 8) and parse_number(1e308) == 10**308


def test_a_parameter_is_raised_to_at_most_the_16th_power_once_powers_fold():
    assert value("(psi**4)**4", psi=3) == 3**16
    assert value("psi**8 * n_d**16", psi=1, n_d=2) == 2**16
    refused("(psi**4)**5", "psi is raised to the power 20 here", column=9)
    refused("(((((psi**16)**16)**16)**16)**16)", "psi is raised to the power 256", column=14)
    refused("psi**16 * psi", "psi is raised to the power 17", column=9)
    ddp = parse_formula("psi**16", NAMES)
    refused("ddp * psi", "psi is raised to the power 17", definitions={"ddp": ddp})


def test_card_formulas_that_use_each_other_cannot_multiply_the_work():
    definitions = {"d0": parse_formula("psi + n_d", NAMES)}
    for i in range(1, 12):
        text = " + ".join([f"d{i - 1}"] * 4)
        try:
            definitions[f"d{i}"] = parse_formula(text, NAMES, definitions)
        except FormulaError as exc:
            assert "more than 2000 elements once card formulas are substituted" in exc.reason
            break
    else:
        raise AssertionError("a chain of definitions grew without limit")


def test_irrational_values_are_decided_exactly_or_refused():
    assert value("pow2ceil(sqrt(2))") == 2
    assert value("ceil(sqrt(10**400 + 1))") == 10**200 + 1
    assert value("floor(sqrt(10**400 - 1))") == 10**200 - 1
    assert value("max(1, 2**(1/10**400))") == 1  # 1 + 6.9e-401 to 30 digits
    assert value("min(psi, sqrt(2))", psi=1) == 1
    assert value("sqrt(psi)", psi=Fraction(9, 4)) == Fraction(3, 2)
    assert value("log(8, 2)") == 3 and value("log(8, 4)") == Fraction(3, 2)
    assert value("ceil(log(n_d, 2))", n_d=64) == 6 and value("log(1)") == 0
    assert value("2217061098452325098602089**-0.23543") == Fraction(
        185469954364004101855928842847, 10**35
    )
    assert abs(float(value("log(psi)", psi=10**9)) - 20.72326583694641) < 1e-12
    refused("ceil(sqrt(2)**2)", "ceil() cannot decide", column=1)


def test_undefined_and_non_real_values_are_formula_errors():
    refused("min(sqrt(-1), 1)", "the square root of a negative number (-1) is not real", 5)
    refused("max(log(0), 1)", "log of 0 is undefined", column=5)
    refused("log(2, 0)", "log base 0 is undefined", column=8)
    refused("log(2, 1)", "log base 1 is undefined", column=8)
    refused("log(psi, n_d)", "log base 1 is undefined", column=10, psi=2, n_d=1)
    refused("log(psi)", "log of -1 is undefined", column=1, psi=-1)
    refused("(-8)**(1/3)", "a negative number (-8) to a fractional power is not real")
    refused("psi**0.5", "not real", psi=-4)
    refused("0**-1", "division by zero", column=2)
    refused("1/(sqrt(2)*sqrt(2) - 2)", "cannot be told apart from zero", column=2)


@pytest.mark.parametrize(
    ("text", "params", "zh"),
    [
        ("min(sqrt(-1), 1)", {}, "负数（-1）的平方根不是实数"),
        ("max(log(0), 1)", {}, "0 的对数没有定义（参数必须为正）"),
        ("(-8)**(1/3)", {}, "负数（-8）的分数次幂不是实数"),
        ("1/(sqrt(2)*sqrt(2) - 2)", {}, "除数无法与零区分开"),
        ("ceil(sqrt(2)**2)", {}, "ceil() 无法判断：值与某个整数过于接近"),
        ("1.000001**(10**7)", {}, "幂太大：其精确值约需 190000001 位（上限为 4096）"),
        ("log(psi)", {"psi": True}, "psi 的值不是数字"),
    ],
)
def test_a_value_that_cannot_be_computed_is_explained_in_chinese_too(text, params, zh):
    with pytest.raises(FormulaError) as caught:
        parse_formula(text, NAMES).evaluate({"psi": 1, "n_d": 1, **params})
    assert caught.value.message.get("zh") == zh
    assert caught.value.message.get("en") == caught.value.reason  # str() keeps the English


def test_formulas_are_plain_ascii_and_numbers_do_not_run_into_names():
    refused("ｐｓｉ", "character 'ｐ' (U+FF50) is not allowed", column=1)
    refused("psi\u200b+1", "(U+200B) is not allowed", column=4)
    refused("psi + \\\n1", "(U+005C) is not allowed", column=7)
    refused("2psi", "a number runs into a name", column=2)
    refused("1if 1 else 2", "a number runs into a name", column=2)
    refused("(" * 101 + "1" + ")" * 101, "brackets are nested deeper than 100 levels", 101)
    refused("psi\t+ 1", "character '\\t' (U+0009) is not allowed", column=4)
    refused("(psi\r\n+ 1)", "character '\\r' (U+000D) is not allowed", column=5)
    assert value("(psi\n+ n_d)", psi=1, n_d=2) == 3


def test_errors_point_at_the_operator_and_into_card_formulas():
    refused("psi + 2**(10**9)", "power too large", column=8)
    ratio = parse_formula("psi / n_d", NAMES)
    error = refused(
        "1 + ratio", "division by zero", column=5, definitions={"ratio": ratio}, psi=1, n_d=0
    )
    assert "(in 'ratio' at its column 5)" in error.reason
    refused("  psi +", "syntax error", column=3)  # columns count the leading spaces
