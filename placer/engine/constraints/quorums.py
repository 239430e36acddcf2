"""Composite gangs (Kubernetes 1.37 CompositePodGroup ``minGroupCount``, ``placer.engine.quorums``).

For every quorum of the batch a boolean per child group, true exactly when some pod of the child
is placed, and one boolean ``any`` above them: every child's boolean implies ``any``, and the
children placed are at least ``need`` times ``any``: ``need`` child groups or none. Written
against what the batch engine's model and the global plan's model share, so both apply it.
"""

from __future__ import annotations

from typing import Protocol

from ortools.sat.python import cp_model

from placer.engine.batch import Batch

__all__ = ["build"]


class GroupModel(Protocol):
    batch: Batch
    cp: cp_model.CpModel
    by_group: list[list[tuple[int, cp_model.IntVar]]]

    def ub(self, var: cp_model.IntVar) -> int: ...


def build(model: GroupModel) -> None:
    for qi, quorum in enumerate(model.batch.quorums):
        anything = model.cp.new_bool_var(f"quorum{qi}")
        placed = []
        for ci, child in enumerate(quorum.children):
            rows = [var for gi in child for _, var in model.by_group[gi]]
            if not rows:
                continue
            some = model.cp.new_bool_var(f"quorum{qi}_child{ci}")
            for var in rows:
                model.cp.add(var <= model.ub(var) * some)
            model.cp.add(sum(rows) >= 1).only_enforce_if(some)
            model.cp.add_implication(some, anything)
            placed.append(some)
        model.cp.add(sum(placed) >= quorum.need * anything)
