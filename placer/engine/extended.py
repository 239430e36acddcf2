"""Never fewer pods, nor fewer GPUs for as many pods, than kube-scheduler's answer, for batches with
extended resources.

``dominance`` holds a batch no worse than kube-scheduler's answer on the balance measures, which
do not see GPUs and other extended resources; a batch asking for them is held to what it places
instead (issue 29), in the objective's order (README "Objective": pods per key first): an answer that places
more pods per priority key than the other answer (compared from the highest key down, as the
placed level ranks them) stays, whatever it allocates; one that places as many stays when it
allocates at least as much of every extended resource it asks for, GPUs counted together in
milli-GPU (``placer.io/gpu-milli``, or 1000 per ``nvidia.com/gpu``: fractions included). Any
other answer is replaced by the other one. A pod is never traded for device allocation: a batch
of 1.5 GPUs in two pods beats one pod of 2 GPUs. The rule also holds batches without extended
resources that the strategy places for GPUs (``held_by_extended``): pods per key only.
"""

from __future__ import annotations

import numpy as np

from placer.engine.batch import Batch
from placer.engine.dominance import placed_per_key, places_at_least
from placer.engine.objectives.fragmentation import GPU, GPU_MILLI, MILLI, Fragmentation
from placer.engine.scoring import Scorer
from placer.engine.unplaced import Counts
from placer.metrics import BALANCE_RESOURCES
from placer.models import POD_COUNT, Pod

__all__ = [
    "asks_extended",
    "extended_allocated",
    "extended_requests",
    "held_by_extended",
    "held_to_other",
    "is_extended",
]

_NATIVE = frozenset({*BALANCE_RESOURCES, POD_COUNT})


def is_extended(resource: str) -> bool:
    """An extended resource (GPUs and other devices): none of cpu, memory, ephemeral storage,
    pods, placer's bandwidth or hugepages."""
    return resource not in _NATIVE and not resource.startswith("hugepages-")


def asks_extended(pod: Pod) -> bool:
    return any(is_extended(r) and v > 0 for r, v in pod.requests.items())


def extended_requests(batch: Batch) -> list[str]:
    """The extended resources the batch's pods ask for."""
    snap = batch.snapshot
    asked = np.zeros(len(snap.resources), dtype=bool)
    for g in batch.groups:
        asked |= g.vec > 0
    return [r for r, a in zip(snap.resources, asked.tolist(), strict=True) if a and is_extended(r)]


def held_by_extended(batch: Batch, scorer: Scorer) -> bool:
    """Whether this rule, not ``dominance``, holds the batch: it asks for extended resources, or
    its strategy places for GPUs (``Fragmentation``: a batch without GPUs on a cluster running
    GPU pods keeps off GPU nodes, which the balance measures would count against it)."""
    return bool(extended_requests(batch)) or isinstance(scorer.strategy, Fragmentation)


def extended_allocated(batch: Batch, counts: Counts, resources: list[str]) -> dict[str, int]:
    """What an answer allocates of ``resources``; GPUs as one entry ``placer.io/gpu-milli``."""
    cols = {r: batch.snapshot.column(r) for r in resources}
    out = dict.fromkeys((GPU_MILLI if r == GPU else r for r in resources), 0)
    for (gi, _), c in counts.items():
        vec = batch.groups[gi].vec
        for r, col in cols.items():
            if r == GPU and GPU_MILLI in cols:
                continue  # whole GPUs ask for their milli-GPU too
            out[GPU_MILLI if r == GPU else r] += c * int(vec[col]) * (MILLI if r == GPU else 1)
    return out


def held_to_other(batch: Batch, counts: Counts, other: Counts, resources: list[str]) -> tuple[Counts, bool]:
    """``counts`` when it places more pods per key than ``other``, or as many and at least as much
    of each of ``resources``; else ``other``. Also whether the answer changed."""
    mine, theirs = placed_per_key(batch, counts), placed_per_key(batch, other)
    if not places_at_least(theirs, mine):  # more pods: the first level decides, devices do not
        return counts, False
    have, want = extended_allocated(batch, counts, resources), extended_allocated(batch, other, resources)
    if places_at_least(mine, theirs) and all(have[r] >= want[r] for r in want):
        return counts, False
    return other, other != counts
