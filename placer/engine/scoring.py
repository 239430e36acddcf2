"""What every objective reads about one decision, computed once (kube-scheduler's PreScore state).

A ``Scorer`` holds the balance resources present in the cluster, each node's inverse allocatable,
the cluster's target utilisation once the batch is placed, the TBESK class weights and the
strategy objective chosen by the config. The strategy's float cost, its insertion and removal
deltas and its integer CP-SAT term are defined once, in ``placer.engine.objectives``; the methods
here only delegate, so the greedy pass, descent, candidates, LNS and both CP-SAT models rank
placements by the same definition.
"""

from __future__ import annotations

import copy

import numpy as np
import numpy.typing as npt

from placer.engine.objectives.registry import decision_strategy, strategy_objective
from placer.engine.objectives.strategy import StrategyObjective
from placer.engine.snapshot import Snapshot
from placer.models import Config, StrategyName
from placer.models.config import PodClass

__all__ = ["CLASSES", "FloatArray", "IntArray", "Scorer"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

CLASSES: tuple[PodClass, ...] = ("compressible", "incompressible", "balanced")


class Scorer:
    def __init__(self, snapshot: Snapshot, config: Config, batch_demand: IntArray) -> None:
        self.snapshot = snapshot
        self.config = config
        self.strategy: StrategyObjective = decision_strategy(config.strategy, snapshot, batch_demand)
        wanted = [r for r in dict.fromkeys(config.balance.resources) if r in snapshot.resources]
        present = [snapshot.column(r) for r in wanted if snapshot.alloc[:, snapshot.column(r)].sum() > 0]
        self.cols: IntArray = np.array(present, dtype=np.int64)
        self.names = [snapshot.resources[c] for c in present]
        alloc = snapshot.alloc[:, self.cols].astype(np.float64)
        self.valid = alloc > 0
        self.inv_alloc = np.where(self.valid, 1.0 / np.where(self.valid, alloc, 1.0), 0.0)
        self.k = np.maximum(self.valid.sum(axis=1), 1).astype(np.float64)
        total_alloc = alloc.sum(axis=0)
        demand = snapshot.used[:, self.cols].sum(axis=0) + batch_demand[self.cols]
        per_resource = np.where(total_alloc > 0, demand / np.where(total_alloc > 0, total_alloc, 1), 0.0)
        self.target = float(per_resource.mean()) if len(per_resource) else 0.0
        # Per node, the mean utilisation the batch should bring it to (``aim``), instead of target.
        self.fill: FloatArray | None = None
        weights = config.balance.classes
        self.class_weights = np.array(
            [[weights.get(c, {}).get(r, 0.0) for r in self.names] for c in CLASSES], dtype=np.float64
        )
        # Mean utilisation of each node before the batch (a cheap pre-selection key).
        self.load = (snapshot.used[:, self.cols] * self.inv_alloc).sum(axis=1) / self.k
        self.w_intra = config.balance.intra_node
        self.w_inter = config.balance.inter_node
        self.w_class = config.balance.pod_class

    def with_strategy(self, name: StrategyName) -> Scorer:
        """The same precomputed state, scoring with another strategy."""
        other = copy.copy(self)
        other.config = self.config.model_copy(update={"strategy": name})
        other.strategy = strategy_objective(name)
        return other

    def aim(self, fill: FloatArray) -> None:
        """Aim each node at its own mean utilisation (``placer.engine.backlog.aim``: where the
        plan of the batch and the pods waiting behind it puts the batch) instead of the cluster's."""
        self.fill = fill

    def target_of(self, nodes: IntArray) -> FloatArray:
        """The mean utilisation each of ``nodes`` is aimed at."""
        return self.fill[nodes] if self.fill is not None else np.full(len(nodes), self.target)

    # -- utilisation ---------------------------------------------------------------------------
    def util_rows(self, rows: IntArray, nodes: IntArray) -> FloatArray:
        """Utilisation of the balance resources for ``rows`` (full resource rows of ``nodes``)."""
        util: FloatArray = rows[:, self.cols].astype(np.float64) * self.inv_alloc[nodes]
        return util

    def util(self, used: IntArray, nodes: IntArray) -> FloatArray:
        return self.util_rows(used[nodes], nodes)

    def node_terms(self, util: FloatArray, nodes: IntArray) -> tuple[FloatArray, FloatArray]:
        """(intra-node L1 skew, distance of the node's mean utilisation from the target) per node."""
        valid = self.valid[nodes]
        k = self.k[nodes]
        mean = util.sum(axis=1) / k
        intra = (np.abs(util - mean[:, None]) * valid).sum(axis=1)
        inter = np.abs(mean - self.target_of(nodes))
        return intra, inter

    def pod_class(self, vec: IntArray, nodes: IntArray) -> IntArray:
        """TBESK class of a pod on each node: 0 compressible, 1 incompressible, 2 balanced. ``vec``
        is one request vector, or one per node (a row per entry of ``nodes``)."""
        share = {
            r: vec[..., c] * self.inv_alloc[nodes, i]
            for i, (r, c) in enumerate(zip(self.names, self.cols, strict=True))
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

    def class_cost(self, vec: IntArray, nodes: IntArray, used: IntArray | None = None) -> FloatArray:
        """TBESK's class-weighted utilisation a pod meets on each node: before the decision, or in
        the state ``used`` (a pass placing pods one at a time); ``vec`` as in ``pod_class``."""
        return self.class_cost_rows(vec, nodes, (self.snapshot.used if used is None else used)[nodes])

    def class_cost_rows(self, vec: IntArray, nodes: IntArray, rows: IntArray) -> FloatArray:
        """``class_cost`` with each node's row of ``used`` given (``rows``, one per entry of ``nodes``)."""
        after = (rows[:, self.cols] + vec[..., self.cols]) * self.inv_alloc[nodes]
        weights = self.class_weights[self.pod_class(vec, nodes)]
        return (after * weights).sum(axis=1)  # type: ignore[no-any-return]

    # -- the strategy objective (defined in placer.engine.objectives) ----------------------------
    def delta(self, vec: IntArray, nodes: IntArray, used: IntArray) -> FloatArray:
        """Change of the strategy cost when one pod of ``vec`` joins each of ``nodes``."""
        return self.strategy.delta(self, vec, nodes, used)

    def delta_rows(self, vec: IntArray, nodes: IntArray, rows: IntArray) -> FloatArray:
        """``delta`` with each node's row of ``used`` given (``StrategyObjective.delta_rows``)."""
        return self.strategy.delta_rows(self, vec, nodes, rows)

    def removal(self, vec: IntArray, node: int, used: IntArray) -> float:
        """Change of the strategy cost when one pod of ``vec`` leaves ``node``."""
        return self.strategy.removal(self, vec, node, used)
