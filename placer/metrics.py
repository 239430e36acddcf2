"""Cluster balance metrics: TBESK imbalance and the thesis' std_score.

imbalance: for node i with utilisations A(i, j) over the resources j it has (cpu, memory,
ephemeral-storage, and placer.io/bandwidth when present), Z(i) = sqrt(sum_j (A(i,j) - mean_j)^2);
imbalance = mean of Z over nodes with allocatable > 0. std_score: population standard deviation
across those nodes of each node's mean utilisation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["BALANCE_RESOURCES", "balance_metrics", "load_terms", "node_balance", "utilisation"]

BALANCE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth")


def utilisation(
    alloc: Sequence[Mapping[str, int]],
    used: Sequence[Mapping[str, int]],
    resources: Sequence[str] = BALANCE_RESOURCES,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Utilisation matrix (nodes x resources) and which entries the node has."""
    a = np.array([[float(n.get(r, 0)) for r in resources] for n in alloc]).reshape(-1, len(resources))
    u = np.array([[float(n.get(r, 0)) for r in resources] for n in used]).reshape(-1, len(resources))
    has = a > 0
    return np.where(has, u / np.where(has, a, 1.0), 0.0), has


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
    """Per node: TBESK's Z and the mean utilisation over the resources it has (0, 0 for a node with
    none). imbalance is the mean of Z and std_score the standard deviation of the means, both over
    the nodes that have a resource: what ``balance_metrics`` returns, kept per node so that a
    search can update the two measures one node at a time."""
    k = np.maximum(has.sum(axis=1), 1)
    mean = (util * has).sum(axis=1) / k
    z = np.sqrt((((util - mean[:, None]) ** 2) * has).sum(axis=1))
    return z, mean


def balance_metrics(alloc: Sequence[Mapping[str, int]], used: Sequence[Mapping[str, int]]) -> tuple[float, float]:
    """(imbalance, std_score) of a cluster state."""
    util, has = utilisation(alloc, used)
    rows = has.any(axis=1)
    if not rows.any():
        return 0.0, 0.0
    z, mean = node_balance(util[rows], has[rows])
    return float(z.mean()), float(mean.std())
