"""Display units: GB is 10**9 bytes, GiB 2**30; rounding is exact and half-to-even."""

from fractions import Fraction

import pytest

from app.domain.units import UnitError, format_count, format_quantity, format_value, relative_gap


def test_bytes_in_decimal_and_binary_units():
    assert format_quantity(Fraction(1_120 * 10**9), "GB") == "1120 GB"
    assert format_quantity(Fraction(1_120 * 10**9), "GiB", 1) == "1043.1 GiB"
    assert format_quantity(Fraction(201_250_000_000), "GB", 2) == "201.25 GB"
    assert format_quantity(Fraction(120 * 10**9), "TB", 2) == "0.12 TB"


def test_paper_figures_round_as_printed():
    psi, n_d = Fraction(7_500_000_000), 64
    assert format_quantity(16 * psi, "GB", 1) == "120 GB"
    assert format_quantity(4 * psi + 12 * psi / n_d, "GB", 1) == "31.4 GB"
    assert format_quantity(2 * psi + 14 * psi / n_d, "GB", 1) == "16.6 GB"
    assert format_quantity(16 * psi / n_d, "GB", 2) == "1.88 GB"


def test_ratios_times_and_counts():
    assert format_quantity(Fraction(3, 2), "x", 2) == "1.5×"
    assert format_quantity(Fraction(1, 4), "%", 1) == "25%"
    assert format_quantity(Fraction(42, 1000), "ms", 1) == "42 ms"
    assert format_quantity(Fraction(14), "GPUs", 0) == "14 GPUs"
    assert format_quantity(Fraction(1), "GPUs", 0) == "1 GPU"
    assert format_count(Fraction(70 * 10**9)) == "70B"
    assert format_count(Fraction(1_300_000_000)) == "1.3B"
    assert format_count(Fraction(350 * 10**6)) == "350M"
    assert format_value(Fraction(100 * 10**9), "GB/s") == "100 GB/s"
    assert format_value(Fraction(16), None) == "16"


def test_half_to_even_and_no_negative_zero():
    assert format_quantity(Fraction(125, 100), "1", 1) == "1.2"
    assert format_quantity(Fraction(135, 100), "1", 1) == "1.4"
    assert format_quantity(Fraction(-1, 1000), "1", 1) == "0"


def test_relative_gap():
    assert relative_gap(Fraction(100), Fraction(99)) == Fraction(1, 100)
    assert relative_gap(Fraction(0), Fraction(0)) == 0


def test_unknown_unit():
    with pytest.raises(UnitError, match="unknown unit 'GiGaB'"):
        format_quantity(Fraction(1), "GiGaB")


def test_significant_figures_never_round_digits_before_the_point():
    from app.domain.units import format_significant

    assert format_significant(Fraction("17.0625"), 3) == "17.1"
    assert format_significant(Fraction("0.040625"), 3) == "0.0406"
    assert format_significant(Fraction("2411.719"), 3) == "2412"  # no spurious decimals
    assert format_significant(Fraction(70), 3) == "70.0"
    assert format_significant(Fraction("9.996"), 3) == "10.0"  # rounding up adds a digit
    assert format_significant(Fraction("31.4375"), 3) == "31.4"  # the paper's 7.5B ZeRO-1


def test_choices_drop_only_the_zeros_that_all_of_them_carry():
    from app.domain.units import common_figures

    assert common_figures([Fraction(6), Fraction(12), Fraction(3, 2), Fraction(48)], 3) == 2
    assert common_figures([Fraction(6), Fraction(12), Fraction(9, 4)], 3) == 3  # 2.25
    assert common_figures([Fraction(1120), Fraction(140)], 3) == 1


def test_a_readable_unit_for_the_values_together():
    from app.domain.units import readable_unit

    gb = 10**9
    assert readable_unit([Fraction(40_625_000)], "GB", 3) == "MB"  # not 0.0406 GB
    assert readable_unit([Fraction(1120 * gb)], "GB", 3) == "GB"  # 1120 GB stays
    assert readable_unit([Fraction(x * gb) for x in (5250, 22400, 2800, 3500)], "GB", 3) == "TB"
    times = [Fraction(x, 1000) for x in (21875, 8203, 1367, 684)]  # seconds
    assert readable_unit(times, "ms", 3) == "s"  # 21.9 s ... 0.684 s, not 21875 ms
    assert readable_unit([Fraction(127, 100_000)], "s", 3) == "ms"  # 1.27 ms, not 0.00127 s
    assert readable_unit([Fraction(3, 2)], "x", 3) == "x"  # units without a family stay


def test_chinese_counts_and_gpus():
    from app.domain.units import format_count_words, format_in, format_readable

    assert format_count_words(Fraction(20_312_500), "zh") == "2031 万"  # not 0.2031 亿
    assert format_count_words(Fraction(84 * 10**11), "zh") == "8.4 万亿"  # not 84000 亿
    assert format_count_words(Fraction(210 * 10**9), "zh") == "2100 亿"
    assert format_count_words(Fraction(210 * 10**9), "en") == "210 billion"
    assert format_count_words(Fraction(20_312_500), "en") == "20.31 million"
    assert format_in(Fraction(6), "GPUs", 0, "zh") == "6 张 GPU"
    assert format_in(Fraction(6), "GPUs", 0, "en") == "6 GPUs"
    assert format_readable(Fraction(1), "GPUs", 3, "en") == "1 GPU"
