"""Where a batch ends: the one rule the controller's batcher and ``placer solve --batch-size`` share.

Pods in arrival order, grouped into units (a gang's pods, or one pod alone). Units join the batch
while it holds fewer than ``size`` pods; a gang is never split, so the batch may end a little past
``size``. A gang of more than ``size`` pods is a decision of its own: taken alone when it comes
first, and otherwise left for the next batch while the smaller units behind it go ahead, so it
never holds them back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["cut_batch"]


def cut_batch(keys: Sequence[str], size: int, together: Mapping[str, str] | None = None) -> list[str]:
    """The next batch among ``keys`` (oldest first); ``together``: pod key -> its gang."""
    together = together or {}
    units: dict[str, list[str]] = {}
    for key in keys:
        units.setdefault(together.get(key, f"\0{key}"), []).append(key)
    out: list[str] = []
    for unit in units.values():
        if len(out) >= size:
            break
        if len(unit) > size:
            if not out:
                return unit
            continue
        out += unit
    return out
