"""Name the PodDisruptionBudgets that alone keep an unplaced pod from a node.

kube-scheduler's preemption prefers victims whose eviction violates no PDB but, as a last resort,
evicts through a PDB that allows no disruption. placer never does: a plan respects every budget.
So that a pod left Pending for that reason says so, the pods it would preempt are checked node by
node: if evicting every lower-priority pod placer could evict (budgets ignored) makes room for it
on a node it may use, but evicting only those no exhausted budget covers does not, the budgets
covering the rest are what blocks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placer.engine import Prefilter, Snapshot, Unplaced, fits, pod_vector
from placer.models import Cluster, Pod
from placer.plan.eligibility import classify

__all__ = ["name_blocking_pdbs"]


def _blocking(cluster: Cluster, state: Snapshot, pre: Prefilter, pod: Pod, scheduler_name: str) -> tuple[str, ...]:
    allowed = pre.masks(pod).allowed & pre.ports_ok(pod)
    vec = pod_vector(pod, state.resources)
    found: set[str] = set()
    for n in np.flatnonzero(allowed).tolist():
        free_all = state.free[n].copy()
        free_ok = state.free[n].copy()
        blockers: set[str] = set()
        for victim in state.running[n]:
            e = classify(cluster, victim, scheduler_name)
            if not e.evictable or not (e.movable or victim.priority < pod.priority):
                continue
            need = pod_vector(victim, state.resources)
            free_all += need
            exhausted = [cluster.pdbs[i] for i in e.pdbs if cluster.pdbs[i].disruptions_allowed <= 0]
            if exhausted:
                blockers |= {f"{b.namespace}/{b.name}" for b in exhausted}
            else:
                free_ok += need
        if blockers and fits(state, vec, free_all[None, :])[0] and not fits(state, vec, free_ok[None, :])[0]:
            found |= blockers
    return tuple(sorted(found))


def name_blocking_pdbs(
    cluster: Cluster, state: Snapshot, unplaced: Sequence[Unplaced], scheduler_name: str
) -> list[Unplaced]:
    """``unplaced`` with the blocking budgets named in each reason where some are (``Reason.pdbs``)."""
    if not cluster.pdbs:
        return list(unplaced)
    pre = Prefilter(state)
    out: list[Unplaced] = []
    for pod, code, reason in unplaced:
        names: tuple[str, ...] = ()
        if code in ("Unschedulable", "Outranked") and pod.preemption_policy != "Never" and reason.gang is None:
            names = _blocking(cluster, state, pre, pod, scheduler_name)
        out.append((pod, code, reason.model_copy(update={"pdbs": names}) if names else reason))
    return out
