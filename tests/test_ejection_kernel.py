"""The compiled steps of the ejection search (``placer.engine.packing.kernel``).

Instances: generic perfect packings (``packgen``, seeds of these tests), some on nodes with a little
more room than the pods fill (no fill is exact), and a batch that cannot be packed whole. Aspects:
from first-fit decreasing's answer the compiled search places every pod; a batch that cannot be
packed whole keeps the search going until the race is stopped, and its answer then places as many
pods as can be placed and never fewer than its start; the kernel's state stays consistent (every
node's load is the sum of its pods, within its room), and so it does after each single step from
random partial packings, where a step leaves out at most two more pods than before it and only
pods that its move needed the room of. Every placement goes through the validator (a state in the
middle of the search through its hard rules only).
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
from placer.validate import hard_violations, validate_placements

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("compiled_kernel")]

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 0.01}})


def _case(c: Cluster) -> tuple[Any, Any, list[int], Any]:
    return packgen.first_fit_case(c, CONFIG)


@pytest.mark.parametrize("search", ["ejection", "overload", "dive"])
@pytest.mark.parametrize(
    ("seed", "pods", "d", "slack"), [(0, 40, 3, 0), (3, 60, 3, 0), (100, 40, 3, 30), (103, 40, 3, 30)]
)
def test_each_compiled_search_places_every_pod_that_first_fit_leaves_out(
    seed: int, pods: int, d: int, slack: int, search: str
) -> None:
    """The ejection search and the overload search (``overload``, compiled with it)."""
    c = packgen.perfect(seed, pods, d, (3, 5)).cluster(slack=slack)
    state, batch, nodes, start = _case(c)
    total = sum(g.size for g in batch.groups)
    assert packgen.placed(start) < total  # first-fit decreasing leaves pods out
    found = getattr(packing, search).search(batch, nodes, start, seconds=600.0, seed=seed)
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


def _partial(vecs: Any, room: Any, bins: int, rng: np.random.Generator) -> tuple[Any, ...]:
    """The kernel's state of a random partial packing: each pod, in random order, on a random
    node if it fits there, else left out. (bin_of, load, members, count, slot)."""
    n, d = vecs.shape
    bin_of = np.full(n, -1, dtype=np.int64)
    load = np.zeros((bins, d), dtype=np.int64)
    members = np.zeros((bins, n), dtype=np.int64)
    count = np.zeros(bins, dtype=np.int64)
    slot = np.zeros(n, dtype=np.int64)
    for i in rng.permutation(n).tolist():
        b = int(rng.integers(bins))
        if (load[b] + vecs[i] <= room).all():
            bin_of[i], load[b] = b, load[b] + vecs[i]
            members[b, count[b]], slot[i] = i, count[b]
            count[b] += 1
    return bin_of, load, members, count, slot


def test_each_step_keeps_the_state_consistent_and_leaves_out_only_pods_it_needed_the_room_of() -> None:
    """Sixty small random instances (``packgen``: 20-50 pods, 2-3 resources, nodes with 0-40 of
    slack), from a random partial packing, one compiled step at a time for up to 80 steps. After
    each step: every node within its room, its load the sum of its pods, the member lists, counts,
    slots and each pod's node agreeing; at most two more pods left out (a step puts one pod on a
    node for at most three); and no pod the step took off a node would fit back on it as the
    node now stands (the pods ejected are the ones that make room, none more: a stale third pod
    of an earlier three-pod candidate was once ejected with a later one-pod choice's, from its
    own node). The validator finds no hard violation in any step's placements (a state in the
    middle of the search may leave out a pod that fits: the next step places it)."""
    run = packing.kernel.ready()
    assert run is not None
    for seed in range(60):
        inst = packgen.perfect(seed, 20 + 10 * (seed % 4), 2 + seed % 2, (3, 5))
        slack = 20 * (seed % 3)
        c = inst.cluster(slack=slack)
        key = {p.name: p.key for p in c.pods}
        keys = [key[f"p{k:03d}"] for k in range(inst.pods)]
        names = [n.name for n in c.nodes]
        vecs, bins = inst.vecs.astype(np.int64), inst.nodes
        room = np.full(inst.d, packgen.ROOM + slack, dtype=np.int64)
        base = (vecs / room).sum(axis=1)
        weight = base.copy()
        rng = np.random.default_rng(seed)
        bin_of, load, members, count, slot = _partial(vecs, room, bins, rng)
        tabu = np.zeros((inst.pods, bins), dtype=np.int64)
        keep = np.zeros(inst.pods, dtype=np.int64)
        best = bin_of.copy()
        stats = np.array([0, int((bin_of < 0).sum())], dtype=np.int64)
        for step in range(80):
            before = bin_of.copy()
            if (before >= 0).all():
                break
            state = (bin_of, load, members, count, slot, tabu, keep, best, stats)
            run(vecs, room, base, weight, 0.01, *state, 1, seed * 1000 + step)
            where = f"seed {seed}, step {step}"
            for b in range(bins):
                on = np.flatnonzero(bin_of == b)
                listed = members[b, : count[b]]
                assert sorted(listed.tolist()) == on.tolist(), where
                assert (slot[listed] == np.arange(count[b])).all(), where
                assert (load[b] == vecs[on].sum(axis=0)).all() and (load[b] <= room).all(), where
            assert int((bin_of < 0).sum()) - int((before < 0).sum()) <= 2, where
            for e in np.flatnonzero((before >= 0) & (bin_of < 0)).tolist():
                assert ((load[before[e]] + vecs[e]) > room).any(), f"{where}: pod {e} fits back on its node"
            placed = {keys[i]: names[b] for i, b in enumerate(bin_of.tolist()) if b >= 0}
            assert hard_violations(c, placed) == [], where  # mid-search: feasible, not yet maximal
