"""The pods still waiting behind a batch as the engine reads them: all of them, or beyond
``MAX_READ`` a fixed-seed sample (the same queue gives the same sample) that stands for them
all, each counted ``scale`` times. Read by the backlog's aim (``backlog``) and by the domains of
workloads held to one domain (``held``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placer.models import Pod

__all__ = ["MAX_READ", "read_waiting"]

# Waiting pods read per batch: beyond, a sample of this many stands for them all.
MAX_READ = 512


def read_waiting(waiting: Sequence[Pod]) -> tuple[Sequence[Pod], float]:
    """The pods read (in queue order) and how many waiting pods each stands for."""
    if len(waiting) <= MAX_READ:
        return waiting, 1.0
    drawn = np.random.default_rng(len(waiting)).choice(len(waiting), MAX_READ, replace=False)
    return [waiting[i] for i in sorted(drawn.tolist())], len(waiting) / MAX_READ
