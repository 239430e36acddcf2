"""The compiled steps of the ejection search (``placer.engine.packing.kernel``).

Instances: generic perfect packings (``packgen``, seeds of these tests), some on nodes with a little
more room than the pods fill (no fill is exact), and a batch that cannot be packed whole. Aspects:
from first-fit decreasing's answer the compiled search places every pod; a batch that cannot be
packed whole keeps the search going until the race is stopped, and its answer then places as many
pods as can be placed and never fewer than its start; the kernel's state stays consistent (every
node's load is the sum of its pods, within its room). Every placement goes through the validator.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import packgen
import pytest
from support import cluster

from placer.engine import packing
from placer.models import Cluster, Config
from placer.validate import validate_placements

pytestmark = pytest.mark.kernel

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 0.01}})


@pytest.fixture(autouse=True)
def compiled() -> None:
    assert packing.kernel.wait(600.0), "the kernel did not compile"


def _case(c: Cluster) -> tuple[Any, Any, list[int], Any]:
    return packgen.first_fit_case(c, CONFIG)


@pytest.mark.parametrize(
    ("seed", "pods", "d", "slack"), [(0, 40, 3, 0), (3, 60, 3, 0), (100, 40, 3, 30), (103, 40, 3, 30)]
)
def test_the_compiled_search_places_every_pod_that_first_fit_leaves_out(
    seed: int, pods: int, d: int, slack: int
) -> None:
    c = packgen.perfect(seed, pods, d, (3, 5)).cluster(slack=slack)
    state, batch, nodes, start = _case(c)
    total = sum(g.size for g in batch.groups)
    assert packgen.placed(start) < total  # first-fit decreasing leaves pods out
    found = packing.ejection.search(batch, nodes, start, seconds=600.0, seed=seed)
    assert found is not None and packgen.placed(found) == total
    assert validate_placements(c, packgen.node_names(state, batch, found)) == []


def test_a_batch_that_cannot_be_packed_whole_runs_until_the_race_stops_and_keeps_its_best() -> None:
    """Six pods of 600 and three of 400 on five nodes of 1000: the volume allows all nine, but two
    pods of 600 never share a node, so at most eight are placed. Nothing tells the search that
    eight is the most: it ends when the race is stopped, with eight."""
    pods = [{"name": f"big{k}", "requests": {"cpu": "600m", "memory": "600Mi"}} for k in range(6)]
    pods += [{"name": f"small{k}", "requests": {"cpu": "400m", "memory": "400Mi"}} for k in range(3)]
    nodes = [{"name": f"n{i}", "allocatable": {"cpu": "1000m", "memory": "1000Mi", "pods": 110}} for i in range(5)]
    c = cluster(nodes, pods)
    state, batch, chosen, start = _case(c)
    assert packgen.placed(start) == 8
    with packing.clock.stoppable() as stop:
        timer = threading.Timer(0.3, stop.set)
        timer.start()
        found = packing.ejection.search(batch, chosen, start, seconds=600.0, seed=1)
        assert stop.is_set()  # it returned because the race was stopped, not before
        timer.join()
    assert found is not None and packgen.placed(found) == 8
    assert validate_placements(c, packgen.node_names(state, batch, found)) == []


def test_the_kernel_keeps_loads_equal_to_the_sum_of_each_nodes_pods() -> None:
    """The compiled state after some steps: every node's load is the sum of its pods' requests and
    within its room; the member lists hold exactly the pods on each node."""
    run = packing.kernel.ready()
    assert run is not None
    rng = np.random.default_rng(11)
    n, bins, d = 50, 12, 3
    vecs = rng.integers(50, 400, size=(n, d)).astype(np.int64)
    room = np.full(d, 1000, dtype=np.int64)
    base = (vecs / room).sum(axis=1)
    bin_of = np.full(n, -1, dtype=np.int64)
    load = np.zeros((bins, d), dtype=np.int64)
    members = np.zeros((bins, n), dtype=np.int64)
    count = np.zeros(bins, dtype=np.int64)
    slot = np.zeros(n, dtype=np.int64)
    stats = np.array([0, n], dtype=np.int64)
    best = bin_of.copy()
    tabu = np.zeros((n, bins), dtype=np.int64)
    keep = np.zeros(n, dtype=np.int64)
    run(vecs, room, base, base.copy(), 0.01, bin_of, load, members, count, slot, tabu, keep, best, stats, 5000, 3)
    for b in range(bins):
        on = np.flatnonzero(bin_of == b)
        assert sorted(members[b, : count[b]].tolist()) == on.tolist()
        assert (load[b] == vecs[on].sum(axis=0)).all()
        assert (load[b] <= room).all()
    assert stats[1] == (best < 0).sum() <= (bin_of < 0).sum()
