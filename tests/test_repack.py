"""Repacking (CP-SAT on a few nodes at a time) and the faster ejection search, on packings with slack.

Instances: a generic perfect packing (``packgen``, seeds of these tests) on nodes with a little more
room than the pods fill, so no fill is exact (bin completion does not race) and the classic
heuristics leave pods out. Aspects: repacking alone, from first-fit decreasing's answer, places
every pod; it never answers with fewer pods than its start and ends at once in a stopped race;
the race with repacking as its only Python technique places every pod; the ejection search's
pairs of pods on one node are every such pair. Every placement goes through the validator.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import packgen
import pytest

from placer.engine import build_snapshot, packing, solve_batch
from placer.models import Cluster, Config
from placer.validate import validate_placements

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 0.01}})
SLACK = 30  # room per node and resource above what the planted pods fill (of packgen.ROOM)


def _slack(seed: int, pods: int, d: int) -> Cluster:
    return packgen.perfect(seed, pods, d, (3, 5)).cluster(slack=SLACK)


def _case(c: Cluster) -> tuple[Any, Any, list[int], Any]:
    return packgen.first_fit_case(c, CONFIG)


def _left_out_seeds(count: int, pods: int) -> list[int]:
    """The first ``count`` seeds whose instance first-fit decreasing does not pack."""
    out = []
    for seed in itertools.count(100):
        start = _case(_slack(seed, pods, 3))[3]
        if packgen.placed(start) < pods:
            out.append(seed)
        if len(out) == count:
            return out
    raise AssertionError("unreachable")


@pytest.mark.parametrize("seed", _left_out_seeds(3, 24))
def test_repacking_places_every_pod_that_first_fit_leaves_out(seed: int) -> None:
    c = _slack(seed, 24, 3)
    state, batch, nodes, start = _case(c)
    assert packgen.placed(start) < 24  # the start leaves pods out; no node is filled exactly
    found = packing.repack.search(batch, nodes, start, seconds=600.0, seed=seed)
    assert found is not None and packgen.placed(found) == 24
    assert validate_placements(c, packgen.node_names(state, batch, found)) == []


def test_repacking_never_answers_with_fewer_pods_and_stops_with_the_race() -> None:
    seed = _left_out_seeds(1, 60)[0]
    c = _slack(seed, 60, 3)
    state, batch, nodes, start = _case(c)
    with packing.clock.stoppable() as stop:
        stop.set()
        stopped = packing.repack.search(batch, nodes, start, seconds=600.0)
    assert stopped is not None and packgen.placed(stopped) == packgen.placed(start)  # no neighbourhood was tried
    found = packing.repack.search(batch, nodes, start, seconds=0.5, seed=1)
    assert found is not None and packgen.placed(found) >= packgen.placed(start)
    assert validate_placements(c, packgen.node_names(state, batch, found)) == []


def test_a_race_with_repacking_as_its_only_python_technique_places_every_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packing.tuning, "OFF", frozenset({packing.dispatch.EJECTION}))
    seed = _left_out_seeds(1, 24)[0]
    c = _slack(seed, 24, 3)
    pending = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [], pending, c.namespaces)
    config = Config.model_validate({"solver": {"workers": 2, "deterministic": False, "timeLimit": 60}})
    result = solve_batch(state, pending, config)
    assert result.greedy_placed < 24  # the race ran: the starts left pods out
    ran = [level.name for level in result.levels]
    assert packing.dispatch.REPACK in ran and packing.dispatch.EJECTION not in ran
    assert len(result.placements) == 24
    names = {pod.key: state.nodes[n].name for pod, n in result.placements}
    assert validate_placements(c, names) == []


def test_the_ejection_searchs_pairs_are_every_pair_of_pods_on_one_node() -> None:
    rng = np.random.default_rng(7)
    bin_of = rng.integers(-1, 6, size=40)
    movable = np.flatnonzero((bin_of >= 0) & (rng.random(40) < 0.8))
    first, second = packing.ejection._pairs(bin_of, movable)
    got = {frozenset(p) for p in zip(first.tolist(), second.tolist(), strict=True)}
    want = {frozenset((a, b)) for a, b in itertools.combinations(movable.tolist(), 2) if bin_of[a] == bin_of[b]}
    assert got == want and len(first) == len(want)
