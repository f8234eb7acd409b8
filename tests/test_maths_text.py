"""Formulas as text: the plain line a ``<title>`` or an ``<option>`` shows, and the words that
name a ``<math>`` element in English and Chinese. Golden strings written by hand from the card's
LaTeX."""

from __future__ import annotations

import pytest

from app.maths_text import plain, spoken
from app.rendering import latex_to_mathml, render_inline, render_plain, render_quantity

# (LaTeX as the card writes it, plain text, English words, Chinese words)
FORMULAS = [
    (r"16\Psi", "16Ψ", "16 Psi", "16 Psi"),
    (
        r"16\Psi \to \frac{16\Psi}{N_d}",
        "16Ψ → 16Ψ/N_d",
        "16 Psi to 16 Psi over N sub d",
        "16 Psi 变为 N 下标 d 分之 16 Psi",
    ),
    (
        r"2\Psi + \frac{2\Psi + 12\Psi}{N_d}",
        "2Ψ + (2Ψ + 12Ψ)/N_d",
        "2 Psi plus the fraction with numerator 2 Psi plus 12 Psi and denominator N sub d",
        "2 Psi 加 分子为 2 Psi 加 12 Psi、分母为 N 下标 d 的分数",
    ),
    (
        r"\frac{(2 + K)\Psi}{N_d}",
        "(2 + K)Ψ/N_d",
        "open bracket 2 plus K close bracket Psi over N sub d",
        "N 下标 d 分之 左括号 2 加 K 右括号 Psi",
    ),
    (
        r"2\Psi\left(1 - \frac{1}{N_d}\right)",
        "2Ψ(1 − 1/N_d)",
        "2 Psi open bracket 1 minus 1 over N sub d close bracket",
        "2 Psi 左括号 1 减 N 下标 d 分之 1 右括号",
    ),
    (
        r"\left(\frac{N_d - 1}{N_d}\right)^2",
        "((N_d − 1)/N_d)²",
        "open bracket the fraction with numerator N sub d minus 1 and denominator N sub d "
        "close bracket squared",
        "左括号 分子为 N 下标 d 减 1、分母为 N 下标 d 的分数 右括号 的平方",
    ),
    (
        r"3\Psi / 2\Psi = 1.5\times",
        "3Ψ/2Ψ = 1.5×",
        "3 Psi divided by 2 Psi equals 1.5 times",
        "3 Psi 除以 2 Psi 等于 1.5 倍",
    ),
    (
        r"\frac{18\Psi}{t \cdot p \cdot d}",
        "18Ψ/(t · p · d)",
        "the fraction with numerator 18 Psi and denominator t times p times d",
        "分子为 18 Psi、分母为 t 乘 p 乘 d 的分数",
    ),
    (
        r"2^{30}/10^9 \approx 1.074",
        "2³⁰/10⁹ ≈ 1.074",
        "2 to the power 30 divided by 10 to the power 9 is approximately 1.074",
        "2 的 30 次方 除以 10 的 9 次方 约等于 1.074",
    ),
    (
        r"N_d \ge \frac{16\Psi}{M}",
        "N_d ≥ 16Ψ/M",
        "N sub d is at least 16 Psi over M",
        "N 下标 d 大于等于 M 分之 16 Psi",
    ),
    (
        r"\lceil \log_2 N_d \rceil",
        "⌈log₂N_d⌉",
        "the ceiling of log sub 2 N sub d end of ceiling",
        "向上取整 log 下标 2 N 下标 d 取整结束",
    ),
]


@pytest.mark.parametrize(("latex", "text", "en", "zh"), FORMULAS)
def test_a_formula_in_plain_text_and_in_words(latex, text, en, zh):
    assert plain(latex) == text
    assert spoken(latex, "en") == en
    assert spoken(latex, "zh") == zh


def test_latex_the_converter_cannot_read_stays_as_written():
    assert plain(r"\frac{1}{") == r"\frac{1}{"
    assert spoken(r"\frac{1}{", "zh") == r"\frac{1}{"


def test_a_text_with_math_in_plain_text_for_titles_and_options():
    assert (
        render_plain(r"ZeRO-3: 1.5× DDP's communication for $16\Psi \to \frac{16\Psi}{N_d}$")
        == "ZeRO-3: 1.5× DDP's communication for 16Ψ → 16Ψ/N_d"
    )
    assert render_plain(r"把 $M$ 当成了 $\Psi$ 个元素") == "把 M 当成了 Ψ 个元素"
    assert render_plain(r"Divided by $N_d$ twice") == "Divided by N_d twice"
    assert render_plain(r"wrap it in `no_sync`, costs \$5") == "wrap it in no_sync, costs $5"


def test_every_formula_is_named_by_its_words_in_the_pages_language():
    rendered = str(render_inline(r"The bill: $16\Psi$ under DDP", "zh"))
    assert rendered.startswith('The bill: <math aria-label="16 Psi" xmlns=')
    assert 'aria-label="N 下标 d 分之 16 Psi"' in str(
        latex_to_mathml(r"\frac{16\Psi}{N_d}", lang="zh")
    )
    assert 'aria-label="16 Psi over N sub d"' in str(latex_to_mathml(r"\frac{16\Psi}{N_d}"))
    assert 'aria-label="1.5 倍"' in str(render_quantity("1.5×", "zh"))
    assert 'aria-label="332.5 GB"' in str(render_quantity("332.5 GB", "en"))


def test_the_words_are_escaped_in_the_attribute():
    rendered = str(latex_to_mathml('"x" \\& y'))
    assert rendered.startswith('<math aria-label="&#34; x &#34; &amp; y" xmlns=')
