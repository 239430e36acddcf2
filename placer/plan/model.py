"""The global-plan model: pending pods and (some) running pods are decisions together.

Per running pod r that may be touched: ``p[r]`` (preempted: evicted, not re-placed) and
``z[r, n]`` (moved: evicted, its ReplicaSet's replacement bound to n); it stays otherwise.
Capacity on a node: the batch pods bound there plus the replacements moved in minus the pods
leaving must fit the room free before the plan. Inter-pod affinity, anti-affinity and spreading
among the batch pods use the engine's constraints (``placer.engine.constraints.topology``).
PDBs cap each budget's evictions at ``disruptionsAllowed``; ``max_evictions`` caps them all. A pod is
preempted only on a node where a
pending pod of a strictly higher key that may preempt is placed (all-or-nothing: the preemptor
then fits, since the whole plan is one feasible assignment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine import (
    Batch,
    Check,
    DomainVars,
    Group,
    IntArray,
    Kept,
    LoadEntry,
    Scorer,
    Snapshot,
    build_domain_constraints,
    build_quorum_constraints,
    build_topology_constraints,
    gang_groups,
    kept_namespace,
    never_stop,
    outranks,
    placed_by_rank,
    ports_clash,
    upper_bounds,
)
from placer.models import Pod
from placer.plan import groups as workload_groups

__all__ = ["Mover", "PlanModel"]

CHECK_EVERY = 64  # movers or nodes between two checks of the deadline (``PlanModel.check``)


@dataclass
class Mover:
    """A running pod the plan may evict."""

    pod: Pod
    home: int
    vec: npt.NDArray[np.int64]
    rank: int
    pdbs: tuple[int, ...]
    targets: npt.NDArray[np.int64]  # nodes its replacement may be bound to (empty: not movable)
    preemptible: bool
    # Opted out of moves (annotation, or moved too recently): preempted by a strictly higher
    # spec.priority only, never by a higher restart tier at equal priority.
    held: bool = False


@dataclass
class PlanModel:
    batch: Batch
    movers: list[Mover]
    current: Snapshot  # the state before the plan (movers still running)
    scorer: Scorer
    cp: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    y: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    z: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    p: dict[int, cp_model.IntVar] = field(default_factory=dict)
    upper: dict[int, int] = field(default_factory=dict)
    by_group: list[list[tuple[int, cp_model.IntVar]]] = field(default_factory=list)
    soft_penalty: list[tuple[int, cp_model.IntVar]] = field(default_factory=list)
    domains: DomainVars | None = None  # workload groups' topology domains (engine constraints.domains)
    group_floor: dict[int, tuple[cp_model.IntVar, int]] = field(default_factory=dict)  # none in a plan (groupfloor)

    moves: dict[int, list[cp_model.IntVar]] = field(default_factory=dict)
    # Pending pods that may not cause evictions (``plan.eligibility.calm``): their groups never preempt.
    calm: frozenset[str] = frozenset()
    _calm_groups: dict[int, bool] = field(default_factory=dict, repr=False)  # id(group) -> calm_group
    check: Check = never_stop  # between the steps of the build: stops it at the decision's deadline

    def ub(self, var: cp_model.IntVar) -> int:
        return self.upper[var.index]

    def leaves(self, ri: int) -> cp_model.LinearExpr:
        """1 when mover ri is evicted (moved or preempted)."""
        terms = list(self.moves.get(ri, []))
        if ri in self.p:
            terms.append(self.p[ri])
        return cp_model.LinearExpr.sum(terms)

    pdb_allowed: list[int] = field(default_factory=list)
    max_evictions: int | None = None
    max_per_node: int | None = None

    # -- what the level objectives read (placer.engine.objectives.decisions.Decisions) -------------
    def base_used(self) -> IntArray:
        return self.current.used

    def load_entries(self) -> dict[int, list[LoadEntry]]:
        out: dict[int, list[LoadEntry]] = {}
        for (gi, n), var in self.y.items():
            out.setdefault(n, []).append(LoadEntry(self.batch.groups[gi].vec, var, 1))
        for (ri, n), var in self.z.items():
            m = self.movers[ri]
            out.setdefault(n, []).append(LoadEntry(m.vec, var, 1))
            out.setdefault(m.home, []).append(LoadEntry(m.vec, var, -1))
        for ri, var in self.p.items():
            m = self.movers[ri]
            out.setdefault(m.home, []).append(LoadEntry(m.vec, var, -1))
        return out

    def placements(self) -> list[tuple[IntArray, int, LoadEntry]]:
        """Pending pods placed; a moved pod counts on its new node instead of its old one."""
        groups = self.batch.groups
        out = [(groups[gi].vec, n, LoadEntry(groups[gi].vec, var, 1)) for (gi, n), var in self.y.items()]
        for (ri, n), var in self.z.items():
            m = self.movers[ri]
            out += [(m.vec, n, LoadEntry(m.vec, var, 1)), (m.vec, m.home, LoadEntry(m.vec, var, -1))]
        return out

    def kept(self) -> Kept:
        """Pending pods placed, minus running pods preempted (a moved pod keeps running)."""
        out = placed_by_rank(self.batch, self.by_group)
        for ri, var in self.p.items():
            mover = self.movers[ri]
            at = (mover.rank, kept_namespace(self.batch, mover.pod))
            exprs, span = out.get(at, ([], 0))
            exprs.append(-var)
            out[at] = (exprs, span + 1)
        return out

    def calm_group(self, group: Group) -> bool:
        """Whether a member of ``group`` is calm; asked once per (group, mover) pair, so kept per
        group (a 5,000-pod gang against thousands of movers otherwise reads 10^7 pod keys)."""
        known = self._calm_groups.get(id(group))
        if known is None:
            known = self._calm_groups[id(group)] = any(p.key in self.calm for p in group.pods)
        return known

    def may_preempt(self, group: Group, mover: Mover) -> bool:
        return not self.calm_group(group) and self.may_preempt_pod(group.pods[0], mover)

    def may_preempt_pod(self, preemptor: Pod, mover: Mover) -> bool:
        """``preemptor`` may cause evictions, outranks the mover, and has a strictly higher
        priority if the mover opted out (``Mover.held``)."""
        if mover.held and preemptor.priority <= mover.pod.priority:
            return False
        return preemptor.key not in self.calm and outranks(preemptor, mover.pod, restart_tiers=self.batch.tiers)

    def disruptions(self) -> _Disruptions:
        """Victims per key counted by group (a ``disruptionMode: all`` group once, by its first
        member), then the other members of evicted groups beside the moves: fewest groups, then
        fewest pods."""
        victims: dict[int, list[cp_model.IntVar]] = {}
        extra: list[cp_model.IntVar] = []
        for ris in workload_groups.units(self).values():
            extra += [self.p[ri] for ri in ris[1:] if ri in self.p]
        seconds = {var.index for var in extra}
        for ri, var in self.p.items():
            if var.index not in seconds:
                victims.setdefault(self.movers[ri].rank, []).append(var)
        return _Disruptions(victims=victims, moves=[*self.z.values(), *extra], movers=len(self.movers))

    def build(self, *, pdb_allowed: list[int], max_evictions: int | None, max_per_node: int | None = None) -> None:
        self.pdb_allowed, self.max_evictions, self.max_per_node = list(pdb_allowed), max_evictions, max_per_node
        snap = self.current
        free = snap.free
        base_free = self.batch.snapshot.free  # room once every mover is gone
        self._pending_variables(base_free)
        for ri, m in enumerate(self.movers):
            if ri % CHECK_EVERY == 0:
                self.check()
            for n in m.targets.tolist():
                self.z[ri, n] = self.cp.new_bool_var(f"z{ri}_{n}")
                self.upper[self.z[ri, n].index] = 1
                self.moves.setdefault(ri, []).append(self.z[ri, n])
            if m.preemptible:
                self.p[ri] = self.cp.new_bool_var(f"p{ri}")
                self.upper[self.p[ri].index] = 1
            self.cp.add(self.leaves(ri) <= 1)
        self._preemption_needs_a_preemptor()
        self._capacity(free)
        self.check()
        self._host_ports()
        self._gangs()
        build_domain_constraints(self)  # workload groups in one topology domain
        self.check()
        build_quorum_constraints(self)  # composite gangs: minGroupCount child groups or none
        workload_groups.build(self)  # disruptionMode all: whole groups or nothing
        self.check()
        # Inter-pod rules among the batch pods: the running pods they look at never leave
        # (see planner), so the engine's encoding of them holds unchanged.
        build_topology_constraints(self)
        self.check()
        evicted = {ri: self.leaves(ri) for ri in range(len(self.movers))}
        for b, allowed in enumerate(pdb_allowed):
            members = [evicted[ri] for ri, m in enumerate(self.movers) if b in m.pdbs]
            if members:
                self.cp.add(cp_model.LinearExpr.sum(members) <= max(allowed, 0))
        if max_evictions is not None:
            self.cp.add(cp_model.LinearExpr.sum(list(evicted.values())) <= max_evictions)
        if max_per_node is not None:
            homes: dict[int, list[cp_model.LinearExpr]] = {}
            for ri, m in enumerate(self.movers):
                homes.setdefault(m.home, []).append(evicted[ri])
            for leaving in homes.values():
                self.cp.add(cp_model.LinearExpr.sum(leaving) <= max_per_node)

    def _pending_variables(self, base_free: npt.NDArray[np.int64]) -> None:
        for gi, group in enumerate(self.batch.groups):
            self.check()
            rows = []
            row: list[tuple[int, cp_model.IntVar]] = []
            for n, ub in upper_bounds(base_free, group):
                var = self.cp.new_int_var(0, ub, f"y{gi}_{n}")
                self.y[gi, n] = var
                self.upper[var.index] = ub
                rows.append(var)
                row.append((n, var))
            self.by_group.append(row)
            if rows:
                self.cp.add(cp_model.LinearExpr.sum(rows) <= group.size)

    def _preemption_needs_a_preemptor(self) -> None:
        on_node: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
        for (gi, n), v in self.y.items():
            on_node.setdefault(n, []).append((gi, v))
        for k, (ri, var) in enumerate(self.p.items()):
            if k % CHECK_EVERY == 0:
                self.check()
            m = self.movers[ri]
            if m.pod.disruption_unit is not None:
                continue  # preempted with its whole group (plan.groups)
            preemptors = [v for gi, v in on_node.get(m.home, []) if self.may_preempt(self.batch.groups[gi], m)]
            if preemptors:
                self.cp.add(var <= cp_model.LinearExpr.sum(preemptors))
            else:
                self.cp.add(var == 0)

    def _gangs(self) -> None:
        """A gang is placed whole or not at all (as in the engine's gangs constraint)."""
        for gang, groups in gang_groups(self.batch.groups).items():
            whole = self.cp.new_bool_var(f"gang_{gang}")
            for gi in groups:
                placed = [v for _, v in self.by_group[gi]]
                self.cp.add(cp_model.LinearExpr.sum(placed) == self.batch.groups[gi].size * whole)

    def _host_ports(self) -> None:
        """Pending pods of different groups that clash on a host port never share a node (pods of
        one group are capped at one per node; running pods with host ports never move)."""
        groups = self.batch.groups
        per_node: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
        for (gi, n), var in self.y.items():
            if groups[gi].has_ports:
                per_node.setdefault(n, []).append((gi, var))
        for entries in per_node.values():
            for a in range(len(entries)):
                for b in range(a + 1, len(entries)):
                    pa, pb = groups[entries[a][0]].pods[0], groups[entries[b][0]].pods[0]
                    if ports_clash(pa.host_ports, pb.host_ports):
                        self.cp.add(entries[a][1] + entries[b][1] <= 1)

    def _capacity(self, free: npt.NDArray[np.int64]) -> None:
        groups = self.batch.groups
        per_node: dict[int, list[tuple[npt.NDArray[np.int64], cp_model.LinearExprT]]] = {}
        for (gi, n), var in self.y.items():
            per_node.setdefault(n, []).append((groups[gi].vec, var))
        for (ri, n), var in self.z.items():
            per_node.setdefault(n, []).append((self.movers[ri].vec, var))
        decided = set(self.p) | {ri for ri, _ in self.z}
        for ri in sorted(decided):
            m = self.movers[ri]
            per_node.setdefault(m.home, []).append((-m.vec, self.leaves(ri)))
        for k, (n, terms) in enumerate(per_node.items()):
            if k % CHECK_EVERY == 0:
                self.check()
            for j in range(free.shape[1]):
                coeffs = [int(vec[j]) for vec, _ in terms]
                if not any(c > 0 for c in coeffs):
                    continue
                rhs = int(free[n, j])
                unit = math.gcd(*[abs(c) for c in coeffs if c], abs(rhs)) or 1
                self.cp.add(
                    cp_model.LinearExpr.sum([(c // unit) * e for c, (_, e) in zip(coeffs, terms, strict=True) if c])
                    <= rhs // unit
                )


@dataclass
class _Disruptions:
    victims: dict[int, list[cp_model.IntVar]]
    moves: list[cp_model.IntVar]
    movers: int
