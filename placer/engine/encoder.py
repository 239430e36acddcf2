"""Wires the constraint modules into a model: the one place that lists them."""

from __future__ import annotations

from collections.abc import Callable

from placer.engine.batch import Batch
from placer.engine.constraints import capacity, domains, gangs, ports, quorums, symmetry, topology
from placer.engine.levels import Check, never_stop
from placer.engine.model import Model
from placer.engine.scoring import Scorer

__all__ = ["CONSTRAINTS", "encode"]

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
