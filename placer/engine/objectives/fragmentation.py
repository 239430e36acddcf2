"""GPU nodes placed against fragmentation (Weng et al., "Beware of Fragmentation", ATC'23).

GPUs are the device plugin's whole ``nvidia.com/gpu`` and the fractional ``placer.io/gpu-milli``
(1000 per GPU; a pod sharing a device asks for its share, a pod with k whole GPUs for both k and
1000 k), a node's model its label ``nvidia.com/gpu.product``. Balancing spreads GPU pods over
nodes and strands the capacity big or model-bound pods need later; this strategy keeps the
configured one (``balance`` or ``spread``) for nodes without GPUs and, on nodes with GPUs,
minimises the *expected fragmentation*: the GPU capacity the workload to come could not use.

The workload to come is the distribution of GPU requests among the running pods (``Workload``,
the most frequent ``TYPES`` shapes: GPU request, the models the pod may use, its median cpu and
memory), or one whole GPU on any model when nothing runs yet. For a node with ``free`` milli-GPU
left and a shape t, the fragment F_t is all of ``free`` when t cannot use the node (another model,
or no room on any resource) and otherwise what pods of t alone, packed on it, would leave unused
(the remainder of ``free`` by t's GPU request, or beyond what the node's cpu, memory and whole
devices admit). A node costs ``WEIGHT`` per GPU of sum_t popularity_t scarcity_t F_t: placing a
pod where that grows least is FGD's rule, and it packs GPU pods by model (a model-bound shape
counts the whole free capacity of every other model as fragment, so unbound pods go elsewhere).
``scarcity_t``, the cluster's GPUs over those of the models t may use (1 for unbound shapes), is
placer's addition: on the public trace (docs/bench/gputrace.md) FGD's popularity alone lets
unbound pods fill the few small nodes of a model that a twentieth of the pods need, so those
pods are left out early.

Per pod on a GPU node: ``HOLD`` for a pod asking for no GPU (GPU nodes keep their cpu and memory
for GPU pods while other nodes have room), and a small emptiness tie-break (fuller nodes first).

The CP-SAT form is the configured strategy's term with every resource of each GPU node the model
touches held at its value in the answer so far (``Term.fixed``): the float cost, which the greedy
pass, the descents and the neighbourhood search use, is the one that places GPU pods, and CP-SAT
keeps their nodes as those phases leave them (the term's value differs from the float cost by
the constant those nodes add).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine.objectives.loads import LoadModel
from placer.engine.objectives.strategy import StrategyObjective, Term
from placer.engine.snapshot import Snapshot
from placer.models import POD_COUNT, Pod

if TYPE_CHECKING:
    from placer.engine.scoring import FloatArray, IntArray, Scorer

BoolArray = npt.NDArray[np.bool_]

__all__ = [
    "GPU",
    "GPU_MILLI",
    "HOLD",
    "MILLI",
    "PRODUCT",
    "WEIGHT",
    "Fragmentation",
    "Shape",
    "Workload",
    "fragment",
    "gpu_milli",
    "pod_models",
    "uses_gpus",
]

GPU = "nvidia.com/gpu"
GPU_MILLI = "placer.io/gpu-milli"
PRODUCT = "nvidia.com/gpu.product"
MILLI = 1000
TYPES = 48  # shapes of the workload to come, the most frequent ones
WEIGHT = 10.0  # cost per GPU of expected fragment (a balance cost is at most a few units per node)
HOLD = 1.0  # per pod asking for no GPU on a GPU node
TIE = 1e-3  # per pod, times the GPU node's free share: fuller nodes first among equals


def gpu_milli(requests: dict[str, int]) -> int:
    """A pod's GPU request in milli-GPU: its ``placer.io/gpu-milli``, else 1000 per whole GPU."""
    return int(requests.get(GPU_MILLI) or MILLI * requests.get(GPU, 0))


def pod_models(pod: Pod) -> frozenset[str] | None:
    """The GPU models a pod may run on, by its nodeSelector or its required node affinity
    (``In`` on ``nvidia.com/gpu.product`` in every term); None: any model."""
    if PRODUCT in pod.node_selector:
        return frozenset({pod.node_selector[PRODUCT]})
    if not pod.required_terms:
        return None
    models: set[str] = set()
    for term in pod.required_terms:
        values = [r.values for r in term.match_expressions if r.key == PRODUCT and r.operator == "In"]
        if not values:
            return None
        models |= set(values[0])
    return frozenset(models)


@dataclass(frozen=True)
class Shape:
    """A shape of GPU pod: GPU request (milli), whether whole devices, models (None: any), the
    median cpu and memory of its pods, and its share of the workload."""

    milli: int
    whole: bool
    models: frozenset[str] | None
    cpu: int
    memory: int
    share: float


@dataclass(frozen=True)
class Workload:
    shapes: tuple[Shape, ...]

    def allowed(self, models: Sequence[str | None]) -> BoolArray:
        """[shape, node]: whether the shape may run on a node of each of ``models``."""
        return np.array([[t.models is None or m in t.models for m in models] for t in self.shapes], dtype=bool)

    @staticmethod
    def of(pods: Sequence[Pod]) -> Workload:
        """The most frequent GPU shapes among ``pods``; one whole GPU when none asks for a GPU."""
        groups: dict[tuple[int, bool, frozenset[str] | None], list[Pod]] = {}
        for pod in pods:
            milli = gpu_milli(pod.requests)
            if milli:
                groups.setdefault((milli, pod.requests.get(GPU, 0) > 0, pod_models(pod)), []).append(pod)
        if not groups:
            return Workload((Shape(MILLI, True, None, 0, 0, 1.0),))
        counts = Counter({k: len(v) for k, v in groups.items()})
        top = counts.most_common(TYPES)
        total = sum(c for _, c in top)
        shapes = []
        for (milli, whole, models), count in top:
            members = groups[milli, whole, models]
            cpu = int(np.median([p.requests.get("cpu", 0) for p in members]))
            memory = int(np.median([p.requests.get("memory", 0) for p in members]))
            shapes.append(Shape(milli, whole, models, cpu, memory, count / total))
        return Workload(tuple(shapes))


def uses_gpus(snapshot: Snapshot, batch_demand: IntArray) -> bool:
    """Whether the decision places or finds GPU pods: the batch or the running pods ask for GPUs."""
    cols = [snapshot.column(r) for r in (GPU, GPU_MILLI) if r in snapshot.resources]
    return bool(cols) and bool(batch_demand[cols].any() or snapshot.used[:, cols].any())


def fragment(
    free: dict[str, FloatArray], allowed: BoolArray, workload: Workload, scarcity: FloatArray | None = None
) -> FloatArray:
    """Expected fragment, milli-GPU, of nodes with ``free`` room (``gpu``: whole devices,
    ``milli``, ``cpu``, ``memory``, ``pods``; one entry per node) where ``allowed[t, i]``: shape
    t may run on node i (``Workload.allowed``); each shape's share is multiplied by its
    ``scarcity`` when given."""
    shapes = workload.shapes
    t_milli = np.array([t.milli for t in shapes], dtype=np.float64)[:, None]
    t_whole = np.array([t.whole for t in shapes])[:, None]
    share = np.array([t.share for t in shapes])[:, None]
    if scarcity is not None:
        share = share * scarcity[:, None]
    milli = np.maximum(free["milli"], 0.0)[None, :]
    whole = np.minimum(free["gpu"][None, :], np.floor(milli / MILLI))
    count = np.where(t_whole, np.floor(whole / np.maximum(t_milli // MILLI, 1)), np.floor(milli / t_milli))
    for key, need in (("cpu", [t.cpu for t in shapes]), ("memory", [t.memory for t in shapes])):
        asks = np.array(need, dtype=np.float64)[:, None]
        room = np.floor(np.maximum(free[key], 0.0)[None, :] / np.where(asks > 0, asks, 1.0))
        count = np.where(asks > 0, np.minimum(count, room), count)
    count = np.minimum(count, np.maximum(free["pods"], 0.0)[None, :])
    usable = np.where(allowed, np.maximum(count, 0.0) * t_milli, 0.0)
    out: FloatArray = (share * (milli - usable)).sum(axis=0)
    return out


class Fragmentation(StrategyObjective):
    """The configured strategy off GPU nodes, expected fragmentation on them (module docstring)."""

    labels = frozenset({PRODUCT})

    def __init__(self, base: StrategyObjective, snapshot: Snapshot, workload: Workload) -> None:
        self.base = base
        self.name = base.name  # type: ignore[misc]  # the configured strategy, GPU-aware
        self.workload = workload
        res = snapshot.resources
        self._col = {k: (res.index(r) if r in res else -1) for k, r in _FREE.items()}
        gpus = snapshot.alloc[:, self._col["milli"]] if self._col["milli"] >= 0 else 0
        if self._col["gpu"] >= 0:
            gpus = np.maximum(gpus, MILLI * snapshot.alloc[:, self._col["gpu"]])
        self.gpu_nodes = np.asarray(gpus, dtype=np.int64) * np.ones(len(snapshot.nodes), dtype=np.int64) > 0
        self.allowed = workload.allowed([n.labels.get(PRODUCT) for n in snapshot.nodes])
        self.alloc_milli = np.maximum(np.asarray(gpus, dtype=np.float64), 1.0) * np.ones(len(snapshot.nodes))
        # A shape bound to models holding a small part of the GPUs weighs by how small.
        capacity = np.where(self.gpu_nodes, self.alloc_milli, 0.0)
        self.scarcity = capacity.sum() / np.maximum(self.allowed.astype(np.float64) @ capacity, 1.0)

    def _free(self, s: Scorer, rows: IntArray, nodes: IntArray) -> dict[str, FloatArray]:
        alloc = s.snapshot.alloc[nodes]
        out: dict[str, FloatArray] = {}
        for key, col in self._col.items():
            out[key] = (alloc[:, col] - rows[:, col]).astype(np.float64) if col >= 0 else np.zeros(len(nodes))
        if self._col["milli"] < 0:
            out["milli"] = MILLI * out["gpu"]
        if self._col["gpu"] < 0:
            out["gpu"] = np.floor(out["milli"] / MILLI)
        if self._col["pods"] < 0:
            out["pods"] = np.full(len(nodes), np.inf)
        return out

    def node_cost(self, s: Scorer, rows: IntArray, nodes: IntArray) -> FloatArray:
        gpu = self.gpu_nodes[nodes]
        out = np.zeros(len(nodes))
        if (~gpu).any():
            out[~gpu] = self.base.node_cost(s, rows[~gpu], nodes[~gpu])
        if gpu.any():
            at = nodes[gpu]
            frag = fragment(self._free(s, rows[gpu], at), self.allowed[:, at], self.workload, self.scarcity)
            out[gpu] = WEIGHT * frag / MILLI
        return out

    def pod_cost(self, s: Scorer, vec: IntArray, nodes: IntArray) -> FloatArray:
        gpu = self.gpu_nodes[nodes]
        out = np.zeros(len(nodes))
        if (~gpu).any():
            out[~gpu] = self.base.pod_cost(s, vec[~gpu] if vec.ndim == 2 else vec, nodes[~gpu])
        if gpu.any():
            at = nodes[gpu]
            rows = vec[gpu] if vec.ndim == 2 else np.broadcast_to(vec, (len(at), len(vec)))
            asks = np.zeros(len(at), dtype=bool)
            for key in ("gpu", "milli"):
                if self._col[key] >= 0:
                    asks |= rows[:, self._col[key]] > 0
            empty = self._free(s, s.snapshot.used[at], at)["milli"] / self.alloc_milli[at]
            out[gpu] = HOLD * ~asks + TIE * empty
        return out

    def preselect(self, s: Scorer, nodes: IntArray) -> FloatArray:
        """Nodes without GPUs by the configured strategy's key, then GPU nodes fuller first."""
        gpu = self.gpu_nodes[nodes]
        key = np.asarray(self.base.preselect(s, nodes), dtype=np.float64).copy()
        if gpu.any():
            at = nodes[gpu]
            free = self._free(s, s.snapshot.used[at], at)["milli"] / self.alloc_milli[at]
            key[gpu] = 2.0 + np.clip(free, 0.0, 1.0)  # after nodes without GPUs (loads below 2)
        return key

    def term(self, model: LoadModel) -> Term:
        inner = self.base.term(model)
        held: list[cp_model.LinearExprT] = []
        for n, entries in sorted(model.load_entries().items()):
            if not self.gpu_nodes[n]:
                continue
            for col in sorted({int(c) for e in entries for c in np.flatnonzero(e.vec)}):
                terms = [(e.sign * int(e.vec[col]), e.var) for e in entries if e.vec[col]]
                held.append(cp_model.LinearExpr.weighted_sum([v for _, v in terms], [c for c, _ in terms]))
        return Term(
            inner.name,
            inner.expr,
            inner.maximize,
            inner.unit,
            fixed=inner.fixed + tuple(held),
            floors=inner.floors,
            aux=inner.aux,
            held=inner.held,
        )


# What ``Fragmentation`` reads of a node's room, by resource.
_FREE = {"gpu": GPU, "milli": GPU_MILLI, "cpu": "cpu", "memory": "memory", "pods": POD_COUNT}
