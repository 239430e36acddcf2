"""The numbers a user reads: TBESK imbalance and std_score over the resources in use (defined once
in placer.metrics, as the README states it), pods running per priority, and the --compare table
built from them (arrows only where the answers differ)."""

from __future__ import annotations

import math

import pytest
from rich.console import Console
from support import cluster, node, pod, solve

from placer.cli.render import render_compare
from placer.metrics import balance_metrics, running_by_priority
from placer.models import Eviction, Placement, Result

GI = 2**30


def test_imbalance_is_each_nodes_spread_around_its_own_mean_and_std_score_that_of_the_means() -> None:
    # a: cpu 50 %, memory 10 %; b: cpu 20 %, memory 20 % (the README's formula, by hand).
    alloc = [{"cpu": 1000, "memory": 10 * GI}, {"cpu": 1000, "memory": 10 * GI}]
    used = [{"cpu": 500, "memory": 1 * GI}, {"cpu": 200, "memory": 2 * GI}]
    z_a = math.sqrt((0.5 - 0.3) ** 2 + (0.1 - 0.3) ** 2)
    imbalance, std = balance_metrics(alloc, used)
    assert imbalance == pytest.approx((z_a + 0.0) / 2)
    assert std == pytest.approx(0.05)  # the means 0.3 and 0.2


def test_a_resource_no_pod_requests_does_not_change_the_measures() -> None:
    alloc = [{"cpu": 1000, "memory": 10 * GI}, {"cpu": 1000, "memory": 10 * GI}]
    used = [{"cpu": 500, "memory": 1 * GI}, {"cpu": 200, "memory": 2 * GI}]
    with_disk = [{**a, "ephemeral-storage": 100 * GI} for a in alloc]
    assert balance_metrics(with_disk, used) == pytest.approx(balance_metrics(alloc, used))
    # Counted at 0 % it would have dominated: the node means drop and Z grows on both nodes.
    counted = [{**u, "ephemeral-storage": 0} for u in used]
    assert balance_metrics(with_disk, counted) == pytest.approx(balance_metrics(alloc, used))


def test_a_resource_requested_anywhere_counts_on_every_node_that_offers_it() -> None:
    alloc = [{"cpu": 1000, "ephemeral-storage": 100}, {"cpu": 1000, "ephemeral-storage": 100}]
    used = [{"cpu": 500, "ephemeral-storage": 50}, {"cpu": 500}]
    imbalance, std = balance_metrics(alloc, used)
    assert imbalance == pytest.approx((0.0 + math.sqrt(2 * 0.25**2)) / 2)  # b: cpu 50 %, storage 0 %
    assert std == pytest.approx(0.125)  # means 0.5 and 0.25


def test_a_cluster_with_nothing_requested_measures_zero() -> None:
    alloc = [{"cpu": 1000, "memory": GI, "ephemeral-storage": GI}]
    assert balance_metrics(alloc, [{}]) == (0.0, 0.0)
    assert balance_metrics([], []) == (0.0, 0.0)


def test_running_by_priority_drops_the_preempted_keeps_the_moved_and_adds_the_placed() -> None:
    c = cluster(
        [node("a", cpu="8")],
        [
            pod("low", node="a", priority=0),
            pod("moved", node="a", priority=0),
            pod("steady", node="a", priority=1000),
            pod("going", node="a", priority=1000, terminating=True),
            pod("new", priority=1000),
            pod("left", priority=5),
            pod("placed-then-preempted", priority=5),
        ],
    )
    result = Result(
        placements=[
            Placement(pod="default/new", node="a"),
            Placement(pod="default/placed-then-preempted", node="a"),
            Placement(pod=None, replaces="default/moved", node="a", kind="replacement"),
        ],
        evictions=[
            Eviction(pod="default/low", node="a", kind="preempt"),
            Eviction(pod="default/placed-then-preempted", node="a", kind="preempt"),
            Eviction(pod="default/moved", node="a", kind="move", to="a"),
        ],
    )
    assert running_by_priority(c.pods, result) == {1000: 2, 0: 1}


def _compare_table(**extra_pods: int) -> str:
    """The Boreas batch (placer runs all 5, kube-scheduler's simulation 4) with extra pending pods
    of the given priorities that both place."""
    pods = [pod(f"proxy-{i}", cpu="7.5", creationTimestamp=f"2024-01-01T00:00:0{i}Z") for i in range(2)]
    pods += [pod(f"backend-{i}", cpu="5", creationTimestamp=f"2024-01-01T00:01:0{i}Z") for i in range(3)]
    pods += [pod(name, cpu="0", memory="1Mi", priority=p) for name, p in extra_pods.items()]
    c = cluster([node("a", cpu="15", memory="64Gi"), node("b", cpu="15", memory="64Gi")], pods)
    ours, theirs = solve(c), solve(c, policy="default")
    console = Console(width=200, record=True)
    render_compare(console, ours, theirs, c.pods)
    return console.export_text()


def _row(table: str, label: str) -> list[str]:
    line = next(line for line in table.splitlines() if label in line)
    return [cell.strip() for cell in line.strip()[1:-1].split("│")]


def test_the_compare_table_leads_with_running_by_priority_and_shows_no_arrow_on_equal_values() -> None:
    table = _compare_table(guard=1000)
    # 1000 first: equal (1 and 1); then priority 0 decides: 5 against 4.
    assert _row(table, "running, priority") == [
        "running, priority 1000 / 0 (higher is better, from the left)",
        "1 / 5",
        "1 / 4",
        "<-",
    ]
    assert _row(table, "placed, priority 1000")[1:] == ["1", "1", ""]
    assert _row(table, "moved")[1:] == ["0", "0", ""]
    assert _row(table, "preempted")[1:] == ["0", "0", ""]
    assert _row(table, "placed (higher")[1:] == ["6", "5", "<-"]
