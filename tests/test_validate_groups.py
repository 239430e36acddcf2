"""The validator's workload-group rules (``placer.validate.groups``), on hand-made answers.

Aspects: one domain per group, a node without the label, nesting through a composite level,
running members counted, evicted members gone; whole-group disruption; and that
``validate_placements`` and ``validate_plan`` apply them.
"""

from __future__ import annotations

import pytest
from workload_builders import composite, dump, gang, node, pod, pod_group, racks

from placer.models import Cluster, Eviction, Result
from placer.validate import disruption_violations, domain_violations, validate_placements, validate_plan

ZONES = {"a": "z1", "b": "z1", "c": "z2"}


def _cluster() -> Cluster:
    items = [composite("job"), *gang("w1", 2, parent="job"), *gang("w2", 2, parent="job")]
    return dump(racks({"a": 2, "b": 2, "c": 2}, zone=ZONES), *items)


CASES: list[tuple[str, dict[str, str], list[str]]] = [
    ("each group in one rack of one zone", {"w1-0": "a-0", "w1-1": "a-1", "w2-0": "b-0", "w2-1": "b-1"}, []),
    ("a group split across two racks", {"w1-0": "a-0", "w1-1": "b-1"}, ["PodGroup ml/w1"]),
    (
        "two groups in racks of different zones break the composite's zone",
        {"w1-0": "a-0", "w1-1": "a-1", "w2-0": "c-0", "w2-1": "c-1"},
        ["CompositePodGroup ml/job"],
    ),
]


@pytest.mark.parametrize(("case", "placed", "broken"), CASES, ids=[c[0] for c in CASES])
def test_domain_rule(case: str, placed: dict[str, str], broken: list[str]) -> None:
    got = domain_violations(_cluster(), {f"ml/{k}": v for k, v in placed.items()})
    assert [v.subject for v in got] == broken


def test_a_pod_on_a_node_without_the_label_breaks_the_rule() -> None:
    c = dump([*racks({"a": 1}), {"kind": "Node", "metadata": {"name": "bare"}, "status": {"allocatable": {}}}])
    c = c.model_copy(update={"pods": dump(racks({"a": 1}), *gang("g", 1)).pods})
    (v,) = domain_violations(c, {"ml/g-0": "bare"})
    assert "no label topology.kubernetes.io/rack" in v.text


def test_running_members_count_and_evicted_ones_do_not() -> None:
    c = dump(racks({"a": 2, "b": 2}), pod_group("g", 2), pod("g-0", "g", node="a-0"), pod("g-1", "g"))
    assert [v.subject for v in domain_violations(c, {"ml/g-1": "b-0"})] == ["PodGroup ml/g"]
    assert domain_violations(c, {"ml/g-1": "b-0"}, gone={"ml/g-0"}) == []


def test_part_of_a_disruption_mode_all_group_evicted_is_a_violation() -> None:
    running = [pod(f"g-{i}", "g", node=f"a-{i}") for i in range(3)]
    c = dump(racks({"a": 3}), pod_group("g", 3, disruption="all"), *running)
    assert [v.subject for v in disruption_violations(c, {"ml/g-0"})] == ["PodGroup ml/g"]
    assert disruption_violations(c, {"ml/g-0", "ml/g-1", "ml/g-2"}) == []
    assert disruption_violations(c, set()) == []


def test_validate_placements_refuses_a_split_group() -> None:
    c = dump(racks({"a": 1, "b": 1}), *gang("g", 2))
    assert any("PodGroup ml/g" in v for v in validate_placements(c, {"ml/g-0": "a-0", "ml/g-1": "b-0"}))


def test_validate_plan_refuses_evicting_part_of_a_whole_group() -> None:
    running = [pod(f"low-{i}", "low", node=f"a-{i}") for i in range(2)]
    c = dump(racks({"a": 2}), pod_group("low", 2, disruption="all"), *running, *gang("high", 1, priority=9))
    result = Result(
        status="optimal",
        policy="placer",
        placements=[{"pod": "ml/high-0", "node": "a-0", "kind": "pending"}],
        evictions=[Eviction(pod="ml/low-0", node="a-0", kind="preempt", for_=["ml/high-0"])],
    )
    assert any("disruptionMode all" in v for v in validate_plan(c, result))


def test_a_gang_member_is_not_replaceable_while_its_gang_holds_a_pod_as_high() -> None:
    # One node of 3 cpu. Taking m-1 (priority 0) off for the loose pod (priority 1) takes m-0
    # (priority 1) off too: no gain, so leaving the loose pod out is no priority violation.
    c = dump(
        node("n0", 3),
        pod_group("m", 2, key=None),
        pod("m-0", "m", priority=1),
        pod("m-1", "m"),
        pod_group("s", 1, key=None),
        pod("s-0", "s", priority=1),
        pod("loose", priority=1),
    )
    assert validate_placements(c, {"ml/m-0": "n0", "ml/m-1": "n0", "ml/s-0": "n0"}) == []


def test_a_gang_of_lower_pods_only_is_still_replaceable() -> None:
    c = dump(
        node("n0", 2),
        pod_group("m", 2, key=None),
        pod("m-0", "m"),
        pod("m-1", "m"),
        pod("loose", priority=1),
    )
    got = validate_placements(c, {"ml/m-0": "n0", "ml/m-1": "n0"})
    assert len(got) == 1 and "ml/loose: left unplaced although it would fit on node n0 in place of" in got[0]
