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
