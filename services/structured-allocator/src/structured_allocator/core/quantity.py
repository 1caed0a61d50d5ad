"""Kubernetes ``resource.Quantity``: parse, compare, exact arithmetic and canonical formatting.

Values are kept as exact :class:`fractions.Fraction` numbers, so comparisons and sums never lose
precision. Parsing follows ``k8s.io/apimachinery/pkg/api/resource``:

    <quantity>  ::= <signedNumber><suffix>
    <suffix>    ::= Ki | Mi | Gi | Ti | Pi | Ei                (BinarySI)
                  | n | u | m | "" | k | M | G | T | P | E     (DecimalSI)
                  | e<signedNumber> | E<signedNumber>          (DecimalExponent)

Precision finer than ``1n`` is rounded up (away from zero), as upstream does. :meth:`Quantity.canonical`
renders the value the way the API server serialises a quantity it has parsed (``1.5Gi`` → ``1536Mi``,
``0.5`` → ``500m``, ``1000`` → ``1k``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "BINARY_SI", "DECIMAL_EXPONENT", "DECIMAL_SI", "Quantity", "QuantityError", "nano_units",
    "parse_quantity",
]

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX_BY_EXP = {v: k for k, v in _BINARY.items()}
_NANO = Fraction(1, 10**9)

_RE = re.compile(r"^([+-]?)(\d*)(?:\.(\d*))?(.*)$")
_EXP_RE = re.compile(r"^[eE]([+-]?\d+)$")


class QuantityError(ValueError):
    """A string is not a valid Kubernetes quantity."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity value plus the format it was written in (used only for rendering)."""

    value: Fraction
    format: str = DECIMAL_SI

    # -- comparisons and arithmetic (exact) -------------------------------------------------------
    def cmp(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def add(self, other: Quantity | int) -> Quantity:
        v = other.value if isinstance(other, Quantity) else Fraction(other)
        return Quantity(self.value + v, self.format)

    def sub(self, other: Quantity | int) -> Quantity:
        v = other.value if isinstance(other, Quantity) else Fraction(other)
        return Quantity(self.value - v, self.format)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def ceil_int(self) -> int:
        """Upstream ``Quantity.Value()``: the value rounded up to an integer."""
        return math.ceil(self.value)

    # -- rendering ----------------------------------------------------------------------------------
    def canonical(self) -> str:
        """The canonical string the API server would serialise for this quantity."""
        return _canonical(self.value, self.format)

    def __str__(self) -> str:
        return self.canonical()


def parse_quantity(text: str) -> Quantity:
    """Parse a quantity string; raises :class:`QuantityError` on malformed input."""
    return _parse(text)


def nano_units(value: Fraction) -> int:
    """A quantity's value as a whole number of ``1n``, for sums and comparisons in plain integers where
    a :class:`~fractions.Fraction` costs microseconds each (the allocator's counters and consumable
    capacity). Exact for every parsed value (parsing rounds finer precision up to ``1n``) and for sums
    and policy roundings of them (multiples of ``1m`` or whole numbers)."""
    scaled = value / _NANO
    if scaled.denominator != 1:
        raise ValueError(f"{value} is not a whole number of nano units")
    return scaled.numerator


@lru_cache(maxsize=4096)
def _parse(text: str) -> Quantity:
    if not isinstance(text, str) or not text.strip():
        raise QuantityError(f"quantities must match the regular expression: {text!r}")
    s = text.strip()
    m = _RE.match(s)
    if m is None:
        raise QuantityError(f"invalid quantity {text!r}")
    sign, whole, frac, suffix = m.group(1), m.group(2), m.group(3), m.group(4)
    if not whole and not frac:
        raise QuantityError(f"invalid quantity {text!r}: no digits")
    digits = (whole or "") + (frac or "")
    number = Fraction(int(digits or "0"), 10 ** len(frac or ""))
    if suffix in _BINARY:
        fmt = BINARY_SI
        number *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        fmt = DECIMAL_SI
        number *= Fraction(10) ** _DECIMAL[suffix]
    else:
        em = _EXP_RE.match(suffix)
        if em is None:
            raise QuantityError(f"invalid quantity {text!r}: unknown suffix {suffix!r}")
        fmt = DECIMAL_EXPONENT
        number *= Fraction(10) ** int(em.group(1))
    if sign == "-":
        number = -number
    return Quantity(_round_nano(number), fmt)


def _round_nano(v: Fraction) -> Fraction:
    scaled = v / _NANO
    if scaled.denominator == 1:
        return v
    rounded = math.ceil(scaled) if v > 0 else math.floor(scaled)
    return Fraction(rounded) * _NANO


def _canonical(value: Fraction, fmt: str) -> str:
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mag = -value if value < 0 else value
    if fmt == BINARY_SI and (mag < 1024 or mag.denominator != 1):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        n = int(mag)
        exp = 0
        while exp < 6 and n % 1024 == 0:
            n //= 1024
            exp += 1
        return f"{sign}{n}{_BINARY_SUFFIX_BY_EXP.get(exp, '')}"
    # Decimal: mantissa * 10**exp with the exponent a multiple of 3 and an integer mantissa.
    exp = -9
    mant = mag * 10**9
    assert mant.denominator == 1, "values are kept at nano precision"
    n = int(mant)
    while n % 1000 == 0:
        n //= 1000
        exp += 3
    if fmt == DECIMAL_EXPONENT:
        return f"{sign}{n}" + (f"e{exp}" if exp else "")
    if exp > 18:
        n *= 10 ** (exp - 18)
        exp = 18
    return f"{sign}{n}{_DECIMAL_SUFFIX_BY_EXP[exp]}"
