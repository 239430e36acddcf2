"""Where a batch ends: the one rule the controller's batcher and ``placer solve --batch-size`` share.

Pods in arrival order, grouped into units (a gang's pods, or one pod alone). Units join the batch
while it holds fewer than ``size`` pods; a gang is never split, so the batch may end a little past
``size``. A gang of more than ``size`` pods is a decision of its own: taken alone when it comes
first, and otherwise left for the next batch while the smaller units behind it go ahead, so it
never holds them back.

Gangs held to one topology domain (``rivals``: Kubernetes 1.37 ``schedulingConstraints.topology``)
compete for the domains, and one group at a time gives up groups that a joint choice places (three
gangs of 4, 6 and 6 pods on racks of 10 and 6 slots). So a batch that holds such a gang goes on
taking the ones queued behind it, whole and in order, each one that still fits within
``rival_size`` pods (a gang larger than ``size`` too); the other pods behind them wait for the next
batch as usual.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

__all__ = ["cut_batch"]


def cut_batch(
    keys: Sequence[str],
    size: int,
    together: Mapping[str, str] | None = None,
    *,
    rivals: Collection[str] = (),
    rival_size: int = 0,
) -> list[str]:
    """The next batch among ``keys`` (oldest first); ``together``: pod key -> its unit (gang);
    ``rivals``: the units held to one topology domain, which a batch holding one of them takes
    together up to ``rival_size`` pods."""
    together = together or {}
    units: dict[str, list[str]] = {}
    for key in keys:
        units.setdefault(together.get(key, f"\0{key}"), []).append(key)
    out: list[str] = []
    taken: set[str] = set()
    for unit, members in units.items():
        if len(out) >= size:
            break
        if len(members) > size:
            if not out:
                out, taken = list(members), {unit}
                break
            continue
        out += members
        taken.add(unit)
    if not taken & set(rivals):
        return out
    for unit, members in units.items():
        if unit not in taken and unit in rivals and len(out) + len(members) <= rival_size:
            out += members
    return out
