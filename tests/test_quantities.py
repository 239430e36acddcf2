"""Quantities: Kubernetes suffixes parse exactly; conversion rounds up like kube-scheduler."""

from fractions import Fraction

import pytest

from placer.models import QuantityError, format_quantity, parse_quantity, to_units


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1Gi", Fraction(2**30)),
        ("1G", Fraction(10**9)),
        ("1e3", Fraction(1000)),
        ("1E-2", Fraction(1, 100)),
        ("1.5Ki", Fraction(1536)),
        ("7.5", Fraction(15, 2)),
        ("100n", Fraction(1, 10**7)),
        ("3M", Fraction(3 * 10**6)),
        ("2Ei", Fraction(2 * 2**60)),
        (" 4 ", Fraction(4)),
        (3, Fraction(3)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_a_kubernetes_quantity_parses_exactly(text: str | int | float, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1x", "1Gb", "-1", "1.2.3", "--1", "1e99", "Mi"])
def test_a_malformed_or_negative_quantity_is_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True])
def test_non_finite_numbers_are_refused(value: float) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_cpu_converts_to_millicores_rounding_up_and_others_to_units() -> None:
    assert to_units("cpu", parse_quantity("7.5")) == 7500
    assert to_units("cpu", parse_quantity("1n")) == 1
    assert to_units("memory", parse_quantity("1.5")) == 2
    assert to_units("memory", parse_quantity("1Gi")) == 2**30


def test_format_prefers_the_largest_exact_suffix() -> None:
    assert format_quantity("cpu", 15000) == "15"
    assert format_quantity("cpu", 7500) == "7500m"
    assert format_quantity("memory", 10 * 10**9) == "10G"
    assert format_quantity("memory", 64 * 2**30) == "64Gi"
    assert format_quantity("pods", 110) == "110"
