"""The workload shapes of ``make bench-e2e``, modelled on upstream's scheduler_perf templates
(test/integration/scheduler_perf/config: pod-default, pod-with-node-affinity,
pod-with-topology-spreading, pod-with-pod-anti-affinity, pod-with-pod-affinity,
pod-with-preferred-pod-(anti-)affinity, the preemption and gang workloads), sized for 1,000 kwok
nodes and about 2,000 pods. Pure data: manifests as dicts, no API calls.

Nodes: 16 cpu / 64Gi / 110 pods, in ``ZONES`` zones (topology.kubernetes.io/zone). Pods request
cpu and memory in five mixes so that the balance measures mean something. Where upstream gives
every pod the same label (so that required anti-affinity allows one pod per node), the pods here
form groups of ``GROUP`` (one Deployment's replicas): anti-affinity spreads a group over hosts,
affinity packs a group into one zone, spreading balances a group over zones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ZONES = 10
RACK = "bench.placer.io/rack"  # racks of RACK_NODES consecutive nodes (the topology gangs of e2e_gangs.py)
RACK_NODES = 16
GROUP = 100  # pods per group (label bench-group)
MIXES = [("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("100m", "1Gi"), ("1", "256Mi")]
GANG_SIZE = 8
LOW, HIGH = "bench-low", "bench-high"  # PriorityClasses of the preemption shape
PRIORITIES = {LOW: 10, HIGH: 1000}

Json = dict[str, Any]


@dataclass(frozen=True)
class Phase:
    """Pods created together; ``measured`` phases count in the figures, the others (a filler)
    are created and bound first."""

    pods: list[Json]
    measured: bool = True


@dataclass(frozen=True)
class Shape:
    name: str
    title: str
    phases: Callable[[int], list[Phase]]  # pods per shape -> phases
    gangs: bool = False  # needs the gang cluster (Workload API, kube-scheduler's gang plugin)
    pod_groups: Callable[[int], list[Json]] = field(default=lambda _n: [])


def node_labels(i: int) -> dict[str, str]:
    return {ZONE: f"zone-{i % ZONES}", RACK: rack_of(i)}


def rack_of(i: int) -> str:
    """The rack of node ``i`` (bench-<i>)."""
    return f"rack-{i // RACK_NODES:03d}"


def _pod(
    name: str, i: int, *, labels: dict[str, str] | None = None, cpu: str = "", memory: str = "", **spec: Any
) -> Json:
    mix_cpu, mix_mem = MIXES[i % len(MIXES)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "e2e", **(labels or {})}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu or mix_cpu, "memory": memory or mix_mem}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            **spec,
        },
    }


def _group(i: int) -> str:
    return f"g{i // GROUP}"


def _term(group: str, key: str) -> Json:
    return {"labelSelector": {"matchLabels": {"bench-group": group}}, "topologyKey": key}


def basic(n: int) -> list[Phase]:
    return [Phase([_pod(f"basic-{i}", i) for i in range(n)])]


def node_affinity(n: int) -> list[Phase]:
    zones = [f"zone-{z}" for z in range(ZONES // 2)]  # half the cluster qualifies
    req = {"nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": zones}]}]}
    return [
        Phase(
            [
                _pod(f"na-{i}", i, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": req}})
                for i in range(n)
            ]
        )
    ]


def spreading(n: int) -> list[Phase]:
    def pod(i: int) -> Json:
        g = _group(i)
        tsc = {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"bench-group": g}},
        }
        return _pod(f"ts-{i}", i, labels={"bench-group": g}, topologySpreadConstraints=[tsc])

    return [Phase([pod(i) for i in range(n)])]


def anti_affinity(n: int) -> list[Phase]:
    def pod(i: int) -> Json:
        g = _group(i)
        aff = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(g, HOST)]}}
        return _pod(f"aa-{i}", i, labels={"bench-group": g}, affinity=aff)

    return [Phase([pod(i) for i in range(n)])]


def affinity(n: int) -> list[Phase]:
    def pod(i: int) -> Json:
        g = _group(i)
        aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(g, ZONE)]}}
        return _pod(f"pa-{i}", i, labels={"bench-group": g}, affinity=aff)

    return [Phase([pod(i) for i in range(n)])]


def preferred(n: int) -> list[Phase]:
    """Even groups prefer to share a zone, odd groups prefer distinct hosts (upstream has one
    workload of each; here they share the run)."""

    def pod(i: int) -> Json:
        g = _group(i)
        if (i // GROUP) % 2 == 0:
            aff = {
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "podAffinityTerm": _term(g, ZONE)}
                    ]
                }
            }
        else:
            aff = {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "podAffinityTerm": _term(g, HOST)}
                    ]
                }
            }
        return _pod(f"pp-{i}", i, labels={"bench-group": g}, affinity=aff)

    return [Phase([pod(i) for i in range(n)])]


def preemption(n: int, nodes: int) -> list[Phase]:
    """One low-priority filler per node taking 15 of its 16 cpu, then high-priority arrivals of 4
    cpu: each needs a victim (upstream's PreemptionBasic, one victim per arrival)."""
    fill = [_pod(f"low-{i}", i, cpu="15", memory="1Gi", priorityClassName=LOW) for i in range(nodes)]
    count = min(max(n - nodes, n // 2), nodes)  # 2,000 pods: 1,000 arrivals; fewer: half of them
    arrivals = [_pod(f"high-{i}", i, cpu="4", memory="1Gi", priorityClassName=HIGH) for i in range(count)]
    return [Phase(fill, measured=False), Phase(arrivals)]


# Kubernetes 1.37 serves PodGroups as scheduling.k8s.io/v1beta1 (v1alpha2 is gone); the e2e
# benchmark's control plane runs with testenv's Cluster(workloads=True).
POD_GROUP_API = "scheduling.k8s.io/v1beta1"


def gang_name(i: int) -> str:
    return f"gang-{i // GANG_SIZE}"


def gangs(n: int) -> list[Phase]:
    """Gangs of 8 pods of 2 cpu each: a PodGroup (POD_GROUP_API, gang minCount 8) that
    every member names in spec.schedulingGroup; placer reads the same pods' placer.io/gang
    annotations (its reader of the Workload API lives on another branch)."""

    def pod(i: int) -> Json:
        g = gang_name(i)
        p = _pod(f"gm-{i}", i, cpu="2", memory="2Gi", schedulingGroup={"podGroupName": g})
        p["metadata"]["annotations"] = {"placer.io/gang": g, "placer.io/gang-size": str(GANG_SIZE)}
        return p

    return [Phase([pod(i) for i in range(n - n % GANG_SIZE)])]


def pod_groups(n: int) -> list[Json]:
    return [
        {
            "apiVersion": POD_GROUP_API,
            "kind": "PodGroup",
            "metadata": {"name": f"gang-{g}"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": GANG_SIZE}}},
        }
        for g in range(n // GANG_SIZE)
    ]


def shapes(nodes: int) -> list[Shape]:
    """In the order they run (the ones issue 12 sets the highest targets for first)."""
    return [
        Shape("basic", "basic (no constraints)", basic),
        Shape("anti-affinity", "required pod anti-affinity (hostname, per group)", anti_affinity),
        Shape("affinity", "required pod affinity (zone, per group)", affinity),
        Shape("preferred", "preferred pod affinity (zone) / anti-affinity (hostname)", preferred),
        Shape("spreading", "topology spreading (zone, maxSkew 1, per group)", spreading),
        Shape("node-affinity", "required node affinity (half the zones)", node_affinity),
        Shape("gangs", f"gangs of {GANG_SIZE} (PodGroup, gang plugin)", gangs, gangs=True, pod_groups=pod_groups),
        Shape(
            "preemption",
            "preemption (low-priority filler, then high-priority arrivals)",
            lambda n: preemption(n, nodes),
        ),
    ]
