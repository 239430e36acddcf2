"""Kubernetes resource quantities, parsed exactly.

A quantity is a decimal number with an optional suffix: binary (Ki, Mi, Gi, Ti, Pi, Ei), decimal
(n, u, m, k, M, G, T, P, E) or a decimal exponent (e3, E-2). Values are kept as exact
fractions; conversion to the integers the scheduler works with follows kube-scheduler: cpu in
millicores, every other resource in its base unit, both rounded up (``MilliValue``/``Value``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from placer.models.integers import shown

__all__ = ["CPU", "QuantityError", "format_quantity", "parse_quantity", "to_units"]

CPU = "cpu"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_NUMBER = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(.*)$", re.ASCII | re.DOTALL)
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$", re.ASCII)
# More digits than any quantity the API server keeps (int64 and 9 decimals, with room); Python's
# int() refuses more than 4,300 anyway.
_MAX_DIGITS = 64


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or one that is negative."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity into an exact non-negative fraction of its base unit."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        number = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a finite quantity")
        number = Fraction(repr(value))
    else:
        number = _parse_string(value)
    if number < 0:
        raise QuantityError(f"{value!r} is negative")
    return number


def _parse_string(text: str) -> Fraction:
    s = text.strip()
    match = _NUMBER.match(s)
    if not match:
        raise QuantityError(f"{text!r} is not a quantity")
    sign, digits, suffix = match.groups()
    if len(digits) > _MAX_DIGITS:
        raise QuantityError(f"{shown(text)} has more than {_MAX_DIGITS} digits")
    number = Fraction(digits)
    if sign == "-":
        number = -number
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exp = _EXPONENT.match(suffix)
    if exp:
        power = int(exp.group(1)) if len(exp.group(1)) <= 4 else 10**4
        if abs(power) > 30:
            raise QuantityError(f"{shown(text)}: exponent out of range")
        return number * Fraction(10) ** power
    raise QuantityError(f"{text!r} has an unknown suffix {suffix!r}")


def to_units(resource: str, value: Fraction) -> int:
    """The integer kube-scheduler uses: millicores for cpu, base units otherwise, rounded up."""
    scaled = value * 1000 if resource == CPU else value
    return math.ceil(scaled)


def format_quantity(resource: str, units: int) -> str:
    """Human form of an integer in scheduler units (the inverse of :func:`to_units`)."""
    if resource == CPU:
        return f"{units // 1000}" if units % 1000 == 0 else f"{units}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        sizes = (("Ti", 2**40), ("T", 10**12), ("Gi", 2**30), ("G", 10**9), ("Mi", 2**20), ("M", 10**6))
        for suffix, size in sorted(sizes, key=lambda s: -s[1]):
            if units >= size and units % size == 0:
                return f"{units // size}{suffix}"
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20)):
            if units >= size:
                return f"{units / size:.1f}{suffix}"
    return str(units)
