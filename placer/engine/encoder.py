"""Wires the constraint modules into a model: the one place that lists them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch
from placer.engine.constraints import capacity, domains, gangs, ports, quorums, symmetry, topology
from placer.engine.levels import Check, never_stop
from placer.engine.model import Model
from placer.engine.prefilter import fits
from placer.engine.scoring import Scorer

__all__ = ["BUILD_VARIABLES_PER_SECOND", "CONSTRAINTS", "build_seconds", "encode"]

# Placement variables a build makes per wall second at most. Measured on the reference machine
# (2 cores, unloaded, 2026-11-28): 88,000-97,000 per second with the constraints over them
# (issue-1000's 80,845 in 0.92 s, gangs-1000's 34,000 in 0.35 s, gangs-99's 916 in 0.01 s);
# the figure is 2.5 times that, so that a build it says cannot end in time would not have ended.
BUILD_VARIABLES_PER_SECOND = 250_000

CONSTRAINTS: dict[str, Callable[[Model], object]] = {
    "capacity": capacity.build,
    "ports": ports.build,
    "gangs": gangs.build,
    "domains": domains.build,
    "quorums": quorums.build,
    "topology": topology.build,
}


def encode(
    batch: Batch, scorer: Scorer, *, packing: bool = False, check: Check = never_stop
) -> tuple[Model, symmetry.Symmetry]:
    """The model with all hard constraints, and how it ordered identical nodes (by first pod held
    when ``packing``: tight batches). ``check`` is called between the steps of the build (the
    decision's ``Budget.check``: it raises ``BuildStoppedError`` at the deadline)."""
    model = Model(batch=batch, scorer=scorer, check=check)
    model.build_variables()
    for build in CONSTRAINTS.values():
        check()
        build(model)
    check()
    return model, symmetry.build(model, packing=packing)


def build_seconds(batch: Batch) -> float:
    """A lower bound of the wall seconds ``encode`` takes: its placement variables (one per group
    and candidate node with room for one of its pods, ``model.upper_bounds``) at
    ``BUILD_VARIABLES_PER_SECOND``. A model of 80,000 variables (a thousand gangs in racks) takes
    longer to build than a short limit leaves, and one stopped at the deadline only costs time,
    freeing its objects included."""
    free = batch.snapshot.free
    room: dict[bytes, npt.NDArray[np.bool_]] = {}  # request vector -> nodes with room for one pod
    variables = 0
    for group in batch.groups:
        vec = group.vec.tobytes()
        if vec not in room:
            room[vec] = fits(batch.snapshot, group.vec, free)
        variables += int(room[vec][group.candidates].sum())
    return variables / BUILD_VARIABLES_PER_SECOND
