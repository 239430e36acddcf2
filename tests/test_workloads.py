"""Kubernetes 1.37 workloads read from dumps and placed jointly.

Aspects: reading v1beta1 PodGroups and v1alpha3 CompositePodGroups (topology key, parents,
disruptionMode, group priority), bad values naming the field, the controller's caches, and the
engine placing groups each in one domain of its key, jointly, nested, next to running members,
filling partly used domains first. Every answer goes through the validator (``support.solve``).
"""

from __future__ import annotations

from typing import Any

import pytest
from runner_support import feed, make_runner
from support import solve, unplaced, where
from test_informers import DiscoveryHttp
from workload_builders import (
    ALPHA3,
    RACK,
    ZONE,
    composite,
    dump,
    gang,
    node,
    pod,
    pod_group,
    racks,
)

from placer.errors import InputError
from placer.inputs.assemble import assemble_cluster
from placer.inputs.kubectl import KubeObjects, parse_pod
from placer.inputs.podgroups import parse_composite_pod_group, parse_workload_pod_group
from placer.kube.informers import BETA_POD_GROUP, COMPOSITE_POD_GROUP, Informer, optional_informers
from placer.kube.policy import Policy
from placer.models import Cluster, GroupDomain


def _racks_of(c: Cluster, out: Any) -> dict[str, set[str]]:
    """Group name -> the racks its placed pods are on."""
    labels = {n.name: n.labels for n in c.nodes}
    got: dict[str, set[str]] = {}
    for name, n in where(out).items():
        got.setdefault(name.rsplit("-", 1)[0], set()).add(labels[n].get(RACK, "?"))
    return got


# -- reading -------------------------------------------------------------------------------------


def test_a_v1beta1_pod_group_gives_its_pods_gang_size_domain_and_priority() -> None:
    c = dump(racks({"a": 4}), pod_group("g", 2, priority=500, disruption="all"), pod("g-0", "g"), pod("g-1", "g"))
    assert {(p.gang, p.gang_size, p.priority, p.disruption_unit) for p in c.pods} == {("g", 2, 500, "PodGroup ml/g")}
    assert {p.group_domains for p in c.pods} == {(GroupDomain(group="PodGroup ml/g", key=RACK),)}


def test_a_composite_parent_adds_its_domain_and_its_disruption_mode_covers_the_children() -> None:
    items = [composite("job", disruption="all"), pod_group("w", 1, parent="job"), pod("w-0", "w")]
    (p,) = dump(racks({"a": 1}, zone={"a": "z1"}), *items).pods
    assert p.group_domains == (
        GroupDomain(group="PodGroup ml/w", key=RACK),
        GroupDomain(group="CompositePodGroup ml/job", key=ZONE),
    )
    assert p.disruption_unit == "CompositePodGroup ml/job"


def test_a_workload_object_is_recognised_not_warned_about() -> None:
    workload = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w"}}
    c = dump(racks({"a": 1}), workload)
    assert not any("ignored" in w for w in c.warnings)


def test_pods_of_a_group_whose_composite_parent_is_missing_wait_for_it() -> None:
    c = dump(racks({"a": 2}), pod_group("w", 1, parent="job"), pod("w-0", "w"))
    assert c.pods[0].scheduling_gates == ("CompositePodGroup ml/job not found",)
    assert any("CompositePodGroup ml/job is not in the input" in w for w in c.warnings)


def test_a_cycle_of_composite_parents_makes_the_pending_pods_invalid() -> None:
    items = [composite("a", parent="b"), composite("b", parent="a"), pod_group("w", 1, parent="a"), pod("w-0", "w")]
    out = solve(dump(racks({"a": 2}), *items))
    assert unplaced(out) == {"w-0": "Invalid"}


BAD_GROUPS: list[tuple[str, dict[str, Any], str]] = [
    (
        "two topology constraints",
        {"schedulingConstraints": {"topology": [{"key": RACK}, {"key": ZONE}]}},
        "spec.schedulingConstraints.topology",
    ),
    ("a topology entry without a key", {"schedulingConstraints": {"topology": [{}]}}, "topology[0].key"),
    ("a key with spaces", {"schedulingConstraints": {"topology": [{"key": "a b"}]}}, "topology[0].key"),
    ("both disruption modes", {"disruptionMode": {"single": {}, "all": {}}}, "spec.disruptionMode"),
    ("a disruption mode written as a string", {"disruptionMode": "all"}, "spec.disruptionMode"),
    ("a priority above the user maximum", {"priority": 2_000_000_000}, "spec.priority"),
    ("a parent that is not a string", {"parentCompositePodGroupName": 3}, "spec.parentCompositePodGroupName"),
]


@pytest.mark.parametrize(("case", "spec", "field"), BAD_GROUPS, ids=[c[0] for c in BAD_GROUPS])
def test_a_bad_pod_group_value_in_a_file_is_one_line_naming_the_field(
    case: str, spec: dict[str, Any], field: str
) -> None:
    group = pod_group("g", 1)
    group["spec"].update(spec)
    with pytest.raises(InputError) as err:
        dump(racks({"a": 1}), group, pod("g-0", "g"))
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("case", "spec", "field"), BAD_GROUPS, ids=[c[0] for c in BAD_GROUPS])
def test_a_bad_cached_pod_group_makes_its_pending_pods_invalid_naming_the_field(
    case: str, spec: dict[str, Any], field: str
) -> None:
    group = pod_group("g", 1)
    group["spec"].update(spec)
    objs = KubeObjects()
    objs.nodes = list(dump(racks({"a": 1})).nodes)
    objs.pods = [parse_pod(pod("g-0", "g")), parse_pod(pod("h-0", "g", node="a-0"))]
    objs.pod_groups = [parse_workload_pod_group(group)]
    c = assemble_cluster(objs)
    pending = next(p for p in c.pods if p.name == "g-0")
    assert pending.invalid and pending.unsupported is not None and field in pending.unsupported
    running = next(p for p in c.pods if p.name == "h-0")
    assert not running.invalid  # a running member keeps running


def test_a_cached_composite_pod_group_nests_its_groups() -> None:
    objs = KubeObjects()
    objs.pods = [parse_pod(pod("w-0", "w"))]
    objs.pod_groups = [
        parse_workload_pod_group(pod_group("w", 1, parent="job")),
        parse_composite_pod_group({**composite("job"), "apiVersion": ALPHA3}),
    ]
    (p,) = assemble_cluster(objs).pods
    assert [d.group for d in p.group_domains] == ["PodGroup ml/w", "CompositePodGroup ml/job"]


# -- placing -------------------------------------------------------------------------------------


def test_gangs_of_4_6_and_6_in_racks_of_10_and_6_are_all_placed_jointly() -> None:
    """The issue's case: one group at a time (4 first, into the 6-slot rack) places two of the
    three; jointly all three fit, each in one rack."""
    g4 = gang("g4", 4)
    for item in g4[1:]:
        item["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"  # the smallest arrives first
    c = dump(racks({"a": 10, "b": 6}), g4, gang("g6a", 6), gang("g6b", 6))
    out = solve(c)
    assert len(where(out)) == 16
    assert all(len(r) == 1 for r in _racks_of(c, out).values())


def test_a_group_takes_no_node_without_its_topology_label() -> None:
    nodes = [*racks({"a": 2}), node("loose-0", 4), node("loose-1", 4)]
    out = solve(dump(nodes, gang("g", 3)))
    assert where(out) == {}
    assert set(unplaced(out).values()) == {"Unschedulable"}


def test_a_basic_group_with_a_topology_key_is_placed_in_one_domain_without_a_gang() -> None:
    group = pod_group("b", None)
    c = dump(racks({"a": 2, "b": 2}), group, *(pod(f"b-{i}", "b") for i in range(3)))
    out = solve(c)
    assert len(where(out)) == 2 and _racks_of(c, out)["b"] in ({"a"}, {"b"})


def test_pending_members_of_a_partly_running_group_join_its_rack() -> None:
    running = [pod(f"g-{i}", "g", node=f"b-{i}") for i in range(2)]
    pending = [pod(f"g-{i}", "g") for i in range(2, 4)]
    c = dump(racks({"a": 4, "b": 4}), pod_group("g", 4), *running, *pending)
    out = solve(c)
    assert {n.split("-")[0] for n in where(out).values()} == {"b"}


def test_a_composite_job_sits_in_one_zone_and_each_worker_group_in_one_rack() -> None:
    zones = {"a": "z1", "b": "z1", "c": "z2", "d": "z2"}
    nodes = racks({"a": 3, "b": 3, "c": 4, "d": 1}, zone=zones)
    items = [composite("job"), *gang("w1", 3, parent="job"), *gang("w2", 3, parent="job")]
    c = dump(nodes, *items)
    out = solve(c)
    assert len(where(out)) == 6
    got = _racks_of(c, out)
    assert all(len(r) == 1 for r in got.values()) and got["w1"] != got["w2"]
    assert {zones[r] for rs in got.values() for r in rs} == {"z1"}  # z2's racks hold 4 and 1


def test_a_group_fills_a_partly_used_rack_before_opening_a_whole_one() -> None:
    busy = pod("other", node="b-0")
    c = dump(racks({"a": 4, "b": 4}), busy, gang("g", 2))
    out = solve(c, strategy="balance")
    assert _racks_of(c, out)["g"] == {"b"}  # balance alone would pick the empty rack's nodes


def test_a_gang_of_two_groups_that_cannot_share_the_only_rack_places_one_group_whole() -> None:
    c = dump(racks({"a": 5}), gang("p", 3), gang("q", 3))
    out = solve(c)
    assert len(where(out)) == 3
    assert len({name.split("-")[0] for name in where(out)}) == 1


def test_a_group_priority_decides_which_group_gets_the_only_rack() -> None:
    c = dump(racks({"a": 3}), gang("low", 3, priority=1), gang("high", 3, priority=100))
    out = solve(c)
    assert {name.split("-")[0] for name in where(out)} == {"high"}


# -- the kube-scheduler 1.37 simulation (--policy default) --------------------------------------


def test_the_simulation_places_one_group_at_a_time_and_fits_two_of_the_three_gangs() -> None:
    """The same case through kube-scheduler 1.37's group cycle: the gang of 4 goes first, to the
    rack of 6 (NodeResourcesFit's placement score prefers the fuller placement), then one gang of
    6 fills the rack of 10 and the last finds no rack."""
    g4 = gang("g4", 4)
    for item in g4[1:]:
        item["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    c = dump(racks({"a": 10, "b": 6}), g4, gang("g6a", 6), gang("g6b", 6))
    out = solve(c, policy="default")
    got = _racks_of(c, out)
    assert got == {"g4": {"b"}, "g6a": {"a"}}
    assert set(unplaced(out).values()) == {"Unschedulable"} and len(unplaced(out)) == 6


SIMULATED: list[tuple[str, list[Any], dict[str, set[str]]]] = [
    (
        "a running member pins the group's placement",
        [racks({"a": 4, "b": 4}), pod_group("g", 3), pod("g-0", "g", node="b-0"), pod("g-1", "g"), pod("g-2", "g")],
        {"g": {"b"}},
    ),
    (
        "a gang that fits no rack whole is not placed in part",
        [racks({"a": 2, "b": 2}), gang("g", 3)],
        {},
    ),
    (
        "a gang without a topology key is placed all-or-nothing on any nodes",
        [racks({"a": 2, "b": 2}), gang("g", 3, key=None)],
        {"g": {"a", "b"}},
    ),
    (
        "the placement score prefers the fuller of two racks that fit",
        [racks({"a": 4, "b": 2}), pod("busy", node="a-0"), gang("g", 2)],
        {"g": {"b"}},
    ),
]


@pytest.mark.parametrize(("case", "items", "want"), SIMULATED, ids=[c[0] for c in SIMULATED])
def test_simulated_group_cycle(case: str, items: list[Any], want: dict[str, set[str]]) -> None:
    c = dump(*items)
    out = solve(c, policy="default")
    got = {k: v for k, v in _racks_of(c, out).items() if k != "busy"}
    assert got == want


# -- the controller --------------------------------------------------------------------------------


def test_a_1_37_server_gets_informers_for_v1beta1_pod_groups_and_composite_pod_groups() -> None:
    http = DiscoveryHttp(
        {
            "/apis/scheduling.k8s.io/v1beta1": ["workloads", "podgroups", "podgroups/status"],
            "/apis/scheduling.k8s.io/v1alpha3": ["workloads", "podgroups", "compositepodgroups"],
        }
    )
    assert sorted(optional_informers(http, Policy())) == sorted([BETA_POD_GROUP, COMPOSITE_POD_GROUP])


def test_the_controller_reads_v1beta1_pod_groups_and_their_composite_parents_from_informers() -> None:
    r = make_runner()
    feed(r, "Node", *racks({"a": 2}, zone={"a": "z1"}))
    feed(r, "Pod", pod("w-0", "w"))
    for kind in (BETA_POD_GROUP, COMPOSITE_POD_GROUP):
        r.informers[kind] = Informer(kind, lw=None)  # type: ignore[arg-type]
    group, parent = pod_group("w", 1, parent="job"), composite("job")
    for item in (group, parent):
        del item["apiVersion"], item["kind"]  # a list's items come without them
    feed(r, BETA_POD_GROUP, group)
    feed(r, COMPOSITE_POD_GROUP, parent)
    (p,) = r.cluster().pods
    assert (p.gang_size, [d.key for d in p.group_domains]) == (1, [RACK, ZONE])
