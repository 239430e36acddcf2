"""Which domain each group that required pod affinity holds to one domain (a zone) takes, for
its candidates (``candidates.select_candidates``).

Groups whose pods may provide for each other (one workload's pods of several request mixes)
share one domain: a family. Each family of the batch takes the domain allowed to all its groups
(one of a running pod it must join, if any) whose nodes' mean load (``Scorer.load``) is lowest,
counting the load the domain is already promised:

- by the batch's families given a domain before it: those a running pod holds first, then the
  larger first. Judged on the load before the batch alone, every new family of a batch took the
  same least loaded domain and stacked in it (the e2e's affinity shape live: its batches mix the
  first pods of several workloads);
- by the batch's groups that can go to no other domain (their feasible nodes lie in it);
- by the pods still waiting behind the batch (``waiting``) whose workload is held in a domain:
  one with running pods there, or a family of this batch. A workload whose first pods ran while
  the rest waited (pods a short solve left for later, pods taken in name order) made its domain
  look light, and later workloads joined it: four in one zone, one in others.

The same promise binds the rest of the solve: a waiting pod of a workload its running pods hold
stays in their domain in the backlog's aim and the guard's view of the end (``where_held``), and
kube-scheduler's answer, which places a new workload's first pod on the node least loaded now,
is not adopted where it puts a held group outside its domain (``keeps_held``).

A workload here is the pods of one namespace with the same required pod-affinity terms that
match their own terms (so they all share one domain per term).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch
from placer.engine.queued import read_waiting
from placer.engine.scoring import Scorer
from placer.engine.snapshot import pod_vector
from placer.engine.topology import affinity_signature, term_matches
from placer.models import Pod

__all__ = ["Confined", "held_domains", "keeps_held", "where_held"]

# Per group and topology key its required inter-pod rules confine it by: (domain of each node,
# number of domains, whether its pods share out over them: hard spreading; otherwise required
# affinity holds them in one, among the domains allowed).
Confined = tuple[npt.NDArray[np.int64], int, bool, npt.NDArray[np.bool_]]
Workload = tuple[object, ...]  # affinity_signature
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def held_domains(
    batch: Batch, scorer: Scorer, confined: dict[int, list[Confined]], waiting: Sequence[Pod] = ()
) -> dict[tuple[int, int], tuple[int, bool]]:
    """(group, index of its confined rule) -> the domain it takes (module docstring), and
    whether that domain has room for all the family's pods of the batch (only then does it bind
    the rest of the solve: ``keeps_held``; otherwise it is a guess the greedy pass may leave); a
    group with no allowed domain is left out."""
    rules = {(gi, ci): c for gi, cs in confined.items() for ci, c in enumerate(cs) if not c[2]}
    if not rules:
        return {}
    families = _families(batch, rules)
    coming, keys_of = _coming(batch, waiting)
    names = {id(d.of_node): name for name, d in batch.topology.domains.items()}
    mine = {affinity_signature(batch.groups[m[0][0]].pods[0]) for m in families}
    promised: dict[int, FloatArray] = {}  # id of a key's of_node -> load promised per domain

    def others(of_node: IntArray, size: int) -> FloatArray:
        out = np.zeros(size)
        for gi, group in enumerate(batch.groups):
            doms = np.unique(of_node[group.feasible])
            if all(m[0] != gi for m in rules) and len(doms) == 1 and doms[0] >= 0:
                out[doms[0]] += group.size * _share(scorer, group.vec, group.feasible)
        key = names.get(id(of_node))
        waiting_there = {w: vec for w, vec in coming.items() if w not in mine and key in keys_of[w]}
        for w, d in _running_domains(batch, of_node, waiting_there).items():
            out[d] += _share(scorer, waiting_there[w], np.flatnonzero(of_node == d))
        return out

    def order(members: list[tuple[int, int]]) -> tuple[bool, int]:
        free = all(rules[m][3].all() for m in members)
        return free, -sum(batch.groups[gi].size for gi, _ in members)

    out: dict[tuple[int, int], tuple[int, bool]] = {}
    for members in sorted(families, key=order):
        of_node, size = rules[members[0]][0], rules[members[0]][1]
        nodes = batch.groups[members[0][0]].feasible
        allowed = np.ones(size, dtype=np.bool_)
        for gi, ci in members:
            nodes = np.intersect1d(nodes, batch.groups[gi].feasible)
            allowed &= rules[(gi, ci)][3]
        doms = of_node[nodes]
        inside = doms >= 0
        load = np.bincount(doms[inside], scorer.load[nodes[inside]], minlength=size)
        count = np.bincount(doms[inside], minlength=size)
        if id(of_node) not in promised:
            promised[id(of_node)] = others(of_node, size)
        added = promised[id(of_node)]
        mean = np.where((count > 0) & allowed, (load + added) / np.maximum(count, 1), np.inf)
        if not np.isfinite(mean).any():
            continue
        room = _room(batch, members, nodes[inside], doms[inside], size)
        binding = bool((room & np.isfinite(mean)).any())
        best = int(np.argmin(np.where(room, mean, np.inf) if binding else mean))
        there = nodes[inside & (doms == best)]
        for gi, ci in members:
            added[best] += batch.groups[gi].size * _share(scorer, batch.groups[gi].vec, there)
            out[(gi, ci)] = (best, binding)
        behind = coming.get(affinity_signature(batch.groups[members[0][0]].pods[0]))
        if behind is not None:
            added[best] += _share(scorer, behind, there)
    return out


def _room(
    batch: Batch, members: list[tuple[int, int]], nodes: IntArray, doms: IntArray, size: int
) -> npt.NDArray[np.bool_]:
    """Per domain, whether each group of the family fits there whole (by free room alone)."""
    snap = batch.snapshot
    free = snap.alloc[nodes] - snap.used[nodes]
    ok = np.ones(size, dtype=np.bool_)
    for gi, _ in members:
        vec = batch.groups[gi].vec
        asks = vec > 0
        per_node = (free[:, asks] // vec[asks]).min(axis=1) if asks.any() else np.full(len(nodes), 1 << 30)
        ok &= np.bincount(doms, np.maximum(per_node, 0), minlength=size) >= batch.groups[gi].size
    return ok


def _families(batch: Batch, rules: dict[tuple[int, int], Confined]) -> list[list[tuple[int, int]]]:
    """The rules grouped by family (groups that may provide for each other) and key."""
    parent = {gi: gi for gi, _ in rules}

    def root(g: int) -> int:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for a in batch.topology.affinity:
        if a.g not in parent:
            continue
        for h in {*a.family, *a.matchers, *(h for t in a.terms for h in t.providers)}:
            if h in parent:
                parent[root(h)] = root(a.g)
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for (gi, ci), (of_node, _, _, _) in rules.items():
        out.setdefault((root(gi), id(of_node)), []).append((gi, ci))
    return list(out.values())


def _coming(batch: Batch, waiting: Sequence[Pod]) -> tuple[dict[Workload, IntArray], dict[Workload, set[str]]]:
    """The summed requests (``snapshot.resources``) of the waiting pods of each workload whose
    pods match their own required affinity terms (``queued.read_waiting``: a sample stands for a long
    queue), and the topology keys of its terms."""
    snap = batch.snapshot
    read, scale = read_waiting(waiting)
    vecs: dict[tuple[tuple[str, int], ...], IntArray] = {}  # requests -> vector
    out: dict[Workload, IntArray] = {}
    keys: dict[Workload, set[str]] = {}
    for pod in read:
        if not pod.pod_affinity:
            continue
        w = affinity_signature(pod)
        requests = tuple(pod.requests.items())
        vec = vecs.get(requests)
        if vec is None:
            vec = vecs[requests] = pod_vector(pod, snap.resources)
        if w in out:
            out[w] += vec
        elif all(term_matches(t, pod.namespace, pod.labels, snap.namespaces) for t in pod.pod_affinity):
            out[w] = vec.copy()
            keys[w] = {t.topology_key for t in pod.pod_affinity}
    return {w: np.rint(vec * scale).astype(np.int64) for w, vec in out.items()}, keys


def _running_domains(batch: Batch, of_node: IntArray, wanted: dict[Workload, IntArray]) -> dict[Workload, int]:
    """The domain a running pod of each wanted workload is in (its pods all share it)."""
    out: dict[Workload, int] = {}
    left = set(wanted)
    for n, pods in enumerate(batch.snapshot.running):
        if not left:
            break
        for pod in pods:
            if pod.pod_affinity and (w := affinity_signature(pod)) in left and of_node[n] >= 0:
                out[w] = int(of_node[n])
                left.discard(w)
    return out


def _share(scorer: Scorer, vec: IntArray, nodes: IntArray) -> float:
    """What ``vec`` (a pod's requests, or several pods' summed) adds to the mean load
    (``Scorer.load``) of ``nodes``, on average."""
    if len(nodes) == 0:
        return 0.0
    return float(((vec[scorer.cols] * scorer.inv_alloc[nodes]).sum(axis=1) / scorer.k[nodes]).mean())


def where_held(batch: Batch, pods: Sequence[Pod]) -> list[tuple[tuple[str, int], ...]]:
    """Per pod, the (topology key, domain) its workload's running pods hold it in, for the keys
    the batch's rules use: a waiting pod of such a workload may only go there."""
    sigs: list[Workload | None] = []
    terms: dict[Workload, set[str]] = {}
    snap = batch.snapshot
    for pod in pods:
        w = affinity_signature(pod) if pod.pod_affinity else None
        if (
            w is not None
            and w not in terms
            and all(term_matches(t, pod.namespace, pod.labels, snap.namespaces) for t in pod.pod_affinity)
        ):
            terms[w] = {t.topology_key for t in pod.pod_affinity}
        sigs.append(w if w in terms else None)
    found: dict[Workload, list[tuple[str, int]]] = {}
    for key, d in batch.topology.domains.items():
        wanted = {w: np.zeros(0, dtype=np.int64) for w, keys in terms.items() if key in keys}
        for w, dom in _running_domains(batch, d.of_node, wanted).items():
            found.setdefault(w, []).append((key, dom))
    return [tuple(found.get(w, ())) if w is not None else () for w in sigs]


def keeps_held(batch: Batch, placements: Sequence[tuple[Pod, int]]) -> bool:
    """Whether an answer (kube-scheduler's, offered as a start or a fallback) keeps every group
    held to one domain in the domain its candidates lie in (``Batch.held``). kube-scheduler
    places the first pod of a new workload on the node least loaded now, wherever the pods
    still waiting of the workloads there will go: adopted, it stacked a third and a fourth
    workload in one zone (the e2e's affinity shape, live, at the 0.1 s floor)."""
    if not batch.held:
        return True
    group_of = {pod.key: gi for gi, group in enumerate(batch.groups) if gi in batch.held for pod in group.pods}
    for pod, node in placements:
        gi = group_of.get(pod.key)
        if gi is not None and node >= 0:
            of_node, domain = batch.held[gi]
            if of_node[node] != domain:
                return False
    return True
