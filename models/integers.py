"""Integers written as text by someone placer does not trust (labels, annotations, Gt/Lt values).

``int()`` alone is not a reader for them: it takes Unicode digits (``"٣"``, while ``"²"`` passes
``isdigit()`` and then fails), spaces and underscores, and raises ValueError on more than 4,300
digits. ``parse_int`` reads what Go's ``strconv.ParseInt(text, 10, 64)`` reads (an optional sign,
ASCII digits) within the caller's bounds, and returns None for anything else, never raising.
"""

from __future__ import annotations

import re

__all__ = ["INT64", "parse_int", "shown"]

INT64 = (-(2**63), 2**63 - 1)
_INTEGER = re.compile(r"([+-]?)0*([0-9]*)", re.ASCII)


def parse_int(text: str, *, low: int = INT64[0], high: int = INT64[1], signed: bool = True) -> int | None:
    """The integer ``text`` spells in base 10, or None when it is not one within [low, high]
    (``signed`` False: no ``+``/``-`` either)."""
    m = _INTEGER.fullmatch(text)
    if m is None or text in ("", "+", "-") or (m.group(1) and not signed):
        return None
    digits = m.group(2)
    if len(digits) > max(len(str(abs(low))), len(str(abs(high)))):  # before int(): no digit limit
        return None
    value = int(m.group(1) + digits) if digits else 0
    return value if low <= value <= high else None


def shown(text: str, limit: int = 60) -> str:
    """A value quoted in a message, cut short: a hostile one may be megabytes long."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"
