"""Times as the API server writes them (``metav1.Time``: RFC 3339, e.g. ``2025-01-02T03:04:05Z``)."""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["parse_timestamp"]

_RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})", re.IGNORECASE | re.ASCII
)


def parse_timestamp(text: str) -> float | None:
    """Seconds since the epoch, or None when ``text`` is not an RFC 3339 time."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        return None
    stamp, fraction, zone = m.groups()
    zone = "+00:00" if zone.upper() == "Z" else zone
    try:
        when = dt.datetime.fromisoformat(stamp + zone)
    except ValueError:  # 2025-02-30 and the like
        return None
    return when.timestamp() + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)
