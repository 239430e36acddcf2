"""The CP-SAT model skeleton: one integer variable per (pod group, candidate node).

``y[g, n]`` counts how many pods of group ``g`` go to node ``n``; singleton groups get booleans.
Constraint modules (``placer.engine.constraints``) and objective modules
(``placer.engine.objectives``) add to it; ``placer.engine.encoder`` wires them in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine.batch import Batch, Group
from placer.engine.domains import DomainVars
from placer.engine.levels import Check, never_stop
from placer.engine.objectives.decisions import Disruptions, Kept, placed_by_rank
from placer.engine.objectives.loads import LoadEntry
from placer.engine.scoring import IntArray, Scorer

__all__ = ["Model", "upper_bounds"]


@dataclass
class Model:
    batch: Batch
    scorer: Scorer
    cp: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    y: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    by_node: dict[int, list[tuple[int, cp_model.IntVar]]] = field(default_factory=dict)
    by_group: list[list[tuple[int, cp_model.IntVar]]] = field(default_factory=list)
    touched: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    upper: dict[int, int] = field(default_factory=dict)  # variable index -> upper bound
    # (weight, variable): soft spreading excess and preferred anti-affinity crowding
    soft_penalty: list[tuple[int, cp_model.IntVar]] = field(default_factory=list)
    domains: DomainVars | None = None  # workload groups' topology domains (constraints.domains)
    # key -> (gangs of that key placed, capped at the floor; the floor): ``groupfloor``
    group_floor: dict[int, tuple[cp_model.IntVar, int]] = field(default_factory=dict)
    check: Check = never_stop  # between the steps of the build: stops it at the decision's deadline

    def ub(self, var: cp_model.IntVar) -> int:
        return self.upper[var.index]

    def placed(self, gi: int) -> cp_model.LinearExprT:
        return cp_model.LinearExpr.sum([v for _, v in self.by_group[gi]])

    # -- what the level objectives read (placer.engine.objectives.decisions.Decisions) -------------
    def base_used(self) -> IntArray:
        return self.batch.snapshot.used

    def load_entries(self) -> dict[int, list[LoadEntry]]:
        groups = self.batch.groups
        return {n: [LoadEntry(groups[gi].vec, var, 1) for gi, var in row] for n, row in self.by_node.items()}

    def placements(self) -> list[tuple[IntArray, int, LoadEntry]]:
        groups = self.batch.groups
        return [(groups[gi].vec, n, LoadEntry(groups[gi].vec, var, 1)) for (gi, n), var in self.y.items()]

    def kept(self) -> Kept:
        return placed_by_rank(self.batch, self.by_group)

    def disruptions(self) -> Disruptions | None:
        return None

    def build_variables(self) -> None:
        snap = self.batch.snapshot
        touched: set[int] = set()
        for gi, group in enumerate(self.batch.groups):
            self.check()
            row: list[tuple[int, cp_model.IntVar]] = []
            for n, ub in upper_bounds(snap.free, group):
                var = self.cp.new_bool_var(f"y{gi}_{n}") if ub == 1 else self.cp.new_int_var(0, ub, f"y{gi}_{n}")
                self.y[gi, n] = var
                self.upper[var.index] = ub
                row.append((n, var))
                self.by_node.setdefault(n, []).append((gi, var))
                touched.add(n)
            self.by_group.append(row)
            if row:
                self.cp.add(cp_model.LinearExpr.sum([v for _, v in row]) <= group.size)
        self.touched = np.array(sorted(touched), dtype=np.int64)


def upper_bounds(free: IntArray, group: Group) -> list[tuple[int, int]]:
    """(node, the most pods of ``group`` it takes in ``free``) for each of the group's candidates
    that takes one: at most the group's size, one with a host port (one vectorised pass)."""
    nodes = group.candidates
    nz = np.flatnonzero(group.vec)
    most = 1 if group.has_ports else group.size
    if len(nz):
        ubs = np.minimum(np.min(free[np.ix_(nodes, nz)] // group.vec[nz], axis=1), most)
    else:
        ubs = np.full(len(nodes), most, dtype=np.int64)
    keep = ubs > 0
    return list(zip(nodes[keep].tolist(), ubs[keep].tolist(), strict=True))
