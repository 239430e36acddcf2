"""Seeded cluster generators for the benchmarks.

Three generators:

- ``tbesk``: the TBESK evaluation setting as a kubectl ``List`` (what ``placer solve`` reads).
  31 nodes of three types, ``TBESK_NODE_COUNTS`` = 11 x 16 cores / 24574Mi / 30000 Mbit/s / 800Gi,
  10 x 32 / 32768Mi / 30000 / 1000Gi and 10 x 64 / 49512Mi / 40000 / 1200Gi; bandwidth is the
  extended resource ``placer.io/bandwidth`` (Mbit/s). Node ``pods`` allocatable is 250 (not 110),
  so that the pod count never binds before cpu, memory, bandwidth or disk do: 1,800 pods on 31
  nodes average 58 per node and a balanced placement puts ~100 on a 64-core node.
  1,800 bare pending pods (``schedulerName: placer``) with requests drawn uniformly, in integer
  units, from cpu 70m-580m, memory 212Mi-383Mi, bandwidth 50-700 Mbit/s and ephemeral-storage
  1536Mi-15360Mi (1.5Gi-15Gi), in the three TBESK classes, a third each. The class of a pod on a
  node follows TBESK: with C_r = request_r / node_total_r, compressible-heavy when
  C_cpu/C_mem > 1 and C_net/C_disk > 1, incompressible-heavy when both ratios are < 1, balanced
  otherwise. Requests are drawn by rejection so that each pod has its class on *every* node type
  (a balanced pod is cpu-heavy and disk-heavy, or memory-heavy and bandwidth-heavy, everywhere).
  The class is also written to the label ``placer.io/tbesk-class`` for inspection.
- ``cluster``: a large heterogeneous cluster built directly as a ``placer.models.Cluster`` (no
  JSON round trip): eight instance shapes, three zones, labels for selectors, ~5% nodes tainted
  ``dedicated=batch:NoSchedule``, ~5% spot nodes with a PreferNoSchedule taint, ~1.5% GPU nodes
  (tainted), ~0.5% cordoned; ``running_per_node`` running pods per node filling 30-70% of each
  resource; and a batch of ``pending`` pods from Deployments/Jobs with several replicas, mixed
  nodeSelectors and required/preferred affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt),
  tolerations, priorities, restart policies, a few host ports and weak-binding annotations.

- ``mixed``: issue 12's random heterogeneous cluster (``MixedShape``), built directly as a
  ``placer.models.Cluster``: nodes of nine sizes (general-purpose, cpu-optimised and
  memory-optimised, 4-32 cores, 8-256Gi; cpu and memory only, 250 pods each), cpu-heavy pods
  (0.25-2 cores, 128Mi-1Gi) and memory-heavy pods (0.1-0.5 cores, 1-8Gi) in a per-cluster mix,
  running pods filling a per-cluster share of 0-50 % of the cpu (unevenly: each node 0.5-1.5
  times that share), then bare pending pods until cpu demand reaches a per-cluster 60-85 %
  of the allocatable (or memory 90 %).

Everything is drawn from ``numpy.random.default_rng(seed)``: the same seed gives the same cluster
(and byte-identical JSON for ``tbesk``).

CLI: ``python -m benchmarks.generate tbesk --seed 1 --out examples/tbesk.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from placer.models import (
    Cluster,
    HostPort,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Owner,
    Pod,
    PreferredTerm,
    ReplicaSet,
    Taint,
    Toleration,
)

__all__ = [
    "BANDWIDTH",
    "TBESK_BANDWIDTH",
    "TBESK_CLASSES",
    "TBESK_CPU_M",
    "TBESK_DISK_MI",
    "TBESK_MAX_PODS",
    "TBESK_MEMORY_MI",
    "TBESK_NODE_COUNTS",
    "TBESK_NODE_TYPES",
    "TBESK_PODS",
    "MixedShape",
    "NodeType",
    "cluster",
    "main",
    "mixed",
    "tbesk_class",
    "tbesk_classes",
    "tbesk_document",
    "tbesk_json",
    "tbesk_requests",
]

MI = 2**20
GI = 2**30
BANDWIDTH = "placer.io/bandwidth"
TBESK_CLASS_LABEL = "placer.io/tbesk-class"
_EPOCH = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
_UID_NAMESPACE = uuid.UUID("6f2c1d0e-8a4b-4c3d-9e5f-7a6b5c4d3e2f")

IntArray = npt.NDArray[np.int64]
TbeskClass = Literal["compressible", "incompressible", "balanced"]


# --------------------------------------------------------------------------------------------
# TBESK
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeType:
    """A TBESK node type: cores, memory (Mi), bandwidth (Mbit/s), disk (Gi)."""

    name: str
    cpu_cores: int
    memory_mi: int
    bandwidth: int
    disk_gi: int

    @property
    def totals(self) -> tuple[int, int, int, int]:
        """(cpu millicores, memory Mi, bandwidth Mbit/s, disk Mi): the units of ``tbesk_requests``."""
        return self.cpu_cores * 1000, self.memory_mi, self.bandwidth, self.disk_gi * 1024


TBESK_NODE_TYPES = (
    NodeType("tbesk-16c", 16, 24574, 30000, 800),
    NodeType("tbesk-32c", 32, 32768, 30000, 1000),
    NodeType("tbesk-64c", 64, 49512, 40000, 1200),
)
TBESK_NODE_COUNTS = (11, 10, 10)
TBESK_MAX_PODS = 250
TBESK_PODS = 1800
# Inclusive ranges, in the integer units the file uses.
TBESK_CPU_M = (70, 580)  # 0.07-0.58 cores
TBESK_MEMORY_MI = (212, 383)
TBESK_BANDWIDTH = (50, 700)  # Mbit/s = 0.05-0.7 Gbit/s
TBESK_DISK_MI = (1536, 15360)  # 1.5Gi-15Gi
TBESK_CLASSES: tuple[TbeskClass, ...] = ("compressible", "incompressible", "balanced")
_RANGES = (TBESK_CPU_M, TBESK_MEMORY_MI, TBESK_BANDWIDTH, TBESK_DISK_MI)


def tbesk_classes(requests: IntArray, node_type: NodeType) -> IntArray:
    """TBESK class code per row of ``requests`` (n x [cpu m, memory Mi, bandwidth, disk Mi]) on a
    node type: 0 compressible-heavy, 1 incompressible-heavy, 2 balanced. Exact integer compares."""
    cpu_t, mem_t, net_t, disk_t = node_type.totals
    req = np.asarray(requests, dtype=np.int64)
    # C_cpu / C_mem > 1  <=>  cpu * mem_total > mem * cpu_total (all positive)
    r1 = np.sign(req[:, 0] * mem_t - req[:, 1] * cpu_t)
    r2 = np.sign(req[:, 2] * disk_t - req[:, 3] * net_t)
    comp = (r1 > 0) & (r2 > 0)
    incomp = (r1 < 0) & (r2 < 0)
    return np.where(comp, 0, np.where(incomp, 1, 2)).astype(np.int64)


def tbesk_class(requests: Sequence[int], node_type: NodeType) -> TbeskClass:
    """TBESK class of one pod ([cpu m, memory Mi, bandwidth, disk Mi]) on a node type."""
    code = int(tbesk_classes(np.array([requests], dtype=np.int64), node_type)[0])
    return TBESK_CLASSES[code]


def _class_everywhere(requests: IntArray) -> IntArray:
    """Class code if it is the same on every TBESK node type, else -1."""
    codes = np.stack([tbesk_classes(requests, t) for t in TBESK_NODE_TYPES])
    same = np.all(codes == codes[0], axis=0)
    return np.where(same, codes[0], -1).astype(np.int64)


def tbesk_requests(rng: np.random.Generator, pods: int = TBESK_PODS) -> tuple[IntArray, IntArray]:
    """(requests n x 4, class codes n): a third of the pods per class (the remainder to the first
    classes), each drawn uniformly from the TBESK ranges conditioned on its class holding on every
    node type; pods are returned in a random order."""
    counts = [pods // 3 + (1 if c < pods % 3 else 0) for c in range(3)]
    lows = np.array([r[0] for r in _RANGES], dtype=np.int64)
    highs = np.array([r[1] for r in _RANGES], dtype=np.int64)
    chunks: list[IntArray] = []
    codes: list[IntArray] = []
    for code, count in enumerate(counts):
        got: list[IntArray] = []
        have = 0
        while have < count:
            draw = rng.integers(lows, highs + 1, size=(4096, 4), dtype=np.int64)
            keep = draw[_class_everywhere(draw) == code]
            got.append(keep)
            have += len(keep)
        chunks.append(np.concatenate(got)[:count])
        codes.append(np.full(count, code, dtype=np.int64))
    requests = np.concatenate(chunks) if chunks else np.zeros((0, 4), dtype=np.int64)
    classes = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)
    order = rng.permutation(len(requests))
    return requests[order], classes[order]


def _uid(name: str) -> str:
    return str(uuid.uuid5(_UID_NAMESPACE, name))


def _stamp(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tbesk_node(name: str, t: NodeType, max_pods: int) -> dict[str, Any]:
    resources = {
        "cpu": str(t.cpu_cores),
        "ephemeral-storage": f"{t.disk_gi}Gi",
        "memory": f"{t.memory_mi}Mi",
        "pods": str(max_pods),
        BANDWIDTH: str(t.bandwidth),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "creationTimestamp": _stamp(-86400),
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": t.name,
            },
            "name": name,
            "uid": _uid(f"node/{name}"),
        },
        "spec": {},
        "status": {
            "allocatable": resources,
            "capacity": dict(resources),
            "conditions": [
                {
                    "lastTransitionTime": _stamp(-86400),
                    "message": "kubelet is posting ready status",
                    "reason": "KubeletReady",
                    "status": "True",
                    "type": "Ready",
                }
            ],
        },
    }


def _tbesk_pod(index: int, req: Sequence[int], cls: str) -> dict[str, Any]:
    name = f"tbesk-{index:04d}"
    cpu, mem, net, disk = (int(v) for v in req)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": _stamp(index),
            "labels": {"app": "tbesk", TBESK_CLASS_LABEL: cls},
            "name": name,
            "namespace": "tbesk",
            "uid": _uid(f"pod/tbesk/{name}"),
        },
        "spec": {
            "containers": [
                {
                    "image": "registry.example.com/tbesk/workload:1.0",
                    "name": "workload",
                    "resources": {
                        # Extended resources cannot be overcommitted: limits equal requests.
                        "limits": {BANDWIDTH: str(net)},
                        "requests": {
                            "cpu": f"{cpu}m",
                            "ephemeral-storage": f"{disk}Mi",
                            "memory": f"{mem}Mi",
                            BANDWIDTH: str(net),
                        },
                    },
                }
            ],
            "priority": 0,
            "restartPolicy": "Always",
            "schedulerName": "placer",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def tbesk_document(
    seed: int,
    pods: int = TBESK_PODS,
    node_counts: Sequence[int] = TBESK_NODE_COUNTS,
    max_pods: int = TBESK_MAX_PODS,
) -> dict[str, Any]:
    """The TBESK setting as a kubectl ``List`` document (Nodes, then bare pending Pods)."""
    if len(node_counts) != len(TBESK_NODE_TYPES):
        raise ValueError(f"node_counts needs {len(TBESK_NODE_TYPES)} entries, got {len(node_counts)}")
    rng = np.random.default_rng(seed)
    items: list[dict[str, Any]] = []
    for t, count in zip(TBESK_NODE_TYPES, node_counts, strict=True):
        items.extend(_tbesk_node(f"{t.name}-{i + 1:02d}", t, max_pods) for i in range(count))
    requests, classes = tbesk_requests(rng, pods)
    items.extend(
        _tbesk_pod(i + 1, req.tolist(), TBESK_CLASSES[int(c)])
        for i, (req, c) in enumerate(zip(requests, classes, strict=True))
    )
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def tbesk_json(seed: int, pods: int = TBESK_PODS, node_counts: Sequence[int] = TBESK_NODE_COUNTS) -> str:
    """``tbesk_document`` serialised: deterministic bytes for a given seed."""
    return json.dumps(tbesk_document(seed, pods, node_counts), indent=2) + "\n"


# --------------------------------------------------------------------------------------------
# Scale cluster
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Shape:
    instance: str
    pool: str
    cores: int
    memory_gi: int
    disk_gi: int
    bandwidth: int
    weight: float


_SHAPES = (
    _Shape("m.xlarge", "general", 4, 16, 100, 10000, 0.15),
    _Shape("m.2xlarge", "general", 8, 32, 200, 10000, 0.20),
    _Shape("m.4xlarge", "general", 16, 64, 400, 25000, 0.20),
    _Shape("c.4xlarge", "compute", 16, 32, 200, 25000, 0.10),
    _Shape("c.8xlarge", "compute", 32, 64, 400, 25000, 0.10),
    _Shape("r.4xlarge", "memory", 16, 128, 400, 25000, 0.10),
    _Shape("r.8xlarge", "memory", 32, 256, 800, 40000, 0.10),
    _Shape("m.16xlarge", "general", 64, 256, 1000, 40000, 0.05),
)
ZONES = ("zone-a", "zone-b", "zone-c")
REGION = "region-1"
GPU = "nvidia.com/gpu"
NAMESPACES = ("default", "shop", "data", "ml", "infra")
BATCH_TAINT = Taint(key="dedicated", value="batch", effect="NoSchedule")
SPOT_TAINT = Taint(key="spot", value="true", effect="PreferNoSchedule")
GPU_TAINT = Taint(key=GPU, value="present", effect="NoSchedule")
# Resource columns of the running-pod fill: cpu (m), memory (bytes), ephemeral-storage, bandwidth.
_FILL = ("cpu", "memory", "ephemeral-storage", BANDWIDTH)


def _nodes(rng: np.random.Generator, count: int) -> list[Node]:
    weights = np.array([s.weight for s in _SHAPES])
    shape_idx = rng.choice(len(_SHAPES), size=count, p=weights / weights.sum())
    zone = rng.integers(0, len(ZONES), size=count)
    generation = rng.integers(1, 7, size=count)
    arm = rng.random(count) < 0.10
    ssd = rng.random(count) < 0.40
    kind = rng.random(count)  # < .05 batch, < .10 spot, < .115 gpu, < .12 cordoned
    nodes = []
    for i in range(count):
        s = _SHAPES[int(shape_idx[i])]
        name = f"node-{i:05d}"
        labels = {
            "kubernetes.io/arch": "arm64" if arm[i] else "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": s.instance,
            "topology.kubernetes.io/region": REGION,
            "topology.kubernetes.io/zone": ZONES[int(zone[i])],
            "placer.io/pool": s.pool,
            "example.com/generation": str(int(generation[i])),
        }
        if ssd[i]:
            labels["example.com/local-ssd"] = "true"
        allocatable = {
            "cpu": s.cores * 1000 - 80 - 10 * s.cores,
            "memory": (s.memory_gi * 1024 * 94 // 100 - 100) * MI,
            "ephemeral-storage": s.disk_gi * 9 // 10 * GI,
            "pods": 110,
            BANDWIDTH: s.bandwidth,
        }
        taints: tuple[Taint, ...] = ()
        unschedulable = False
        k = float(kind[i])
        if k < 0.05:
            labels["example.com/dedicated"] = "batch"
            taints = (BATCH_TAINT,)
        elif k < 0.10:
            labels["example.com/lifecycle"] = "spot"
            taints = (SPOT_TAINT,)
        elif k < 0.115:
            labels["example.com/gpu"] = "a100"
            allocatable[GPU] = 8
            taints = (GPU_TAINT,)
        elif k < 0.12:
            unschedulable = True
        nodes.append(
            Node(name=name, labels=labels, allocatable=allocatable, taints=taints, unschedulable=unschedulable)
        )
    return nodes


def _running(rng: np.random.Generator, nodes: Sequence[Node], per_node: int) -> tuple[list[Pod], list[ReplicaSet]]:
    count = len(nodes)
    if per_node <= 0 or count == 0:
        return [], []
    alloc = np.array([[n.allocatable.get(r, 0) for r in _FILL] for n in nodes], dtype=np.float64)
    util = rng.uniform(0.30, 0.70, size=(count, len(_FILL)))
    shares = [rng.dirichlet(np.full(per_node, 2.0), size=count) for _ in _FILL]
    amounts = [np.floor(alloc[:, j, None] * util[:, j, None] * shares[j]) for j in range(len(_FILL))]
    mem_mi = np.floor(amounts[1] / MI).astype(np.int64)
    disk_mi = np.floor(amounts[2] / MI).astype(np.int64)
    cpu = amounts[0].astype(np.int64)
    net = amounts[3].astype(np.int64)
    n_rs = max(20, count // 2)
    rs_of = rng.integers(0, n_rs, size=(count, per_node))
    prio = np.where(rng.random((count, per_node)) < 0.10, 1000, 0)
    restart_draw = rng.random((count, per_node))
    replicasets = [
        ReplicaSet(
            namespace=NAMESPACES[r % len(NAMESPACES)],
            name=f"svc-{r:05d}-{r * 7919 % 99991:05x}",
            uid=f"rs-{r}",
            scheduler_name="placer" if r % 3 == 0 else "default-scheduler",
            owner=Owner(kind="Deployment", name=f"svc-{r:05d}", uid=f"deploy-{r}"),
        )
        for r in range(n_rs)
    ]
    owners = [Owner(kind="ReplicaSet", name=rs.name, uid=rs.uid) for rs in replicasets]
    pods: list[Pod] = []
    created = _stamp(-3600)
    for i, node in enumerate(nodes):
        for k in range(per_node):
            r = int(rs_of[i, k])
            requests = {
                "cpu": max(int(cpu[i, k]), 1),
                "memory": max(int(mem_mi[i, k]), 1) * MI,
                "ephemeral-storage": int(disk_mi[i, k]) * MI,
                BANDWIDTH: int(net[i, k]),
            }
            requests = {key: v for key, v in requests.items() if v > 0}
            draw = float(restart_draw[i, k])
            restart = "Always" if draw < 0.85 else ("OnFailure" if draw < 0.95 else "Never")
            pods.append(
                Pod(
                    namespace=replicasets[r].namespace,
                    name=f"{replicasets[r].name}-{i:05d}{k:02d}",
                    uid=f"run-{i}-{k}",
                    node_name=node.name,
                    phase="Running",
                    scheduler_name=replicasets[r].scheduler_name,
                    creation=created,
                    start_time=created,
                    labels={"app": f"svc-{r:05d}"},
                    requests=requests,
                    score_cpu=requests["cpu"],
                    score_memory=requests["memory"],
                    priority=int(prio[i, k]),
                    restart_policy=restart,
                    owner=owners[r],
                )
            )
    return pods, replicasets


def _req(key: str, op: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=op, values=values)


def _term(*reqs: NodeSelectorRequirement) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=reqs)


_CONSTRAINT_KINDS = (
    ("none", 0.28),
    ("zone-selector", 0.08),
    ("pool-in", 0.08),
    ("zone-notin", 0.07),
    ("ssd-exists", 0.07),
    ("generation-gt", 0.08),
    ("two-terms", 0.05),
    ("preferred", 0.08),
    ("gpu", 0.02),
    ("batch", 0.07),
    ("no-spot-lt", 0.07),
    ("spot-ok", 0.05),
)


@dataclass
class _Spec:
    requests: dict[str, int]
    node_selector: dict[str, str]
    required: tuple[NodeSelectorTerm, ...] | None
    preferred: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]
    host_ports: tuple[HostPort, ...]
    priority: int
    restart: str
    preemption: str
    annotations: dict[str, str]


def _pending_spec(rng: np.random.Generator) -> _Spec:
    cpu = int(rng.choice([100, 250, 500, 1000, 2000, 4000], p=[0.2, 0.25, 0.25, 0.15, 0.1, 0.05]))
    mem = int(rng.choice([128, 256, 512, 1024, 2048, 4096, 8192], p=[0.1, 0.2, 0.25, 0.2, 0.15, 0.07, 0.03]))
    requests = {"cpu": cpu, "memory": mem * MI}
    if rng.random() < 0.5:
        requests["ephemeral-storage"] = int(rng.choice([1, 2, 5, 10])) * GI
    if rng.random() < 0.3:
        requests[BANDWIDTH] = int(rng.choice([50, 100, 250, 500]))
    names = [k for k, _ in _CONSTRAINT_KINDS]
    weights = np.array([w for _, w in _CONSTRAINT_KINDS])
    kind = names[int(rng.choice(len(names), p=weights / weights.sum()))]
    zone = ZONES[int(rng.integers(0, len(ZONES)))]
    node_selector: dict[str, str] = {}
    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredTerm, ...] = ()
    tolerations: list[Toleration] = []
    restart = str(rng.choice(["Always", "OnFailure", "Never"], p=[0.7, 0.2, 0.1]))
    if kind == "zone-selector":
        node_selector = {"topology.kubernetes.io/zone": zone}
    elif kind == "pool-in":
        required = (_term(_req("placer.io/pool", "In", "compute", "general")),)
    elif kind == "zone-notin":
        required = (_term(_req("topology.kubernetes.io/zone", "NotIn", zone)),)
    elif kind == "ssd-exists":
        required = (_term(_req("example.com/local-ssd", "Exists")),)
    elif kind == "generation-gt":
        required = (_term(_req("example.com/generation", "Gt", str(int(rng.integers(1, 5))))),)
    elif kind == "two-terms":
        required = (
            _term(_req("topology.kubernetes.io/zone", "In", zone)),
            _term(_req("placer.io/pool", "In", "memory"), _req("kubernetes.io/arch", "In", "amd64")),
        )
    elif kind == "preferred":
        preferred = (
            PreferredTerm(weight=50, preference=_term(_req("topology.kubernetes.io/zone", "In", zone))),
            PreferredTerm(weight=20, preference=_term(_req("example.com/generation", "Gt", "3"))),
        )
    elif kind == "gpu":
        node_selector = {"example.com/gpu": "a100"}
        tolerations.append(Toleration(key=GPU, operator="Exists", effect="NoSchedule"))
        requests[GPU] = int(rng.integers(1, 3))
    elif kind == "batch":
        node_selector = {"example.com/dedicated": "batch"}
        tolerations.append(Toleration(key="dedicated", operator="Equal", value="batch", effect="NoSchedule"))
        restart = str(rng.choice(["OnFailure", "Never"]))
    elif kind == "no-spot-lt":
        required = (_term(_req("example.com/lifecycle", "DoesNotExist"), _req("example.com/generation", "Lt", "5")),)
    elif kind == "spot-ok":
        tolerations.append(Toleration(key="spot", operator="Exists"))
        preferred = (PreferredTerm(weight=80, preference=_term(_req("example.com/lifecycle", "In", "spot"))),)
    annotations: dict[str, str] = {}
    if kind not in ("none", "preferred", "spot-ok"):
        draw = rng.random()
        if draw < 0.08:
            annotations["placer.io/when-no-node-fits"] = "ignore-affinity"
        elif draw < 0.12:
            annotations["placer.io/when-no-node-matches"] = "ignore-affinity"
    host_ports = (HostPort(port=9100),) if rng.random() < 0.03 else ()
    priority = int(rng.choice([0, 100, 1000], p=[0.6, 0.25, 0.15]))
    preemption = "Never" if rng.random() < 0.1 else "PreemptLowerPriority"
    return _Spec(
        requests=requests,
        node_selector=node_selector,
        required=required,
        preferred=preferred,
        tolerations=tuple(tolerations),
        host_ports=host_ports,
        priority=priority,
        restart=restart,
        preemption=preemption,
        annotations=annotations,
    )


def _pending(rng: np.random.Generator, count: int) -> tuple[list[Pod], list[ReplicaSet]]:
    pods: list[Pod] = []
    replicasets: list[ReplicaSet] = []
    workload = 0
    while len(pods) < count:
        replicas = min(int(rng.choice([1, 1, 1, 2, 3, 4, 6, 8])), count - len(pods))
        spec = _pending_spec(rng)
        namespace = NAMESPACES[int(rng.integers(0, len(NAMESPACES)))]
        if spec.restart == "Always":
            rs_name = f"web-{workload:03d}-{int(rng.integers(0, 16**8)):08x}"
            rs = ReplicaSet(
                namespace=namespace,
                name=rs_name,
                uid=f"pending-rs-{workload}",
                scheduler_name="placer",
                owner=Owner(kind="Deployment", name=f"web-{workload:03d}", uid=f"pending-deploy-{workload}"),
            )
            replicasets.append(rs)
            owner = Owner(kind="ReplicaSet", name=rs_name, uid=rs.uid)
            base = rs_name
        else:
            base = f"job-{workload:03d}"
            owner = Owner(kind="Job", name=base, uid=f"pending-job-{workload}")
        for r in range(replicas):
            index = len(pods)
            pods.append(
                Pod(
                    namespace=namespace,
                    name=f"{base}-{r:02d}",
                    uid=f"pending-{index}",
                    scheduler_name="placer",
                    creation=_stamp(index),
                    labels={"app": base},
                    annotations=spec.annotations,
                    requests=spec.requests,
                    score_cpu=spec.requests["cpu"],
                    score_memory=spec.requests["memory"],
                    node_selector=spec.node_selector,
                    required_terms=spec.required,
                    preferred_terms=spec.preferred,
                    tolerations=spec.tolerations,
                    host_ports=spec.host_ports,
                    priority=spec.priority,
                    restart_policy=spec.restart,
                    preemption_policy=spec.preemption,
                    owner=owner,
                )
            )
        workload += 1
    return pods, replicasets


def cluster(nodes: int, running_per_node: int = 10, pending: int = 99, seed: int = 0) -> Cluster:
    """A heterogeneous cluster of ``nodes`` nodes with ``nodes * running_per_node`` running pods
    (30-70% of every node's cpu, memory, disk and bandwidth) and ``pending`` pending pods
    addressed to ``placer``. Deterministic for a given seed."""
    if nodes < 1:
        raise ValueError("a cluster needs at least one node")
    rng = np.random.default_rng(seed)
    node_list = _nodes(rng, nodes)
    running, running_rs = _running(rng, node_list, running_per_node)
    waiting, pending_rs = _pending(rng, pending)
    return Cluster(nodes=tuple(node_list), pods=(*running, *waiting), replicasets=(*running_rs, *pending_rs))


# --------------------------------------------------------------------------------------------
# Random heterogeneous clusters (issue 12, item 4)
# --------------------------------------------------------------------------------------------
# (cores, memory Gi): general-purpose 1:4, cpu-optimised 1:2, memory-optimised 1:8.
_MIXED_SIZES = ((4, 16), (8, 32), (16, 64), (32, 128), (8, 16), (16, 32), (32, 64), (4, 32), (16, 128))
_MIXED_MAX_PODS = 250


@dataclass(frozen=True)
class MixedShape:
    """What a ``mixed`` cluster was drawn with (the rest follows from the seed)."""

    nodes: int
    running_cpu: float  # share of the cluster's cpu the running pods request, 0-0.5
    target_cpu: float  # share of the cluster's cpu requested once the pending pods are placed, 0.6-0.85
    cpu_heavy: float  # share of the pods that are cpu-heavy (the others are memory-heavy)


def _mixed_requests(rng: np.random.Generator, cpu_heavy: float) -> dict[str, int]:
    if rng.random() < cpu_heavy:
        return {"cpu": int(rng.integers(250, 2001)), "memory": int(rng.integers(128, 1025)) * MI}
    return {"cpu": int(rng.integers(100, 501)), "memory": int(rng.integers(1024, 8193)) * MI}


def _mixed_pod(index: int, requests: dict[str, int], node: str | None) -> Pod:
    running = node is not None
    name = f"{'run' if running else 'app'}-{index:05d}"
    return Pod(
        namespace="default",
        name=name,
        uid=_uid(name),
        node_name=node,
        phase="Running" if running else "Pending",
        scheduler_name="placer",
        creation=_stamp(index - 10**6 if running else index),
        requests=requests,
        score_cpu=requests["cpu"],
        score_memory=requests["memory"],
    )


def mixed(
    seed: int, nodes: tuple[int, int] = (100, 400), running: tuple[float, float] = (0.0, 0.5)
) -> tuple[Cluster, MixedShape]:
    """A random heterogeneous cluster of ``nodes`` (inclusive range) nodes, running pods requesting
    a share of the cpu drawn from ``running``, and pending pods that bring the cpu requested to
    60-85 % (see the module docstring). Deterministic for a given seed and ranges."""
    rng = np.random.default_rng(seed)
    shape = MixedShape(
        nodes=int(rng.integers(nodes[0], nodes[1] + 1)),
        running_cpu=float(rng.uniform(*running)),
        target_cpu=float(rng.uniform(0.60, 0.85)),
        cpu_heavy=float(rng.uniform(0.3, 0.7)),
    )
    sizes = rng.integers(0, len(_MIXED_SIZES), size=shape.nodes)
    node_list = []
    for i, s in enumerate(sizes.tolist()):
        cores, mem_gi = _MIXED_SIZES[s]
        name = f"node-{i:04d}"
        node_list.append(
            Node(
                name=name,
                labels={"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
                allocatable={"cpu": cores * 1000, "memory": mem_gi * GI, "pods": _MIXED_MAX_PODS},
            )
        )
    pods: list[Pod] = []
    for node in node_list:
        cpu, mem = node.allocatable["cpu"], node.allocatable["memory"]
        fill = min(float(rng.uniform(0.5, 1.5)) * shape.running_cpu, 0.9) * cpu
        used_cpu = used_mem = 0
        while True:
            req = _mixed_requests(rng, shape.cpu_heavy)
            if used_cpu + req["cpu"] > fill or used_mem + req["memory"] > 0.9 * mem:
                break
            used_cpu += req["cpu"]
            used_mem += req["memory"]
            pods.append(_mixed_pod(len(pods), req, node.name))
    total_cpu = sum(n.allocatable["cpu"] for n in node_list)
    total_mem = sum(n.allocatable["memory"] for n in node_list)
    cpu_used = sum(p.requests["cpu"] for p in pods)
    mem_used = sum(p.requests["memory"] for p in pods)
    pending = 0
    while True:
        req = _mixed_requests(rng, shape.cpu_heavy)
        if cpu_used + req["cpu"] > shape.target_cpu * total_cpu or mem_used + req["memory"] > 0.9 * total_mem:
            break
        cpu_used += req["cpu"]
        mem_used += req["memory"]
        pods.append(_mixed_pod(pending, req, None))
        pending += 1
    return Cluster(nodes=tuple(node_list), pods=tuple(pods)), shape


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generate", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tb = sub.add_parser("tbesk", help="the TBESK setting as a kubectl List")
    tb.add_argument("--seed", type=int, default=1)
    tb.add_argument("--pods", type=int, default=TBESK_PODS)
    tb.add_argument("--out", type=Path, help="output file (default: stdout)")
    args = parser.parse_args(argv)
    text = tbesk_json(args.seed, args.pods)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}: {sum(TBESK_NODE_COUNTS)} nodes, {args.pods} pending pods (seed {args.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
