"""The gang-shapes benchmark's racks and gangs (``benchmarks/gang_shapes.py``), offline and small.

Aspects: the running pods of each shape fit their nodes and leave the free room the shape draws
(free slots count whole 8-cpu / 8Gi pods per node, fragments not); the issue's shape has racks of
6 or 10 free slots and gangs of 4 or 6; the cluster list reads back with the running pods bound
and the gangs pending; a small run splits no group and places no more groups than the bound.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks/` is not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import gang_shapes as gs  # noqa: E402
from placer.inputs import parse_cluster  # noqa: E402


def _per_node(running: list[gs.Running]) -> tuple[Counter[int], Counter[int]]:
    cpu: Counter[int] = Counter()
    memory: Counter[int] = Counter()
    for node, c, m in running:
        cpu[node] += c
        memory[node] += m
    return cpu, memory


@pytest.mark.parametrize("shape", gs.SHAPES)
def test_running_pods_fit_their_nodes(shape: str) -> None:
    running = gs.running_pods(shape, 40, np.random.default_rng(11))
    cpu, memory = _per_node(running)
    assert all(0 <= n < 40 for n in cpu)
    assert max(cpu.values(), default=0) <= gs.NODE_CPU and max(memory.values(), default=0) <= gs.NODE_MEMORY


def test_used_racks_keep_the_slots_no_running_pod_took() -> None:
    running = gs.running_pods("used", 40, np.random.default_rng(4))  # racks of 16, 16 and 8 nodes
    taken = Counter(node // 16 for node, _, _ in running)
    assert gs.free_slots(40, running) == [32 - taken[0], 32 - taken[1], 16 - taken[2]]
    assert gs.free_slots(40, []) == [32, 32, 16]


def test_free_slots_count_whole_gang_pods_per_node_not_fragments() -> None:
    # node 0: 6 cpu used -> one 8-cpu pod; node 1: 2 + 2 -> one; node 2: 8 cpu but 60Gi -> none
    # (memory); the other 13 nodes of the rack are empty -> two each.
    running = [(0, 6, 6), (1, 2, 2), (1, 2, 2), (2, 8, 60)]
    assert gs.free_slots(16, running) == [1 + 1 + 0 + 2 * 13]


def test_the_issue_shape_has_racks_of_6_or_10_free_slots_and_gangs_of_4_or_6() -> None:
    free = gs.free_slots(64, gs.running_pods("issue", 64, np.random.default_rng(5)))
    assert set(free) <= set(gs.ISSUE_FREE)
    sizes = gs.gang_sizes("issue", 100, np.random.default_rng(6))
    assert set(sizes) <= {4, 6} and 96 <= sum(sizes) <= 100  # drawn until the next one does not fit


def test_the_cluster_list_has_the_running_pods_bound_and_the_gangs_pending() -> None:
    running = gs.running_pods("mixed", 32, np.random.default_rng(8))
    cluster = parse_cluster("t", json.dumps(gs.cluster_list(32, running, [4, 7])))
    bound = [p for p in cluster.pods if p.node_name]
    pending = [p for p in cluster.pods if not p.node_name]
    assert len(bound) == len(running) and len(cluster.nodes) == 32
    assert Counter(p.gang_size for p in pending) == {4: 4, 7: 7}
    assert all(p.group_domains and p.group_domains[0].key == "bench.placer.io/rack" for p in pending)


def test_a_small_run_splits_no_group_and_stays_within_the_bound() -> None:
    row = gs.run_one("issue", 48, 1.0, seed=7, limit=1.0)
    assert row.broken == 0
    assert row.groups > 0 and row.best <= row.bound
    assert max(row.simulation, row.batched, row.one_batch) <= row.bound
