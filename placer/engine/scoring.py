"""Float scoring of placements for the greedy pass and candidate selection.

Mirrors the strategy objectives that the CP-SAT model encodes in integers (see
``placer.engine.objectives``): for ``balance``, the L1 deviation of each node's utilisations from
the node's mean (intra-node skew), the distance of the node's mean utilisation from the cluster's
target (inter-node spread) and the TBESK pod-class cost; for ``spread`` the inter-node term; for
``pack`` the opening of empty nodes and the preference for full ones.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from placer.engine.snapshot import Snapshot
from placer.models import Config
from placer.models.config import PodClass

__all__ = ["CLASSES", "Scorer"]

FloatArray = npt.NDArray[np.float64]

CLASSES: tuple[PodClass, ...] = ("compressible", "incompressible", "balanced")


class Scorer:
    def __init__(self, snapshot: Snapshot, config: Config, batch_demand: npt.NDArray[np.int64]) -> None:
        self.snapshot = snapshot
        self.config = config
        wanted = [r for r in config.balance.resources if r in snapshot.resources]
        present = [snapshot.column(r) for r in wanted if snapshot.alloc[:, snapshot.column(r)].sum() > 0]
        self.cols: npt.NDArray[np.int64] = np.array(present, dtype=np.int64)
        self.names = [snapshot.resources[c] for c in present]
        alloc = snapshot.alloc[:, self.cols].astype(np.float64)
        self.valid = alloc > 0
        self.inv_alloc = np.where(self.valid, 1.0 / np.where(self.valid, alloc, 1.0), 0.0)
        self.k = np.maximum(self.valid.sum(axis=1), 1).astype(np.float64)
        total_alloc = alloc.sum(axis=0)
        demand = snapshot.used[:, self.cols].sum(axis=0) + batch_demand[self.cols]
        per_resource = np.where(total_alloc > 0, demand / np.where(total_alloc > 0, total_alloc, 1), 0.0)
        self.target = float(per_resource.mean()) if len(per_resource) else 0.0
        weights = config.balance.classes
        self.class_weights = np.array(
            [[weights.get(c, {}).get(r, 0.0) for r in self.names] for c in CLASSES], dtype=np.float64
        )
        # Mean utilisation of each node before the batch (a cheap pre-selection key).
        self.load = (snapshot.used[:, self.cols] * self.inv_alloc).sum(axis=1) / self.k
        self.w_intra = config.balance.intra_node
        self.w_inter = config.balance.inter_node
        self.w_class = config.balance.pod_class

    # -- utilisation ---------------------------------------------------------------------------
    def util(self, used: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64]) -> FloatArray:
        util: FloatArray = used[np.ix_(nodes, self.cols)].astype(np.float64) * self.inv_alloc[nodes]
        return util

    def node_terms(self, util: FloatArray, nodes: npt.NDArray[np.int64]) -> tuple[FloatArray, FloatArray]:
        valid = self.valid[nodes]
        k = self.k[nodes]
        mean = util.sum(axis=1) / k
        intra = (np.abs(util - mean[:, None]) * valid).sum(axis=1)
        inter = np.abs(mean - self.target)
        return intra, inter

    def pod_class(self, vec: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """TBESK class of a pod on each node: 0 compressible, 1 incompressible, 2 balanced."""
        share = {
            r: vec[c] * self.inv_alloc[nodes, i] for i, (r, c) in enumerate(zip(self.names, self.cols, strict=True))
        }
        zero = np.zeros(len(nodes))
        cpu, mem = share.get("cpu", zero), share.get("memory", zero)
        net, disk = share.get("placer.io/bandwidth", zero), share.get("ephemeral-storage", zero)
        defined1 = (cpu > 0) & (mem > 0)
        defined2 = (net > 0) & (disk > 0)
        r1 = np.where(defined1, cpu / np.where(mem > 0, mem, 1), 1.0)
        r2 = np.where(defined2, net / np.where(disk > 0, disk, 1), 1.0)
        comp = (defined1 | defined2) & (~defined1 | (r1 > 1)) & (~defined2 | (r2 > 1))
        incomp = (defined1 | defined2) & (~defined1 | (r1 < 1)) & (~defined2 | (r2 < 1))
        return np.where(comp, 0, np.where(incomp, 1, 2)).astype(np.int64)

    def class_cost(
        self, vec: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64], used: npt.NDArray[np.int64]
    ) -> FloatArray:
        after = (used[np.ix_(nodes, self.cols)] + vec[self.cols]) * self.inv_alloc[nodes]
        weights = self.class_weights[self.pod_class(vec, nodes)]
        return (after * weights).sum(axis=1)  # type: ignore[no-any-return]

    # -- strategy cost of adding one pod ---------------------------------------------------------
    def delta(
        self, vec: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64], used: npt.NDArray[np.int64]
    ) -> FloatArray:
        """Change of the strategy objective when one pod of ``vec`` joins each of ``nodes``."""
        if len(nodes) == 0:
            return np.zeros(0)
        before = self.util(used, nodes)
        after = before + vec[self.cols] * self.inv_alloc[nodes]
        strategy = self.config.strategy
        if strategy == "pack":
            empty = used[nodes].sum(axis=1) == 0
            fullness = before.sum(axis=1) / self.k[nodes]
            return 1000.0 * empty - fullness  # type: ignore[no-any-return]
        intra0, inter0 = self.node_terms(before, nodes)
        intra1, inter1 = self.node_terms(after, nodes)
        if strategy == "spread":
            return inter1 - inter0
        return (
            self.w_intra * (intra1 - intra0)
            + self.w_inter * (inter1 - inter0)
            + self.w_class * self.class_cost(vec, nodes, self.snapshot.used)
        )

    def removal(self, vec: npt.NDArray[np.int64], node: int, used: npt.NDArray[np.int64]) -> float:
        """Change of the strategy objective when one pod of ``vec`` leaves ``node`` (balance, spread)."""
        at = np.array([node], dtype=np.int64)
        before = self.util(used, at)
        after = before - vec[self.cols] * self.inv_alloc[at]
        intra0, inter0 = self.node_terms(before, at)
        intra1, inter1 = self.node_terms(after, at)
        if self.config.strategy == "spread":
            return float(inter1[0] - inter0[0])
        return float(
            self.w_intra * (intra1[0] - intra0[0])
            + self.w_inter * (inter1[0] - inter0[0])
            - self.w_class * self.class_cost(vec, at, self.snapshot.used)[0]
        )
