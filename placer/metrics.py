"""Cluster balance metrics: TBESK imbalance and the thesis' std_score, defined here once.

Both read the utilisation A(i, j) = requested / allocatable of node i for resource j, over the
resources *in use*: those of ``BALANCE_RESOURCES`` (cpu, memory, ephemeral-storage,
placer.io/bandwidth) that the node offers (allocatable > 0) and that the pods of the state
measured request in total across the cluster (> 0: running pods, the pods the answer places,
terminating pods still holding room). A resource nobody requests (ephemeral storage in most
clusters) sits at 0 % on every node; counted, it would pull every node's mean down and dominate Z.

imbalance (TBESK): per node, Z(i) = sqrt(sum_j (A(i,j) - mean_j A(i,j))^2), the spread of the
node's utilisations around the node's own mean over j; imbalance = mean of Z over the nodes that
offer some resource in use. std_score (thesis): the population standard deviation, across the same
nodes, of each node's mean utilisation mean_j A(i,j). Both are 0 when no resource is in use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from placer.models import Pod, Result

__all__ = [
    "BALANCE_RESOURCES",
    "balance_metrics",
    "in_use",
    "load_terms",
    "measures",
    "node_balance",
    "running_by_priority",
    "utilisation",
]

BALANCE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth")


def utilisation(
    alloc: Sequence[Mapping[str, int]],
    used: Sequence[Mapping[str, int]],
    resources: Sequence[str] = BALANCE_RESOURCES,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Utilisation matrix (nodes x resources) and which entries the measures read (``in_use``)."""
    a = np.array([[float(n.get(r, 0)) for r in resources] for n in alloc]).reshape(-1, len(resources))
    u = np.array([[float(n.get(r, 0)) for r in resources] for n in used]).reshape(-1, len(resources))
    offered = a > 0
    return np.where(offered, u / np.where(offered, a, 1.0), 0.0), in_use(a, u)


def in_use(alloc: npt.NDArray[np.number], used: npt.NDArray[np.number]) -> npt.NDArray[np.bool_]:
    """Which entries of a (nodes x resources) state the measures read: the node offers the
    resource and the state's pods request some of it somewhere in the cluster (module docstring)."""
    return np.asarray((alloc > 0) & (used.sum(axis=0) > 0)[None, :], dtype=np.bool_)


def load_terms(
    alloc: Sequence[Mapping[str, int]],
    used: Sequence[Mapping[str, int]],
    resources: Sequence[str],
    target: float,
) -> tuple[list[float], list[float]]:
    """Per node: the L1 skew of its utilisations around their mean (sum_j |A(i,j) - mean_i|), and
    the distance of that mean from ``target`` (|mean_i - target|); 0, 0 for a node with none of
    ``resources``. The two load terms of the ``balance`` strategy, computed from plain maps."""
    skews: list[float] = []
    distances: list[float] = []
    for a, u in zip(alloc, used, strict=True):
        shares = [u.get(r, 0) / a[r] for r in resources if a.get(r, 0) > 0]
        if not shares:
            skews.append(0.0)
            distances.append(0.0)
            continue
        mean = sum(shares) / len(shares)
        skews.append(sum(abs(x - mean) for x in shares))
        distances.append(abs(mean - target))
    return skews, distances


def node_balance(
    util: npt.NDArray[np.float64], has: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per node: TBESK's Z and the mean utilisation over the entries ``has`` marks (``in_use``;
    0, 0 for a node with none). imbalance is the mean of Z and std_score the standard deviation of
    the means, both over the nodes with such an entry: what ``balance_metrics`` returns, kept per
    node so that a search can update the two measures one node at a time."""
    k = np.maximum(has.sum(axis=1), 1)
    mean = (util * has).sum(axis=1) / k
    z = np.sqrt((((util - mean[:, None]) ** 2) * has).sum(axis=1))
    return z, mean


def measures(util: npt.NDArray[np.float64], has: npt.NDArray[np.bool_]) -> tuple[float, float]:
    """(imbalance, std_score) of a utilisation matrix, over the entries ``has`` marks (``in_use``)."""
    rows = has.any(axis=1)
    if not rows.any():
        return 0.0, 0.0
    z, mean = node_balance(util[rows], has[rows])
    return float(z.mean()), float(mean.std())


def balance_metrics(alloc: Sequence[Mapping[str, int]], used: Sequence[Mapping[str, int]]) -> tuple[float, float]:
    """(imbalance, std_score) of a cluster state."""
    return measures(*utilisation(alloc, used))


def running_by_priority(pods: Iterable[Pod], result: Result) -> dict[int, int]:
    """Pods running once ``result`` is carried out, per ``spec.priority``: what placer maximises
    first. The pods running before (not terminating) and the pending pods it places, less those it
    preempts (a batched run may place a pod and preempt it for a later batch); a moved pod keeps
    running (its replacement takes its place)."""
    preempted = {e.pod for e in result.evictions if e.kind == "preempt"}
    placed = {p.pod for p in result.placements if p.kind == "pending" and p.pod is not None}
    counts = Counter(
        pod.priority
        for pod in pods
        if pod.key not in preempted and ((pod.running and not pod.terminating) or pod.key in placed)
    )
    return dict(counts)
