"""placer's controller on Kubernetes 1.37 workload groups, on the session's control plane.

Aspects (issue 30 item 5), each asserted on the cluster's own state (bound nodes, pod phases):
- topology gangs: three v1beta1 PodGroups of 4, 6 and 6 pods, each required in one rack, on racks
  of 10 and 6 one-cpu slots, created together: all 16 pods run, each group inside one rack (one
  group at a time, kube-scheduler places two of the three: the offline simulation shows it);
- partial recreation: a deleted member's replacement waits rather than leave its group's rack,
  and lands in that rack once there is room;
- group preemption: a running ``disruptionMode: {all: {}}`` group of low priority is evicted whole
  for a higher-priority gang, or, when one member cannot be evicted, not at all;
- composite groups: a v1alpha3 CompositePodGroup with a zone key and two child PodGroups with a
  rack key: every child in one rack, both in one zone.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import kube_helpers as kh
import pytest
import workload_support as ws
from controller_support import Controller
from kubernetes import client

pytestmark = pytest.mark.e2e

NodeFactory = Callable[..., list[str]]
Controllers = Callable[..., Controller]


def _racks(make_nodes: NodeFactory, mark: dict[str, str], layout: dict[str, tuple[int, str]],
           **extra: str) -> dict[str, str]:  # fmt: skip
    """Nodes per rack (``layout``: rack -> (node count, cpu each)); node -> rack. Rack values are
    unique to the test (``mark``'s value in front)."""
    rack_of = {}
    for rack, (count, cpu) in layout.items():
        value = f"{next(iter(mark.values()))}-{rack}"
        for node in make_nodes(count, cpu=cpu, labels={**mark, **extra, ws.RACK: value}):
            rack_of[node] = rack
    return rack_of


def _racks_used(core: client.CoreV1Api, namespace: str, group: str, rack_of: dict[str, str]) -> set[str]:
    return {rack_of[node] for node in ws.bound(core, namespace, group).values()}


def _pods_per_node(core: client.CoreV1Api, namespace: str) -> dict[str, int]:
    count: dict[str, int] = {}
    for p in core.list_namespaced_pod(namespace).items:
        if p.spec.node_name and p.metadata.deletion_timestamp is None:
            count[p.spec.node_name] = count.get(p.spec.node_name, 0) + 1
    return count


def test_three_rack_gangs_created_together_all_run_each_in_one_rack(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers,
) -> None:  # fmt: skip
    mark = {"gang-test": kh.unique("w")}
    rack_of = _racks(make_nodes, mark, {"a": (5, "2"), "b": (3, "2")})  # 10 and 6 one-cpu slots
    sizes = {"four": 4, "six-1": 6, "six-2": 6}
    for group, size in sizes.items():
        ws.pod_group(api_client, namespace, group, size, key=ws.RACK)
        for i in range(size):
            ws.member(core, namespace, f"{group}-{i}", group, mark)
    controllers()  # one batch sees all three groups

    for group, size in sizes.items():
        kh.wait_running(core, namespace, {"gang": group}, size, timeout=180)
    racks = {group: _racks_used(core, namespace, group, rack_of) for group in sizes}
    assert all(len(used) == 1 for used in racks.values()), racks
    assert racks["four"] == {"a"} and {racks["six-1"].pop(), racks["six-2"].pop()} == {"a", "b"}, racks
    per_node = _pods_per_node(core, namespace)
    assert sum(per_node.values()) == 16 and max(per_node.values()) <= 2, per_node


def test_a_replacement_member_waits_for_room_in_its_groups_rack(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers,
) -> None:  # fmt: skip
    mark = {"gang-test": kh.unique("w")}
    rack_of = _racks(make_nodes, mark, {"a": (2, "2"), "b": (2, "2")})  # two racks of 4 slots
    ws.pod_group(api_client, namespace, "part", 3, key=ws.RACK)
    for i in range(3):
        ws.member(core, namespace, f"part-{i}", "part", mark)
    controllers()
    kh.wait_running(core, namespace, {"gang": "part"}, 3, timeout=120)
    (home,) = _racks_used(core, namespace, "part", rack_of)

    # One member goes; the home rack's free slots are taken by pods bound by name (equal
    # priority: not preemptible by the replacement). The other rack has four free slots.
    core.delete_namespaced_pod("part-0", namespace, grace_period_seconds=0)
    kh.wait_pod_gone(core, namespace, "part-0", timeout=60)
    per_node = _pods_per_node(core, namespace)
    fillers = [
        f"filler-{node}-{slot}"
        for node, rack in rack_of.items()
        if rack == home
        for slot in range(2 - per_node.get(node, 0))
    ]
    for name in fillers:
        node = name.removeprefix("filler-").rsplit("-", 1)[0]
        kh.create_pod(core, namespace, name, labels={"app": "filler"}, cpu="1", node_name=node)
    kh.wait_running(core, namespace, {"app": "filler"}, len(fillers), timeout=60)
    ws.member(core, namespace, "part-3", "part", mark)
    time.sleep(6)  # several batch windows: the replacement must not leave the rack
    assert "part-3" not in ws.bound(core, namespace, "part"), ws.bound(core, namespace, "part")

    core.delete_namespaced_pod(fillers[0], namespace, grace_period_seconds=0)
    kh.wait_running(core, namespace, {"gang": "part"}, 3, timeout=120)
    assert _racks_used(core, namespace, "part", rack_of) == {home}, ws.bound(core, namespace, "part")


def _low_group_then_high_gang(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers, priority_class: Callable[[int], str], *, pinned: bool,
) -> None:  # fmt: skip
    """Four one-cpu nodes full with a low-priority ``disruptionMode: all`` group of 4 (one member
    using a host port, so never evicted, when ``pinned``); then a higher-priority gang of 2."""
    mark = {"gang-test": kh.unique("w")}
    make_nodes(4, cpu="1", labels=mark)
    low, high = priority_class(100), priority_class(1000)
    ws.pod_group(api_client, namespace, "low", 4, disruption_all=True, priority_class=low)
    for i in range(4):
        ws.member(core, namespace, f"low-{i}", "low", mark, priority_class=low,
                  host_port=18080 if pinned and i == 0 else None)  # fmt: skip
    controllers()
    kh.wait_running(core, namespace, {"gang": "low"}, 4, timeout=120)
    ws.pod_group(api_client, namespace, "high", 2, priority_class=high)
    for i in range(2):
        ws.member(core, namespace, f"high-{i}", "high", mark, priority_class=high)


def test_a_disruption_all_group_is_preempted_whole(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers, priority_class: Callable[[int], str],
) -> None:  # fmt: skip
    _low_group_then_high_gang(api_client, core, namespace, make_nodes, controllers, priority_class, pinned=False)
    # Two evictions would make room for the gang of 2; the group goes whole: all four.
    kh.wait_running(core, namespace, {"gang": "high"}, 2, timeout=180)
    kh.wait_for("every member of the low group evicted", lambda: ws.live(core, namespace, "low") == [], 60)


def test_a_disruption_all_group_with_an_unevictable_member_is_not_preempted_at_all(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers, priority_class: Callable[[int], str],
) -> None:  # fmt: skip
    _low_group_then_high_gang(api_client, core, namespace, make_nodes, controllers, priority_class, pinned=True)
    # Three members could be evicted and the gang of 2 would fit in their place; none may be.
    kh.wait_for("both members of the high gang reported unschedulable as a gang of 2",
                lambda: ws.unschedulable_as_gang(core, namespace, "high", 2), 120)  # fmt: skip
    # Re-reported every batch: the one FailedScheduling Event's series counts the repeats (the
    # controller's RBAC lets it patch events), while still no member is evicted.
    kh.wait_for("a FailedScheduling Event of high-0 with a series of at least 2",
                lambda: _series(api_client, namespace, "high-0", "FailedScheduling") >= 2, 60)  # fmt: skip
    assert len([p for p in ws.live(core, namespace, "low") if kh.is_running(p)]) == 4
    assert ws.bound(core, namespace, "high") == {}


def _series(api_client: client.ApiClient, namespace: str, pod: str, reason: str) -> int:
    """The largest ``series.count`` of the pod's Events of ``reason`` (1 for an Event without one)."""
    events = client.EventsV1Api(api_client).list_namespaced_event(namespace).items
    return max(
        (e.series.count if e.series else 1 for e in events if e.regarding.name == pod and e.reason == reason),
        default=0,
    )


def _zone_job(api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, mark: dict[str, str],
              size: int) -> None:  # fmt: skip
    """CompositePodGroup ``job`` in one zone (``minGroupCount`` 2) and its child gangs ``w1`` and
    ``w2`` of ``size`` pods, each in one rack, with their members."""
    ws.composite_pod_group(api_client, namespace, "job", {"w1": (size, ws.RACK), "w2": (size, ws.RACK)}, ws.ZONE)
    for child in ("w1", "w2"):
        ws.pod_group(api_client, namespace, child, size, key=ws.RACK, parent="job")
        for i in range(size):
            ws.member(core, namespace, f"{child}-{i}", child, mark)


def test_composite_group_children_each_in_one_rack_all_in_one_zone(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers,
) -> None:  # fmt: skip
    mark = {"gang-test": kh.unique("w")}
    zone = next(iter(mark.values()))
    rack_of = {
        **_racks(make_nodes, mark, {"r1": (2, "2"), "r2": (2, "2")}, **{ws.ZONE: f"{zone}-z1"}),
        **_racks(make_nodes, mark, {"r3": (2, "2")}, **{ws.ZONE: f"{zone}-z2"}),
    }
    zone_of = {"r1": "z1", "r2": "z1", "r3": "z2"}  # every rack has 4 slots
    _zone_job(api_client, core, namespace, mark, 3)
    controllers()

    for child in ("w1", "w2"):
        kh.wait_running(core, namespace, {"gang": child}, 3, timeout=180)
    racks = {child: _racks_used(core, namespace, child, rack_of) for child in ("w1", "w2")}
    assert all(len(used) == 1 for used in racks.values()), racks
    # Two children of 3 need two racks of one zone: only z1 has two.
    assert racks["w1"] | racks["w2"] == {"r1", "r2"}, racks
    assert {zone_of[r] for used in racks.values() for r in used} == {"z1"}


def test_a_composite_gang_binds_no_child_until_min_group_count_children_fit(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers,
) -> None:  # fmt: skip
    """minGroupCount 2 (``composite_pod_group`` asks for every child): two child gangs of 2, each in
    one rack, and one rack of 3 slots: one child would fit, so none is bound; a second rack of the
    zone lets both go."""
    mark = {"gang-test": kh.unique("w")}
    zone = {ws.ZONE: f"{next(iter(mark.values()))}-z1"}
    _racks(make_nodes, mark, {"a": (3, "1")}, **zone)
    _zone_job(api_client, core, namespace, mark, 2)
    controllers()
    kh.wait_for("both children reported unschedulable for the composite's minGroupCount",
                lambda: _says_min_group_count(core, namespace, ("w1", "w2")), 120)  # fmt: skip
    assert ws.bound(core, namespace, "w1") == {} and ws.bound(core, namespace, "w2") == {}

    _racks(make_nodes, mark, {"b": (2, "1")}, **zone)
    for child in ("w1", "w2"):
        kh.wait_running(core, namespace, {"gang": child}, 2, timeout=180)


def _says_min_group_count(core: client.CoreV1Api, namespace: str, groups: tuple[str, ...]) -> bool:
    """Every member of ``groups`` carries placer's PodScheduled=False naming minGroupCount."""
    pods = [p for g in groups for p in ws.live(core, namespace, g)]
    return bool(pods) and all(
        any(c.type == "PodScheduled" and c.status == "False" and "minGroupCount" in (c.message or "")
            for c in (p.status.conditions or []))
        for p in pods
    )  # fmt: skip
