"""Quantity and semver parsing, comparison and canonical rendering."""

from fractions import Fraction

import pytest

from structured_allocator.core.quantity import QuantityError, nano_units, parse_quantity
from structured_allocator.core.semver import SemverError, parse_semver


@pytest.mark.parametrize(
    ("text", "value", "canonical"),
    [
        ("0", Fraction(0), "0"),
        ("80Gi", Fraction(80 * 1024**3), "80Gi"),
        ("1.5Gi", Fraction(3 * 1024**3, 2), "1536Mi"),
        ("1000Mi", Fraction(1000 * 1024**2), "1000Mi"),
        ("512", Fraction(512), "512"),
        ("1024", Fraction(1024), "1024"),
        ("0.5", Fraction(1, 2), "500m"),
        ("1000", Fraction(1000), "1k"),
        ("1500", Fraction(1500), "1500"),
        ("2M", Fraction(2 * 10**6), "2M"),
        ("1e3", Fraction(1000), "1e3"),
        ("1E", Fraction(10**18), "1E"),
        ("-5m", Fraction(-5, 1000), "-5m"),
        ("0.5Ki", Fraction(512), "512"),
        ("1.0000000001", Fraction(1000000001, 10**9), "1000000001n"),
    ],
    ids=lambda v: str(v),
)
def test_parse_and_canonical(text: str, value: Fraction, canonical: str) -> None:
    q = parse_quantity(text)
    assert q.value == value
    assert q.canonical() == canonical


@pytest.mark.parametrize("text", ["", "Gi", "1.2.3", "1Qi", "abc", "1 Gi"])
def test_invalid_quantities(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_compare_and_arithmetic() -> None:
    a, b = parse_quantity("1Gi"), parse_quantity("1024Mi")
    assert a.cmp(b) == 0
    assert parse_quantity("1G").cmp(a) < 0
    assert a.add(b).canonical() == "2Gi"
    assert a.sub(1).value == 1024**3 - 1
    assert parse_quantity("-1").sign() == -1


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1.2.3", "1.2.3", 0),
        ("1.2.3", "1.10.0", -1),
        ("2.0.0", "1.99.99", 1),
        ("1.0.0-alpha", "1.0.0", -1),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta", -1),
        ("1.0.0-beta.11", "1.0.0-beta.2", 1),
        ("1.0.0+build1", "1.0.0+build2", 0),
    ],
)
def test_semver_precedence(a: str, b: str, expected: int) -> None:
    assert parse_semver(a).compare(parse_semver(b)) == expected


@pytest.mark.parametrize("text", ["1.0", "v1.0.0", "01.0.0", "1.0.0-01", ""])
def test_semver_strict_rejects(text: str) -> None:
    with pytest.raises(SemverError):
        parse_semver(text)


def test_semver_normalize() -> None:
    assert str(parse_semver("v1.2", normalize=True)) == "1.2.0"
    assert str(parse_semver("01.02.03", normalize=True)) == "1.2.3"


@pytest.mark.parametrize(("text", "nano"), [
    ("1", 10**9), ("1n", 1), ("1.5Gi", 1536 * 2**20 * 10**9), ("0.1Ki", 102_400_000_000), ("-2m", -2_000_000),
    ("1e-12", 1), ("3E", 3 * 10**27),
])
def test_nano_units_of_parsed_quantities_are_exact(text: str, nano: int) -> None:
    assert nano_units(parse_quantity(text).value) == nano


def test_nano_units_refuses_a_value_finer_than_a_nano_unit() -> None:
    with pytest.raises(ValueError, match="nano units"):
        nano_units(Fraction(1, 3))
