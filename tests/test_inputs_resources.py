"""Resources as the kubelet holds them, and pods placer must leave to DRA.

Aspects: during an in-place resize a pod holds the most of its spec, what the kubelet actuated
(``status.containerStatuses[].resources``) and what it allocated (``allocatedResources``), per
container and at pod level, sidecars and init containers aggregated as usual; an Infeasible
resize (old ``status.resize`` or the 1.33+ ``PodResizePending`` condition) drops the spec side.
A pod with ``spec.resourceClaims``, or requesting an extended resource backed by a DeviceClass,
is ``Unsupported`` with a reason naming DRA and is never placed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import solve

from placer.inputs import parse_cluster
from placer.models import Cluster

Json = dict[str, Any]
GI = 1024**3


def _container(name: str, cpu: str | None = None, memory: str | None = None, **extra: Any) -> Json:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": name, "resources": {"requests": requests}, **extra}


def _status(name: str, *, actual: Json | None = None, allocated: Json | None = None) -> Json:
    out: Json = {"name": name}
    if actual is not None:
        out["resources"] = {"requests": actual}
    if allocated is not None:
        out["allocatedResources"] = allocated
    return out


def _kube_pod(name: str, spec: Json, status: Json | None = None, node: str | None = "a") -> Json:
    spec = dict(spec)
    if node is not None:
        spec["nodeName"] = node
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "placer", **spec},
        "status": {"phase": "Running" if node else "Pending", **(status or {})},
    }


def _parse(*items: Json, extra: tuple[Json, ...] = ()) -> Cluster:
    node = {"kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}}
    return parse_cluster("test.json", json.dumps({"kind": "List", "items": [node, *items, *extra]}))


INFEASIBLE_CONDITION = {"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}

RESIZES = [
    pytest.param({"containers": [_container("c", "1")]}, None, {"cpu": 1000}, id="no resize: the spec's requests"),
    pytest.param(
        {"containers": [_container("c", "2")]},
        {"containerStatuses": [_status("c", actual={"cpu": "1"}, allocated={"cpu": "1"})]},
        {"cpu": 2000},
        id="a resize up in progress holds the spec it was asked for",
    ),
    pytest.param(
        {"containers": [_container("c", "1")]},
        {"containerStatuses": [_status("c", actual={"cpu": "3"}, allocated={"cpu": "3"})]},
        {"cpu": 3000},
        id="a resize down not yet actuated holds what the kubelet still gives",
    ),
    pytest.param(
        {"containers": [_container("c", "1")]},
        {"containerStatuses": [_status("c", actual={"cpu": "1"}, allocated={"cpu": "2"})]},
        {"cpu": 2000},
        id="allocated but not actuated counts",
    ),
    pytest.param(
        {"containers": [_container("c", "4")]},
        {"resize": "Infeasible", "containerStatuses": [_status("c", actual={"cpu": "1"}, allocated={"cpu": "1"})]},
        {"cpu": 1000},
        id="an infeasible resize (status.resize) drops the spec side",
    ),
    pytest.param(
        {"containers": [_container("c", "4")]},
        {**INFEASIBLE_CONDITION, "containerStatuses": [_status("c", actual={"cpu": "1"})]},
        {"cpu": 1000},
        id="an infeasible resize (PodResizePending condition) drops the spec side",
    ),
    pytest.param(
        {"containers": [_container("c", "4")]},
        {
            "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
            "containerStatuses": [_status("c", actual={"cpu": "1"})],
        },
        {"cpu": 4000},
        id="a deferred resize keeps the spec side",
    ),
    pytest.param(
        {"containers": [_container("a", "1", "1Gi"), _container("b", "1", "1Gi")]},
        {
            "containerStatuses": [
                _status("a", actual={"cpu": "3", "memory": "1Gi"}),
                _status("b", actual={"cpu": "1", "memory": "2Gi"}),
            ]
        },
        {"cpu": 4000, "memory": 3 * GI},
        id="containers are summed per view, then the most of the views is taken",
    ),
    pytest.param(
        {
            "initContainers": [_container("side", "1", restartPolicy="Always")],
            "containers": [_container("main", "1")],
        },
        {"initContainerStatuses": [_status("side", actual={"cpu": "2"})]},
        {"cpu": 3000},
        id="a resized sidecar counts with its status resources",
    ),
    pytest.param(
        {"containers": [_container("c", "1")], "resources": {"requests": {"cpu": "2"}}},
        {"resources": {"requests": {"cpu": "3"}}, "allocatedResources": {"cpu": "3"}},
        {"cpu": 3000},
        id="pod-level requests take the most of spec and status",
    ),
    pytest.param(
        {"containers": [_container("c", "1")], "resources": {"requests": {"cpu": "4"}}},
        {"resize": "Infeasible", "resources": {"requests": {"cpu": "2"}}},
        {"cpu": 2000},
        id="an infeasible pod-level resize drops the pod-level spec",
    ),
    pytest.param(
        {
            "containers": [_container("c", "1")],
            "resources": {"requests": {"cpu": "2"}},
            "overhead": {"cpu": "500m"},
        },
        {"resources": {"requests": {"cpu": "2500m"}}},
        {"cpu": 2500},
        id="pod-level status includes the overhead, which is added once",
    ),
]


@pytest.mark.parametrize(("spec", "status", "expected"), RESIZES)
def test_a_pod_holds_what_the_kubelet_gives_it_during_a_resize(
    spec: Json, status: Json | None, expected: dict[str, int]
) -> None:
    (pod,) = _parse(_kube_pod("p", spec, status)).pods
    assert {k: v for k, v in pod.requests.items() if k in expected} == expected


def test_a_resize_in_progress_leaves_no_room_the_kubelet_still_holds() -> None:
    """The node has 8 cpu; the running pod asked to shrink from 6 to 2 but the kubelet has not
    actuated it: a pending pod of 4 cpu does not fit until the resize is done."""
    running = _kube_pod(
        "big",
        {"containers": [_container("c", "2")]},
        {"containerStatuses": [_status("c", actual={"cpu": "6"}, allocated={"cpu": "2"})]},
    )
    pending = _kube_pod("new", {"containers": [_container("c", "4")]}, node=None)
    outcome = solve(_parse(running, pending))
    assert [u.pod for u in outcome.result.unplaced] == ["default/new"]
    done = _kube_pod(
        "big", {"containers": [_container("c", "2")]}, {"containerStatuses": [_status("c", actual={"cpu": "2"})]}
    )
    assert [p.pod for p in solve(_parse(done, pending)).result.placements] == ["default/new"]


DRA_CLASS = {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}

DRA = [
    pytest.param(
        {"containers": [_container("c", "1")], "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-0"}]},
        (),
        "spec.resourceClaims",
        id="a pod with resource claims",
    ),
    pytest.param(
        {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]},
        (DRA_CLASS,),
        "example.com/gpu",
        id="an extended resource a DeviceClass in the dump backs",
    ),
    pytest.param(
        {"containers": [{"name": "c", "resources": {"requests": {"deviceclass.resource.kubernetes.io/gpu": "1"}}}]},
        (),
        "deviceclass.resource.kubernetes.io/gpu",
        id="a DeviceClass's implicit extended resource",
    ),
]


@pytest.mark.parametrize(("spec", "extra", "named"), DRA)
def test_a_pod_allocated_by_dra_is_unsupported_and_never_placed(
    spec: Json, extra: tuple[Json, ...], named: str
) -> None:
    dump = _parse(
        _kube_pod("dra", spec, node=None),
        _kube_pod("plain", {"containers": [_container("c", "1")]}, node=None),
        extra=extra,
    )
    outcome = solve(dump)
    assert [p.pod for p in outcome.result.placements] == ["default/plain"]
    (unplaced,) = outcome.result.unplaced
    assert (unplaced.pod, unplaced.code) == ("default/dra", "Unsupported")
    assert "dynamic resource allocation" in unplaced.reason and named in unplaced.reason


def test_an_extended_resource_no_device_class_backs_is_placed_as_before() -> None:
    node = {
        "kind": "Node",
        "metadata": {"name": "a"},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "example.com/gpu": "2"}},
    }
    pending = _kube_pod(
        "gpu", {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]}, node=None
    )
    dump = parse_cluster("test.json", json.dumps({"kind": "List", "items": [node, pending]}))
    assert [p.pod for p in solve(dump).result.placements] == ["default/gpu"]


def _guarded(pdbs: list[Json]) -> Any:
    nodes = [{"name": "a", "allocatable": {"cpu": "2", "memory": "8Gi"}}]
    low = {
        "name": "low",
        "node": "a",
        "requests": {"cpu": "2"},
        "labels": {"app": "low"},
        "owner": {"kind": "ReplicaSet", "name": "low"},
    }
    high = {"name": "high", "requests": {"cpu": "2"}, "priority": 100}
    doc = {"nodes": nodes, "pods": [low, high], "pdbs": pdbs}
    return solve(parse_cluster("test.json", json.dumps(doc)))


def test_the_reason_names_the_pdb_placer_will_not_evict_through() -> None:
    """kube-scheduler would preempt ``low`` through its exhausted budget as a last resort; placer
    never does, and says which budget keeps the pod Pending."""
    assert [e.pod for e in _guarded([]).result.evictions] == ["default/low"]
    open_budget = {"name": "guard", "selector": {"matchLabels": {"app": "low"}}, "disruptionsAllowed": 1}
    assert [e.pod for e in _guarded([open_budget]).result.evictions] == ["default/low"]
    outcome = _guarded([dict(open_budget, disruptionsAllowed=0)])
    assert outcome.result.evictions == []
    (unplaced,) = outcome.result.unplaced
    assert unplaced.detail.pdbs == ("default/guard",)
    assert "PodDisruptionBudget default/guard" in unplaced.reason and "never evicts through" in unplaced.reason
