"""Table tests of the independent validator: it accepts valid placements and catches each kind
of violation (capacity, labels, taints, cordon, ports, priority, maximality, weak binding)."""

from __future__ import annotations

import json

import pytest
import support
from builders import (
    NO_FIT,
    NO_MATCH,
    cluster,
    expr,
    node,
    pod,
    required,
    taint,
    term,
    toleration,
)

from placer.inputs import parse_cluster
from placer.models import Cluster, HostPort, Node, Pod, Taint, Toleration
from placer.validate import (
    go_parse_int,
    hard_violations,
    placement_violations,
    pod_key,
    ports_clash,
    tolerates,
    validate_placements,
)

# One node of 4 cpu / 8Gi; most cases put pods of 1-3 cpu on it.
SMALL = node("n1", cpu=4)

VALID = [
    pytest.param(
        cluster([SMALL], [pod("a", cpu=2), pod("b", cpu=2)]), {"a": "n1", "b": "n1"}, id="two pods fill a node"
    ),
    pytest.param(
        cluster([SMALL, node("n2", cpu=1)], [pod("a", cpu=3), pod("b", cpu=2)]),
        {"a": "n1"},
        id="a pod that fits nowhere may stay unplaced",
    ),
    pytest.param(
        cluster([SMALL], [pod("r", cpu=2, node="n1"), pod("a", cpu=2)]),
        {"a": "n1"},
        id="running pods and placed pods exactly fill the node",
    ),
    pytest.param(
        cluster([SMALL], [pod("done", cpu=4, node="n1") | {"phase": "Succeeded"}, pod("a", cpu=4)]),
        {"a": "n1"},
        id="a succeeded pod holds nothing",
    ),
    pytest.param(
        cluster([node("n1", labels={"disk": "ssd"})], [pod("a", cpu=1, selector={"disk": "ssd"})]),
        {"a": "n1"},
        id="nodeSelector satisfied",
    ),
    pytest.param(
        cluster([node("n1", taints=[taint("gpu", "PreferNoSchedule")])], [pod("a", cpu=1)]),
        {"a": "n1"},
        id="PreferNoSchedule taint is only a preference",
    ),
    pytest.param(
        cluster(
            [node("n1", taints=[taint("gpu", value="yes")])],
            [pod("a", cpu=1, tolerations=[toleration("gpu", "Equal", "yes", "NoSchedule")])],
        ),
        {"a": "n1"},
        id="tolerated NoSchedule taint",
    ),
    pytest.param(
        cluster([node("n1", unschedulable=True)], [pod("a", cpu=1, tolerations=[toleration(operator="Exists")])]),
        {"a": "n1"},
        id="cordoned node takes a pod tolerating everything",
    ),
    pytest.param(
        cluster(
            [SMALL],
            [
                pod("a", cpu=1, ports=[{"port": 80, "hostIP": "10.0.0.1"}]),
                pod("b", cpu=1, ports=[{"port": 80, "hostIP": "10.0.0.2"}]),
                pod("c", cpu=1, ports=[{"port": 80, "protocol": "UDP"}]),
            ],
        ),
        {"a": "n1", "b": "n1", "c": "n1"},
        id="same host port on different host IPs or protocols",
    ),
    pytest.param(
        cluster([node("n1", cpu=1)], [pod("high", cpu=1, priority=5), pod("low", cpu=1, priority=1)]),
        {"high": "n1"},
        id="higher key placed, lower key left out",
    ),
    pytest.param(
        cluster(
            [node("n1", cpu=1)],
            [pod("a", cpu=1, created="2024-01-01T00:00:01Z"), pod("b", cpu=1, created="2024-01-01T00:00:02Z")],
        ),
        {"b": "n1"},
        id="equal keys: either one may take the room",
    ),
    pytest.param(
        cluster(
            [node("n1", labels={"zone": "a"})],
            [pod("a", cpu=1, selector={"zone": "b"}, annotations={NO_MATCH: "ignore-affinity"})],
        ),
        {"a": "n1"},
        id="no node matches and the pod ignores affinity",
    ),
    pytest.param(
        cluster(
            [node("m", cpu=1, labels={"zone": "a"}), node("o", cpu=4)],
            [pod("a", cpu=2, selector={"zone": "a"}, annotations={NO_FIT: "ignore-affinity"})],
        ),
        {"a": "o"},
        id="matching node full and the pod ignores affinity when nothing fits",
    ),
    pytest.param(
        cluster([SMALL], [pod("other", cpu=1, scheduler="default-scheduler")]),
        {},
        id="a pod addressed to another scheduler is not in the batch",
    ),
]


@pytest.mark.parametrize(("state", "placements"), VALID)
def test_accepts_valid_placements(state: Cluster, placements: dict[str, str]) -> None:
    assert validate_placements(state, _keys(placements)) == []


INVALID = [
    pytest.param(
        cluster([SMALL], [pod("a", cpu=3), pod("b", cpu=2)]), {"a": "n1", "b": "n1"}, {}, "over capacity", id="over cpu"
    ),
    pytest.param(
        cluster([SMALL], [pod("a", cpu=1, memory="6Gi"), pod("b", cpu=1, memory="4Gi")]),
        {"a": "n1", "b": "n1"},
        {},
        "memory",
        id="over memory",
    ),
    pytest.param(
        cluster([node("n1", pods=2)], [pod("r", node="n1"), pod("a"), pod("b")]),
        {"a": "n1", "b": "n1"},
        {},
        "pods 3 > allocatable 2",
        id="over the pod count, running pods included",
    ),
    pytest.param(
        cluster([SMALL], [pod("a", cpu=1, gpu=1)]),
        {"a": "n1"},
        {},
        "example.com/gpu",
        id="extended resource the node lacks",
    ),
    pytest.param(
        cluster([SMALL], [pod("r", cpu=3, node="n1"), pod("a", cpu=2)]),
        {"a": "n1"},
        {},
        "over capacity",
        id="running pods count towards usage",
    ),
    pytest.param(
        cluster([node("n1", labels={"disk": "hdd"})], [pod("a", cpu=1, selector={"disk": "ssd"})]),
        {"a": "n1"},
        {},
        "does not match",
        id="wrong nodeSelector label",
    ),
    pytest.param(
        cluster(
            [node("n1", labels={"zone": "a"})], [pod("a", cpu=1, affinity=required(term(expr("zone", "NotIn", "a"))))]
        ),
        {"a": "n1"},
        {},
        "does not match",
        id="required affinity not satisfied",
    ),
    pytest.param(
        cluster(
            [node("n1", labels={"zone": "a"}), node("n2")],
            [pod("a", cpu=1, selector={"zone": "a"}, annotations={NO_MATCH: "ignore-affinity"})],
        ),
        {"a": "n2"},
        {},
        "does not match",
        id="ignore-affinity when no node matches does not apply when one does",
    ),
    pytest.param(
        cluster(
            [node("m", labels={"zone": "a"}), node("o")],
            [pod("a", cpu=1, selector={"zone": "a"}, annotations={NO_FIT: "ignore-affinity"})],
        ),
        {"a": "o"},
        {},
        "matching node m has room",
        id="ignore-affinity when nothing fits while a matching node has room",
    ),
    pytest.param(
        cluster([node("n1", taints=[taint("gpu")])], [pod("a", cpu=1)]),
        {"a": "n1"},
        {},
        "untolerated taint gpu",
        id="untolerated NoSchedule taint",
    ),
    pytest.param(
        cluster(
            [node("n1", taints=[taint("gpu", "NoExecute")])],
            [pod("a", cpu=1, tolerations=[toleration("gpu", "Exists", effect="NoSchedule")])],
        ),
        {"a": "n1"},
        {},
        "untolerated taint gpu",
        id="toleration for another effect does not tolerate NoExecute",
    ),
    pytest.param(
        cluster(
            [node("n1", taints=[taint("gpu", value="yes")])],
            [pod("a", cpu=1, tolerations=[toleration("gpu", "Equal", "no")])],
        ),
        {"a": "n1"},
        {},
        "untolerated taint",
        id="Equal toleration with another value",
    ),
    pytest.param(
        cluster([node("n1", unschedulable=True)], [pod("a", cpu=1)]), {"a": "n1"}, {}, "cordoned", id="cordoned node"
    ),
    pytest.param(
        cluster([SMALL], [pod("r", node="n1", ports=[8080]), pod("a", cpu=1, ports=[8080])]),
        {"a": "n1"},
        {},
        "host port TCP/8080 already used by default/r",
        id="host port clash with a running pod",
    ),
    pytest.param(
        cluster([SMALL], [pod("a", cpu=1, ports=[{"port": 53, "hostIP": "10.0.0.1"}]), pod("b", cpu=1, ports=[53])]),
        {"a": "n1", "b": "n1"},
        {},
        "already used",
        id="host port clash between placed pods, one on the wildcard IP",
    ),
    pytest.param(
        cluster([node("n1", cpu=1)], [pod("high", cpu=1, priority=5), pod("low", cpu=1, priority=1)]),
        {"low": "n1"},
        {},
        "in place of lower-key pods default/low",
        id="lower priority placed instead of higher",
    ),
    pytest.param(
        cluster([node("n1", cpu=1)], [pod("svc", cpu=1), pod("job", cpu=1, restart="Never")]),
        {"job": "n1"},
        {},
        "lower-key",
        id="restart tier: a Never pod took the room of an Always pod",
    ),
    pytest.param(
        cluster([node("n1", cpu=2)], [pod("a", cpu=1), pod("b", cpu=1)]),
        {"a": "n1"},
        {},
        "default/b: left unplaced although it fits on node n1",
        id="a pod left out that fits",
    ),
    pytest.param(
        cluster(
            [node("m", cpu=1, labels={"zone": "a"}), node("o")],
            [pod("a", cpu=2, selector={"zone": "a"}, annotations={NO_FIT: "ignore-affinity"})],
        ),
        {},
        {},
        "fits on node o",
        id="a relaxed-affinity pod left out while a non-matching node has room",
    ),
    pytest.param(cluster([SMALL], [pod("a")]), {"ghost": "n1"}, {}, "no such pod", id="unknown pod"),
    pytest.param(cluster([SMALL], [pod("a")]), {"a": "n9"}, {}, "not a node", id="unknown node"),
    pytest.param(
        cluster([SMALL], [pod("r", node="n1")]), {"r": "n1"}, {}, "not pending", id="running pod placed again"
    ),
    pytest.param(
        cluster([SMALL], [pod("g", cpu=1) | {"schedulingGates": ["wait"]}]),
        {"g": "n1"},
        {},
        "scheduling gates",
        id="gated pod placed",
    ),
    pytest.param(
        cluster([SMALL], [pod("o", cpu=1, scheduler="default-scheduler")]),
        {"o": "n1"},
        {},
        "addressed to scheduler",
        id="pod of another scheduler placed",
    ),
]


@pytest.mark.parametrize(("state", "placements", "options", "fragment"), INVALID)
def test_catches_violation(state: Cluster, placements: dict[str, str], options: dict[str, bool], fragment: str) -> None:
    violations = validate_placements(state, _keys(placements), **options)
    assert violations, "expected a violation"
    assert any(fragment in v for v in violations), violations


def test_restart_tiers_off_makes_equal_priorities_equal_keys() -> None:
    state = cluster([node("n1", cpu=1)], [pod("svc", cpu=1), pod("job", cpu=1, restart="Never")])
    assert validate_placements(state, {"default/job": "n1"}, restart_tiers=False) == []
    assert validate_placements(state, {"default/job": "n1"}, restart_tiers=True) != []


def test_scheduler_name_star_takes_every_pending_pod() -> None:
    state = cluster([SMALL], [pod("o", cpu=1, scheduler="default-scheduler")])
    assert validate_placements(state, {"default/o": "n1"}, scheduler_name="*") == []
    assert validate_placements(state, {}, scheduler_name="*") != []


def test_hard_violations_ignore_maximality() -> None:
    state = cluster([node("n1", cpu=2)], [pod("a", cpu=1), pod("b", cpu=1)])
    assert hard_violations(state, {"default/a": "n1"}) == []
    assert validate_placements(state, {"default/a": "n1"}) != []


@pytest.mark.parametrize(
    ("tol", "tnt", "expected"),
    [
        pytest.param(
            Toleration(operator="Exists"),
            Taint(key="k", value="v", effect="NoExecute"),
            True,
            id="empty key Exists tolerates all",
        ),
        pytest.param(
            Toleration(key="k", operator="Exists"),
            Taint(key="k", value="v", effect="NoSchedule"),
            True,
            id="Exists ignores value",
        ),
        pytest.param(
            Toleration(key="k", value="v"),
            Taint(key="k", value="v", effect="NoSchedule"),
            True,
            id="Equal same value, any effect",
        ),
        pytest.param(
            Toleration(key="k", value="w"),
            Taint(key="k", value="v", effect="NoSchedule"),
            False,
            id="Equal other value",
        ),
        pytest.param(
            Toleration(key="j", operator="Exists"), Taint(key="k", effect="NoSchedule"), False, id="other key"
        ),
        pytest.param(
            Toleration(key="k", operator="Exists", effect="NoSchedule"),
            Taint(key="k", effect="NoExecute"),
            False,
            id="other effect",
        ),
    ],
)
def test_toleration_rules(tol: Toleration, tnt: Taint, expected: bool) -> None:
    assert tolerates(tol, tnt) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param(HostPort(port=80), HostPort(port=80), True, id="same port wildcard IPs"),
        pytest.param(HostPort(port=80, host_ip="1.1.1.1"), HostPort(port=80), True, id="specific IP vs wildcard"),
        pytest.param(
            HostPort(port=80, host_ip="1.1.1.1"), HostPort(port=80, host_ip="1.1.1.2"), False, id="different IPs"
        ),
        pytest.param(HostPort(port=80), HostPort(port=80, protocol="UDP"), False, id="different protocols"),
        pytest.param(HostPort(port=80), HostPort(port=81), False, id="different ports"),
    ],
)
def test_port_clash_rules(a: HostPort, b: HostPort, expected: bool) -> None:
    assert ports_clash(a, b) is expected
    assert ports_clash(b, a) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10", 10),
        ("-3", -3),
        ("+7", 7),
        ("007", 7),
        ("1_0", None),
        (" 1", None),
        ("1.5", None),
        ("abc", None),
        ("", None),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),
        ("-9223372036854775808", -(2**63)),
        ("١٢", None),
    ],
)
def test_integers_follow_go_parseint(text: str, expected: int | None) -> None:
    assert go_parse_int(text) == expected


def test_pod_key_orders_priority_then_restart_tier() -> None:
    state = cluster(
        [SMALL], [pod("a", priority=1, restart="Never"), pod("b", priority=0), pod("c", restart="OnFailure")]
    )
    keys = {p.name: pod_key(p) for p in state.pods}
    assert keys["a"] > keys["b"] > keys["c"]
    assert pod_key(state.pods[1], restart_tiers=False) == pod_key(state.pods[2], restart_tiers=False)


def _keys(placements: dict[str, str]) -> dict[str, str]:
    return {k if "/" in k else f"default/{k}": v for k, v in placements.items()}


def test_a_gang_placed_in_part_is_a_violation() -> None:

    doc = {
        "nodes": [{"name": "a", "allocatable": {"cpu": "8", "memory": "8Gi"}}],
        "pods": [{"name": f"w{i}", "requests": {"cpu": "1"}, "labels": {"placer.io/gang": "g"}} for i in range(3)],
    }
    c = parse_cluster("g.json", json.dumps(doc))
    assert any("gang default/g" in v for v in validate_placements(c, {"default/w0": "a"}))
    assert validate_placements(c, {f"default/w{i}": "a" for i in range(3)}) == []
    assert validate_placements(c, {}) == []


def test_an_incomplete_gang_placed_is_a_violation() -> None:

    ann = {"placer.io/gang": "g", "placer.io/gang-size": "3"}
    doc = {
        "nodes": [{"name": "a", "allocatable": {"cpu": "8"}}],
        "pods": [{"name": f"w{i}", "requests": {"cpu": "1"}, "annotations": ann} for i in range(2)],
    }
    c = parse_cluster("g.json", json.dumps(doc))
    assert any("2 of its 3 pods pending" in v for v in hard_violations(c, {"default/w0": "a", "default/w1": "a"}))


def test_violations_are_data_with_the_same_words() -> None:
    """Two 3-cpu pods on a 4-cpu node: the node is over capacity (about the node), and the pod
    left out fits on the empty node (about the pod). The words are the string API's."""
    c = support.cluster(
        [support.node("a", cpu="4"), support.node("b", cpu="4")],
        [support.pod("x", cpu="3"), support.pod("y", cpu="3"), support.pod("z", cpu="1")],
    )
    placed = {"default/x": "a", "default/y": "a"}
    found = placement_violations(c, placed)
    assert [(v.rule, v.subject) for v in found] == [("capacity", "a"), ("maximality", "default/z")]
    assert found[1].about == ("b",)
    assert [v.text for v in found] == validate_placements(c, placed)


@pytest.mark.parametrize(
    ("asks", "left_out_for_nothing"),
    [pytest.param(2**69, True, id="fits a node beyond int64"), pytest.param(2**71, False, id="exceeds it")],
)
def test_room_beyond_int64_is_compared_exactly(asks: int, left_out_for_nothing: bool) -> None:
    huge = "example.com/huge"
    c = Cluster(
        nodes=(Node(name="n1", allocatable={"cpu": 4000, huge: 2**70}),),
        pods=(Pod(name="big", scheduler_name="placer", requests={"cpu": 1000, huge: asks}),),
    )
    found = validate_placements(c, {})
    assert bool(found) == left_out_for_nothing, found
    assert all("left unplaced although it fits on node n1" in v for v in found)
