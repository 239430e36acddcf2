"""Gangs: the pods of a gang are placed all together or not at all, within one batch.

A gang is the pods sharing ``placer.io/gang`` (or the PodGroup label) in a namespace. For each
gang a boolean ``whole`` ties every member group's placed count to its size: either all
members run or none does. Incomplete gangs never get variables (see ``incomplete_gangs``).
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placer.engine.batch import gang_groups
from placer.engine.model import Model

__all__ = ["build"]


def build(model: Model) -> None:
    for gang, groups in gang_groups(model.batch.groups).items():
        whole = model.cp.new_bool_var(f"gang_{gang}")
        for gi in groups:
            size = model.batch.groups[gi].size
            placed = model.placed(gi) if model.by_group[gi] else cp_model.LinearExpr.sum([])
            model.cp.add(placed == size * whole)
