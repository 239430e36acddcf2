"""The greedy start for workload groups held in topology domains: one group at a time.

Groups (the batch groups under one outermost level, ``placer.engine.domains``) go highest key
first, larger first (or, with ``queue``, in kube-scheduler's queue order: the earliest pod first,
which ``groupfloor`` holds the answer to); each tries the domains of its outermost level in turn, partly used domains
before whole ones (as the domain-packing objective prefers), and inside a domain each inner level
again domain by domain, tightest first (best fit); its pods take nodes by the strategy's cost. A group that fits no
domain whole is left out of the start: the CP-SAT model, which places the groups of the batch
jointly, may still find room for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch, pod_order
from placer.engine.domains import DomainLevel
from placer.engine.prefilter import ports_conflict
from placer.engine.scoring import Scorer

__all__ = ["Fit", "Ports", "fit_unit", "place_levels", "port_clash"]

IntArray = npt.NDArray[np.int64]
Fit = dict[int, list[int]]  # batch group -> nodes of its pods
Ports = dict[int, list[int]]  # node -> the batch groups asking for host ports that the pass put there
_BLOCK_ROWS = 1 << 16  # (node, pod) costs per call of ``Scorer.delta_rows`` at most (``_PodCosts``)


def place_levels(
    batch: Batch,
    scorer: Scorer,
    used: IntArray,
    result: list[IntArray],
    skip: frozenset[int],
    *,
    queue: bool = False,
    ports: Ports | None = None,
) -> set[int]:
    """Place the batch's groups that belong to levels (into ``result``, adding to ``used``, and
    the nodes of the groups asking for host ports to ``ports``, which none of them may share with
    a group whose ports conflict); returns those groups (placed or not), which the pod-by-pod pass
    then leaves alone."""
    ports = {} if ports is None else ports
    levels = batch.levels
    if not levels:
        return set()
    handled = {gi for level in levels for gi in level.groups}
    outer: dict[str, list[int]] = {}
    for gi in sorted(handled - skip):
        outer.setdefault(batch.groups[gi].pods[0].group_domains[-1].group, []).append(gi)

    def top(gis: list[int]) -> int:
        return -max(batch.rank(batch.groups[g]) for g in gis)

    def arrival(gis: list[int]) -> tuple[str, str, str]:
        return min(pod_order(p) for g in gis for p in batch.groups[g].pods)

    if queue:
        units = sorted(outer.values(), key=lambda gis: (top(gis), arrival(gis)))
    else:
        units = sorted(outer.values(), key=lambda gis: (top(gis), -sum(batch.groups[g].size for g in gis)))
    for gis in units:
        found = fit_unit(batch, scorer, gis, used, ports)
        if found is None:
            continue
        fit, after = found
        used[:] = after
        ports.update(_noted(batch, fit, ports))
        for gi, nodes in fit.items():
            result[gi][: len(nodes)] = nodes
            group = batch.groups[gi]  # the nodes taken join the candidates: the start stays a solution
            group.candidates = np.union1d(group.candidates, nodes).astype(np.int64)
    return handled


def fit_unit(
    batch: Batch, scorer: Scorer, gis: Sequence[int], used: IntArray, ports: Ports | None = None
) -> tuple[Fit, IntArray] | None:
    """Every pod of the batch groups ``gis`` (one outermost level's) placed on ``used`` (not
    modified), each level in one domain, domains tried as ``_order`` says, no group asking for a
    host port on a node where ``ports`` (not modified) or the unit itself put a conflicting one: the
    nodes per group, and the load after; None when no domain takes them all."""
    everywhere = np.ones(len(batch.snapshot.nodes), dtype=np.bool_)
    return _fit(batch, scorer, gis, everywhere, frozenset(), used.copy(), {} if ports is None else ports)


def port_clash(batch: Batch, gi: int, placed_groups: list[int]) -> bool:
    """Whether group ``gi`` asks for a host port that conflicts with one of ``placed_groups``'."""
    mine = batch.groups[gi].pods[0].host_ports
    return any(
        ports_conflict(a, b) for other in placed_groups for a in mine for b in batch.groups[other].pods[0].host_ports
    )


def _noted(batch: Batch, fit: Fit, ports: Ports) -> Ports:
    """``ports`` with the nodes of ``fit``'s groups that ask for host ports (a new dict)."""
    out = {n: list(gs) for n, gs in ports.items()}
    for gi, nodes in fit.items():
        if batch.groups[gi].has_ports:
            for n in set(nodes):
                out.setdefault(n, []).append(gi)
    return out


def _order(batch: Batch, level: DomainLevel, gis: Sequence[int], used: IntArray) -> list[int]:
    """Partly used domains before whole ones, each kind tightest first (best fit: the fewest
    pods of the group's kind fit there now), then by index; for a single group only the domains
    with room for all its pods."""
    fresh = batch.fresh(level.key)
    vec = batch.groups[gis[0]].vec
    nz = np.flatnonzero(vec)
    slot = level.domain + 1  # 0: no domain (dropped below)
    if len(nz):
        free = batch.snapshot.alloc[:, nz] - used[:, nz]
        per_node = np.maximum(np.min(free // vec[nz], axis=1), 0)
    else:
        per_node = np.zeros(len(slot), dtype=np.int64)
    room = np.bincount(slot, weights=per_node, minlength=len(level.values) + 1)[1:]
    present = np.bincount(slot, minlength=len(level.values) + 1)[1:] > 0
    if len(gis) == 1:  # one kind of pod: a domain without room for all of them is not tried
        present &= room >= batch.groups[gis[0]].size
    tried = np.flatnonzero(present)
    return [int(d) for d in tried[np.lexsort((tried, room[tried], fresh[tried]))]]


def _fit(
    batch: Batch,
    scorer: Scorer,
    gis: Sequence[int],
    mask: npt.NDArray[np.bool_],
    fixed: frozenset[str],
    used: IntArray,
    ports: Ports,
) -> tuple[Fit, IntArray] | None:
    """Every pod of ``gis`` on nodes of ``mask``, each level not yet ``fixed`` in one domain, no
    host port where ``ports`` has a conflicting one."""
    open_levels = [lv for lv in batch.levels_of(gis) if lv.name not in fixed]
    if not open_levels:
        return _first_fit(batch, scorer, gis, mask, used, ports)
    level = max(open_levels, key=lambda lv: (len(set(lv.groups) & set(gis)), lv.name))
    inside = [g for g in gis if g in level.groups]
    outside = [g for g in gis if g not in level.groups]
    for d in _order(batch, level, inside, used):
        found = _fit(batch, scorer, inside, mask & (level.domain == d), fixed | {level.name}, used.copy(), ports)
        if found is None:
            continue
        fit, after = found
        if outside:
            rest = _fit(batch, scorer, outside, mask, fixed | {level.name}, after, _noted(batch, fit, ports))
            if rest is None:
                continue  # the others fit nowhere beside this domain: try the next one
            fit = {**fit, **rest[0]}
            after = rest[1]
        return fit, after
    return None


def _first_fit(
    batch: Batch, scorer: Scorer, gis: Sequence[int], mask: npt.NDArray[np.bool_], used: IntArray, ports: Ports
) -> tuple[Fit, IntArray] | None:
    """Each pod of ``gis`` in turn on the node of ``mask`` where it fits at the least strategy
    cost (``_PodCosts``), the first such node on ties; a group asking for host ports never on a
    node where ``ports`` or an earlier group of ``gis`` has a conflicting one."""
    alloc = batch.snapshot.alloc
    fit: Fit = {}
    for gi in gis:
        group = batch.groups[gi]
        nodes = group.feasible[mask[group.feasible]]
        if group.has_ports:
            taken = _noted(batch, fit, ports)
            nodes = nodes[~np.isin(nodes, [n for n, gs in taken.items() if port_clash(batch, gi, gs)])]
        nz = np.flatnonzero(group.vec)
        if len(nz):  # pods of the group each node still holds
            cap = np.maximum((alloc[np.ix_(nodes, nz)] - used[np.ix_(nodes, nz)]) // group.vec[nz], 0).min(axis=1)
        else:
            cap = np.full(len(nodes), group.size, dtype=np.int64)
        cap = np.minimum(cap, 1 if group.has_ports else group.size)  # host ports: one pod per node
        costs = _PodCosts(scorer, group.vec, nodes, used, cap)
        count = np.zeros(len(nodes), dtype=np.int64)
        now = costs.layer(0).copy()  # the next pod's cost on each node
        fit[gi] = []
        for _ in range(group.size):
            room = np.flatnonzero(count < cap)
            if len(room) == 0:
                return None
            i = int(room[int(np.argmin(now[room]))])
            fit[gi].append(int(nodes[i]))
            count[i] += 1
            if count[i] < cap[i]:
                now[i] = costs.layer(int(count[i]))[i]
        for i in np.flatnonzero(count).tolist():
            used[nodes[i]] += count[i] * group.vec
    return fit, used


class _PodCosts:
    """Per node of a group, the strategy cost (``Scorer.delta``) of its (k+1)-th pod there, the
    group's k pods before it added to ``used``: a node's cost reads its own row of ``used`` alone,
    so these are the costs a fresh evaluation per pod gives, node by node, in a few calls instead
    of one per pod. Layer k holds them for every node (inf where ``cap``, the pods a node takes,
    is k or less); layers are computed ``_BLOCK_ROWS`` costs at a time, as the pods reach them."""

    def __init__(self, scorer: Scorer, vec: IntArray, nodes: IntArray, used: IntArray, cap: IntArray) -> None:
        self.scorer, self.vec, self.nodes, self.cap = scorer, vec, nodes, cap
        self.base = used[nodes]
        self.block = max(_BLOCK_ROWS // max(len(nodes), 1), 1)
        self.layers: list[npt.NDArray[np.float64]] = []

    def layer(self, k: int) -> npt.NDArray[np.float64]:
        while len(self.layers) <= k:
            first = len(self.layers)
            ks = np.arange(first, max(min(first + self.block, int(self.cap.max(initial=0))), k + 1))
            kk, ii = np.nonzero(ks[:, None] < self.cap[None, :])
            out = np.full((len(ks), len(self.nodes)), np.inf)
            rows = self.base[ii] + ks[kk][:, None] * self.vec
            out[kk, ii] = self.scorer.delta_rows(self.vec, self.nodes[ii], rows)
            self.layers.extend(out)
        return self.layers[k]
