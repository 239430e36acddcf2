"""Workload-aware disruption in the global plan (Kubernetes 1.37 ``disruptionMode``).

Aspects: a ``disruptionMode: all`` group that must make room loses all its pods or none (caps,
a member that may not be evicted); ``single`` loses only what is needed; among victims, fewer
groups first; a group preempts as one unit at its group priority, not its pods' own. Every
answer goes through the validator (``support.solve`` checks plans with ``validate_plan``).
"""

from __future__ import annotations

from typing import Any

from support import DETERMINISTIC, solve, unplaced, where
from workload_builders import dump, gang, node, pod, pod_group, racks

from placer.models import Config
from placer.service import SolveOptions, solve_cluster
from placer.validate import validate_plan


def _running_group(name: str, nodes: list[str], mode: str, priority: int = 1) -> list[dict[str, Any]]:
    return [
        pod_group(name, len(nodes), disruption=mode, priority=priority),
        *(pod(f"{name}-{i}", name, node=n) for i, n in enumerate(nodes)),
    ]


def _evicted(out: Any) -> set[str]:
    return {e.pod.split("/", 1)[1] for e in out.result.evictions}


def test_a_disruption_mode_all_group_that_must_make_room_loses_all_four_pods() -> None:
    c = dump(racks({"a": 4}), _running_group("low", [f"a-{i}" for i in range(4)], "all"), gang("high", 2, priority=100))
    out = solve(c)
    assert _evicted(out) == {f"low-{i}" for i in range(4)}
    assert len(where(out)) == 2


def test_a_disruption_mode_single_group_loses_only_the_pods_that_make_room() -> None:
    c = dump(
        racks({"a": 4}), _running_group("low", [f"a-{i}" for i in range(4)], "single"), gang("high", 2, priority=100)
    )
    out = solve(c)
    assert len(_evicted(out)) == 2 and len(where(out)) == 2


def test_a_disruption_mode_all_group_loses_none_when_the_cap_forbids_the_whole_group() -> None:
    c = dump(racks({"a": 4}), _running_group("low", [f"a-{i}" for i in range(4)], "all"), gang("high", 2, priority=100))
    cfg = Config.model_validate(DETERMINISTIC)
    out = solve_cluster(c, SolveOptions(config=cfg, max_evictions=3))
    assert out.result.evictions == [] and {u.code for u in out.result.unplaced} != set()
    assert validate_plan(c, out.result, max_evictions=3) == []


def test_a_disruption_mode_all_group_with_a_member_that_may_not_be_evicted_loses_none() -> None:
    """A member placer never evicts (a DaemonSet's pod) keeps the whole group running."""
    items = _running_group("low", [f"a-{i}" for i in range(4)], "all")
    items[2]["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid", "controller": True}
    ]
    out = solve(dump(racks({"a": 4}), items, gang("high", 2, priority=100)))
    assert _evicted(out) == set() and set(unplaced(out)) == {"high-0", "high-1"}


def test_an_opted_out_member_does_not_shield_its_group_from_a_strictly_higher_priority() -> None:
    """``placer.io/evictable: "false"`` holds against moves and rebalancing only (issue 31): the
    higher-priority gang preempts the whole group, opted-out member included."""
    items = _running_group("low", [f"a-{i}" for i in range(4)], "all")
    items[2]["metadata"]["annotations"] = {"placer.io/evictable": "false"}
    out = solve(dump(racks({"a": 4}), items, gang("high", 2, priority=100)))
    assert _evicted(out) == {f"low-{i}" for i in range(4)} and len(where(out)) == 2


def test_members_of_a_whole_group_on_other_nodes_are_evicted_with_it() -> None:
    """The group spans two racks' worth of room; the preemptor needs only rack a: the member on
    rack b goes too, never left running alone."""
    nodes = [*racks({"a": 2}), node("b-0", 1, rack="b")]
    group = _running_group("low", ["a-0", "a-1", "b-0"], "all")
    group[0]["spec"].pop("schedulingConstraints")  # the running group itself has no domain
    out = solve(dump(nodes, group, gang("high", 2, priority=100)))
    assert _evicted(out) == {"low-0", "low-1", "low-2"}


def test_fewer_groups_are_disrupted_before_fewer_pods() -> None:
    """Room for two pods in one rack: a whole group of two, or two loose pods that disrupt alone
    (the same pods per key lost either way); the plan disrupts the one group."""
    nodes = [*racks({"a": 2}), *racks({"b": 2})]
    whole = _running_group("big", ["a-0", "a-1"], "all")
    loose = [pod("x", node="b-0", priority=1), pod("y", node="b-1", priority=1)]
    out = solve(dump(nodes, whole, loose, gang("high", 2, priority=100)))
    assert _evicted(out) == {"big-0", "big-1"}
    assert len(where(out)) == 2


def test_a_group_preempts_at_its_group_priority_not_its_pods_own() -> None:
    c = dump(racks({"a": 2}), pod("v-0", node="a-0", priority=50), pod("v-1", node="a-1", priority=50), gang("g", 2))
    assert _evicted(solve(c)) == set()  # group priority 0 does not outrank 50
    c = dump(
        racks({"a": 2}),
        pod("v-0", node="a-0", priority=50),
        pod("v-1", node="a-1", priority=50),
        gang("g", 2, priority=100),
    )
    out = solve(c)
    assert _evicted(out) == {"v-0", "v-1"} and len(where(out)) == 2
