"""The e2e gang benchmark's objects and counting (``benchmarks/e2e_gangs.py``), without a cluster.

Aspects: gang sizes stay in range and within the demand's share of the room; a gang is a v1beta1
Workload, the PodGroup made from it (gang minCount, the rack as topology key) and members naming
it; the preemption filler fills every rack exactly with disruptionMode-all groups; bound members
are counted as whole, partial or split groups by rack, and evictions as whole or in part.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks/` is not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import e2e_gangs as eg  # noqa: E402
from benchmarks.e2e_shapes import RACK, RACK_NODES, node_labels, rack_of  # noqa: E402


def test_sizes_are_in_range_and_fit_the_budget() -> None:
    sizes = eg.draw_sizes(np.random.default_rng(3), 500)
    assert sizes and all(eg.SIZES[0] <= s <= eg.SIZES[1] for s in sizes)
    assert sum(sizes) <= 500
    assert sum(sizes) > 500 - eg.SIZES[1]  # twenty misses in a row: little room is left


def test_a_case_is_the_same_for_a_seed_and_its_demand_scales_with_the_nodes() -> None:
    a, b = eg.topology_case(160, 0.9, seed=2), eg.topology_case(160, 0.9, seed=2)
    assert a == b
    pods = sum(g.size for g in a.measured)
    assert pods <= 0.9 * eg.room(160) == 0.9 * 2 * 160


def test_a_gang_is_a_workload_its_pod_group_and_members_naming_it() -> None:
    g = eg.Gang("tg-007", 5, eg.HIGH)
    wl, pg, pods = eg.workload(g), eg.pod_group(g), eg.members(g)
    assert wl["kind"] == "Workload" and pg["kind"] == "PodGroup"
    assert pg["apiVersion"] == wl["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert pg["spec"]["workloadRef"] == {"workloadName": "tg-007", "templateName": "workers"}
    assert wl["spec"]["podGroupTemplates"][0]["name"] == "workers"
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 5}}
    assert pg["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert pg["spec"]["priorityClassName"] == eg.HIGH and "disruptionMode" not in pg["spec"]
    assert len(pods) == 5 and len({p["metadata"]["name"] for p in pods}) == 5
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "tg-007"} for p in pods)
    assert all(eg.group_of(p["metadata"]["name"]) == "tg-007" for p in pods)


def test_the_preemption_filler_fills_every_rack_with_disruption_all_groups() -> None:
    case = eg.preemption_case(4 * RACK_NODES, 0.25, seed=1)
    assert sum(g.size for g in case.filler) == eg.room(4 * RACK_NODES)
    assert all(g.disruption_all and g.priority_class == eg.LOW for g in case.filler)
    assert eg.pod_group(case.filler[0])["spec"]["disruptionMode"] == {"all": {}}
    assert case.measured and all(g.priority_class == eg.HIGH for g in case.measured)


def test_racks_are_consecutive_nodes() -> None:
    assert node_labels(0)[RACK] == rack_of(RACK_NODES - 1) != rack_of(RACK_NODES)


def test_groups_are_counted_whole_partial_or_split_by_rack() -> None:
    gangs = [eg.Gang("a", 2), eg.Gang("b", 2), eg.Gang("c", 2), eg.Gang("d", 2)]
    rack = {"n0": "r0", "n1": "r0", "n2": "r1"}
    node_of = {"a-00": "n0", "a-01": "n1", "b-00": "n0", "c-00": "n1", "c-01": "n2"}
    got = eg.count_groups(gangs, node_of, rack)
    assert got == {"groups": 4, "whole": 2, "partial": 1, "split": 1}  # a whole; b partial; c whole but split


def test_evictions_are_counted_whole_or_in_part() -> None:
    filler = [eg.Gang("low-000", 2, eg.LOW, True), eg.Gang("low-001", 2, eg.LOW, True), eg.Gang("low-002", 2)]
    alive = {"low-001-00", "low-002-00", "low-002-01"}
    assert eg.count_evicted(filler, alive) == {"evicted_pods": 3, "evicted_groups": 1, "evicted_in_part": 1}


def test_kube_scheduler_group_counters_are_read_from_its_metrics_text() -> None:
    text = "\n".join(
        [
            "# HELP scheduler_generated_placements_total Number of candidate placements",
            'scheduler_generated_placements_total{profile="default-scheduler"} 126',
            'scheduler_placement_evaluations_total{profile="default-scheduler",result="feasible"} 70',
            'scheduler_placement_evaluations_total{profile="default-scheduler",result="infeasible"} 56',
            'scheduler_podgroup_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 2',
            'scheduler_preemption_workload_disruptions_sum{preemptor="x"} 3',
            'scheduler_preemption_workload_disruptions_count{preemptor="x"} 1',
        ]
    )
    got = eg.group_counters(text)
    assert got["placements_generated"] == 126
    assert (got["placements_feasible"], got["placements_infeasible"]) == (70, 56)
    assert (got["group_cycles_scheduled"], got["group_cycles_unschedulable"]) == (2, 0)
    assert (got["preempted_units"], got["preempted_pods"]) == (3, 0)


def test_the_preemption_dump_is_full_nodes_and_a_first_batch_of_high_gangs() -> None:
    dump = eg.preemption_dump(4 * RACK_NODES, seed=1, batch=20)
    pods = [i for i in dump["items"] if i["kind"] == "Pod"]
    running = [p for p in pods if p["spec"].get("nodeName")]
    per_node = {p["spec"]["nodeName"] for p in running}
    assert len(running) == eg.room(4 * RACK_NODES) and len(per_node) == 4 * RACK_NODES  # two on every node
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    assert len(pending) >= 20 and all(p["spec"]["priority"] == eg.PRIORITIES[eg.HIGH] for p in pending)
    groups = [i for i in dump["items"] if i["kind"] == "PodGroup"]
    assert {g["spec"]["priority"] for g in groups} == {eg.PRIORITIES[eg.LOW], eg.PRIORITIES[eg.HIGH]}
