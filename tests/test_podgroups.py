"""Gangs declared by PodGroup objects in a ``kubectl get ... -o json`` dump.

Aspects: the Workload API (``spec.schedulingGroup.podGroupName`` naming a ``scheduling.k8s.io/
v1alpha2`` PodGroup, ``schedulingPolicy.gang.minCount``), scheduler-plugins' PodGroup
(``minMember``, ``minResources``), what happens while the object is missing, and bad objects.
Every answer goes through the independent validator (``support.solve``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from runner_support import feed, make_runner
from support import solve, unplaced, where

from placer.errors import InputError
from placer.inputs import parse_cluster
from placer.inputs.podgroups import PLUGINS_API, WORKLOAD_API
from placer.kube.informers import WORKLOAD_POD_GROUP, Informer
from placer.models import Cluster


def _node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def _pod(name: str, *, group: str | None = None, label: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "placer",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
    }
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    labels = {"scheduling.x-k8s.io/pod-group": label} if label is not None else {}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _workload_group(name: str, policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": WORKLOAD_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulingPolicy": policy},
    }


def _plugins_group(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": PLUGINS_API, "kind": "PodGroup", "metadata": {"name": name, "namespace": "ml"}, "spec": spec}


def _dump(*items: dict[str, Any]) -> Cluster:
    return parse_cluster("dump.json", json.dumps({"kind": "List", "apiVersion": "v1", "items": list(items)}))


NODES = (_node("a", "4"), _node("b", "2"))  # room for three pods of 2 cpu


def test_a_workload_pod_group_sizes_the_gang_its_pods_name() -> None:
    pods = [_pod(f"w{i}", group="train") for i in range(3)]
    c = _dump(*NODES, *pods, _workload_group("train", {"gang": {"minCount": 3}}))
    assert {(p.gang, p.gang_size) for p in c.pods} == {("train", 3)}
    assert len(where(solve(c))) == 3


def test_a_workload_gang_waits_until_min_count_pods_are_pending() -> None:
    pods = [_pod(f"w{i}", group="train") for i in range(2)]
    out = solve(_dump(*NODES, *pods, _workload_group("train", {"gang": {"minCount": 3}})))
    assert where(out) == {}
    assert set(unplaced(out).values()) == {"Unschedulable"}
    assert all("waits for all of its 3 pods" in u.reason for u in out.result.unplaced)


def test_a_workload_gang_too_big_for_the_room_is_placed_not_at_all() -> None:
    pods = [_pod(f"w{i}", group="train") for i in range(4)]
    out = solve(_dump(*NODES, *pods, _workload_group("train", {"gang": {"minCount": 4}})))
    assert where(out) == {}
    assert all("cannot be placed whole" in u.reason for u in out.result.unplaced)


def test_a_basic_workload_policy_places_each_pod_on_its_own() -> None:
    pods = [_pod(f"w{i}", group="web") for i in range(4)]
    c = _dump(*NODES, *pods, _workload_group("web", {"basic": {}}))
    assert {p.gang for p in c.pods} == {None}
    assert len(where(solve(c))) == 3  # three fit; the fourth stays, as any pod would


def test_pods_naming_a_missing_workload_pod_group_wait_for_it() -> None:
    pods = [_pod(f"w{i}", group="train") for i in range(2)]
    c = _dump(*NODES, *pods)
    assert any("PodGroup ml/train" in w and "not in the input" in w for w in c.warnings)
    out = solve(c)
    assert where(out) == {} and unplaced(out) == {}  # held out of the batch, like a gated pod
    assert any("scheduling gates" in w and "PodGroup ml/train not found" in w for w in out.warnings)


def test_a_scheduler_plugins_pod_group_min_member_is_the_gang_size() -> None:
    pods = [_pod(f"p{i}", label="pg") for i in range(2)]
    out = solve(_dump(*NODES, *pods, _plugins_group("pg", {"minMember": 3, "minResources": {"cpu": "6"}})))
    assert where(out) == {}
    assert all("waits for all of its 3 pods" in u.reason for u in out.result.unplaced)


def test_the_scheduler_plugins_label_without_its_object_is_the_members_present() -> None:
    pods = [_pod(f"p{i}", label="pg") for i in range(2)]
    c = _dump(*NODES, *pods)
    assert {(p.gang, p.gang_size) for p in c.pods} == {("pg", None)}
    assert len(where(solve(c))) == 2


def test_placer_s_own_annotation_wins_over_the_pod_group_objects() -> None:
    item = _pod("w0", group="train")
    item["metadata"]["annotations"] = {"placer.io/gang": "mine"}
    c = _dump(*NODES, item, _workload_group("train", {"gang": {"minCount": 3}}))
    assert (c.pods[0].gang, c.pods[0].gang_size) == ("mine", None)


@pytest.mark.parametrize(
    ("case", "group", "field"),
    [
        ("a gang policy without minCount", _workload_group("g", {"gang": {}}), "spec.schedulingPolicy.gang.minCount"),
        ("both policies", _workload_group("g", {"gang": {"minCount": 2}, "basic": {}}), "spec.schedulingPolicy"),
        ("neither policy", _workload_group("g", {}), "spec.schedulingPolicy"),
        ("a negative minMember", _plugins_group("g", {"minMember": -1}), "spec.minMember"),
        ("a bad minResources quantity", _plugins_group("g", {"minResources": {"cpu": "lots"}}), "minResources.cpu"),
    ],
)
def test_a_pod_group_the_api_server_would_refuse_is_one_line_naming_the_field(
    case: str, group: dict[str, Any], field: str
) -> None:
    with pytest.raises(InputError) as err:
        _dump(*NODES, group)
    assert field in str(err.value) and "dump.json" in str(err.value), case


def test_the_controller_sizes_gangs_from_the_pod_group_informer_and_runs_without_one() -> None:
    """``placer run`` reads PodGroups from an informer only the discovered APIs get; without
    one (the API is not served) the same pods are assembled as the dump reader would."""
    pods = [_pod(f"w{i}", group="train") for i in range(2)]
    r = make_runner()
    feed(r, "Node", *[dict(n) for n in NODES])
    feed(r, "Pod", *pods)
    assert {p.scheduling_gates for p in r.cluster().pods} == {("PodGroup ml/train not found",)}
    r.informers[WORKLOAD_POD_GROUP] = Informer(WORKLOAD_POD_GROUP, lw=None)  # type: ignore[arg-type]
    group = _workload_group("train", {"gang": {"minCount": 2}})
    del group["apiVersion"], group["kind"]  # a list's items come without them
    feed(r, WORKLOAD_POD_GROUP, group)
    assert {(p.gang, p.gang_size, p.scheduling_gates) for p in r.cluster().pods} == {("train", 2, ())}
