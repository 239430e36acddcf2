"""The packing dispatcher: the classic heuristics as starts, and bin completion racing CP-SAT.

Aspects: each heuristic answers with a valid placement that leaves out only pods that fit nowhere
(first-fit, best-fit and dot-product are maximal); the start of a tight batch places at least as
many pods as every heuristic; a stopped race stops bin completion; a raced tight batch places every
pod of a perfect packing, through the validator; every technique is listed with its precondition;
the ejection search turns a start that leaves pods out into a packing of every pod, never answers
with fewer pods than its start, and gives up at once in a stopped race.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import packgen
import pytest
from support import cluster

from placer.engine import Budget, build_batch, build_snapshot, packing, solve_batch
from placer.models import Cluster, Config
from placer.validate import validate_placements

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 0.01}})


def _overfull(seed: int, d: int) -> Cluster:
    """A perfect packing with a fifth of its nodes taken away: the pods cannot all fit."""
    inst = packgen.perfect(seed, 40, d, (3, 5))
    c = inst.cluster()
    keep = max(1, inst.nodes - max(1, inst.nodes // 5))
    doc_nodes = [{"name": n.name, "allocatable": {r: str(v) for r, v in n.allocatable.items()}} for n in c.nodes]
    doc_pods = [{"name": p.name, "requests": {r: str(v) for r, v in p.requests.items()}} for p in c.pods]
    return cluster(doc_nodes[:keep], doc_pods)


def _state(c: Cluster) -> tuple[Any, list[Any]]:
    pending = [p for p in c.pods if p.pending]
    return build_snapshot(c.nodes, [], pending, c.namespaces), pending


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", sorted(packing.starts.HEURISTICS))
def test_each_heuristic_answers_validly_and_leaves_out_only_pods_that_fit_nowhere(name: str, seed: int) -> None:
    c = _overfull(seed, 2 + seed % 2)
    state, pending = _state(c)
    batch = build_batch(state, pending, CONFIG)
    placements = packing.starts.HEURISTICS[name](batch)
    names = {pod.key: state.nodes[n].name for pod, n in placements}
    assert len(names) == len(placements)  # no pod twice
    assert validate_placements(c, names) == []
    free = state.free.copy()
    for pod, n in placements:
        free[n] -= batch.groups[next(gi for gi, g in enumerate(batch.groups) if pod in g.pods)].vec
    for group in batch.groups:
        left = [p for p in group.pods if p.key not in names]
        if left:
            assert not np.all(free >= group.vec, axis=1).any(), f"{name}: {left[0].name} fits a node"
    assert packing.adopt(batch, placements) is not None


@pytest.mark.parametrize("seed", range(6))
def test_the_start_of_a_tight_batch_places_at_least_what_every_heuristic_places(seed: int) -> None:
    c = _overfull(seed, 3)
    state, pending = _state(c)
    best = max(len(run(build_batch(state, pending, CONFIG))) for run in packing.starts.HEURISTICS.values())
    result = solve_batch(state, pending, CONFIG, budget=Budget(0.0, deterministic=True))
    assert result.greedy_placed >= best
    assert len(result.placements) >= best
    names = {pod.key: state.nodes[n].name for pod, n in result.placements}
    assert validate_placements(c, names) == []


def test_a_stopped_race_stops_bin_completion() -> None:
    """The same search finds the packing when left alone and gives up at once when the race it
    runs in was stopped (the CP-SAT search won)."""
    inst = packgen.perfect(3, 60, 3, (3, 5))
    state, pending = _state(inst.cluster())
    batch = build_batch(state, pending, CONFIG)
    nodes = packing.completion.applies(batch)
    assert nodes is not None
    found, _ = packing.completion.complete(batch, nodes, seconds=600.0)
    assert found is not None
    with packing.clock.stoppable() as stop:
        stop.set()
        stopped, _ = packing.completion.complete(batch, nodes, seconds=600.0)
    assert stopped is None


def test_a_raced_tight_batch_places_every_pod_of_a_perfect_packing() -> None:
    """Wall-clock mode: no start places every pod, bin completion races the CP-SAT search, and
    whichever wins, every pod is placed and the validator accepts the answer."""
    inst = packgen.perfect(5, 60, 3, (3, 5))
    c = inst.cluster()
    state, pending = _state(c)
    config = Config.model_validate({"solver": {"workers": 2, "deterministic": False, "timeLimit": 30}})
    result = solve_batch(state, pending, config)
    assert result.greedy_placed < inst.pods  # the race ran: the starts left pods out
    assert packing.dispatch.COMPLETION in [level.name for level in result.levels]
    assert len(result.placements) == inst.pods
    names = {pod.key: state.nodes[n].name for pod, n in result.placements}
    assert validate_placements(c, names) == []


def test_every_technique_states_its_precondition_and_budget() -> None:
    names = [t.name for t in packing.TECHNIQUES]
    assert names == [
        "heuristics",
        "place-all",
        packing.dispatch.COMPLETION,
        packing.dispatch.EJECTION,
        packing.dispatch.OVERLOAD,
        packing.dispatch.DIVE,
        packing.dispatch.REPACK,
    ]
    assert all(t.applies and t.budget for t in packing.TECHNIQUES)


def test_a_technique_switched_off_does_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark of what each technique contributes switches one off at a time: with the
    heuristics off the start is the greedy passes' alone; with completion off no race is run."""
    c = _overfull(0, 3)
    state, pending = _state(c)
    with_all = solve_batch(state, pending, CONFIG, budget=Budget(0.0, deterministic=True)).greedy_placed
    monkeypatch.setattr(packing.tuning, "OFF", frozenset({packing.dispatch.HEURISTICS}))
    without = solve_batch(state, pending, CONFIG, budget=Budget(0.0, deterministic=True)).greedy_placed
    assert without < with_all
    inst = packgen.perfect(5, 60, 3, (3, 5))
    state, pending = _state(inst.cluster())
    monkeypatch.setattr(packing.tuning, "OFF", frozenset({packing.dispatch.COMPLETION}))
    config = Config.model_validate({"solver": {"workers": 2, "deterministic": False, "timeLimit": 1}})
    result = solve_batch(state, pending, config)
    assert packing.dispatch.COMPLETION not in [level.name for level in result.levels]


def test_an_answer_with_one_host_port_twice_on_a_node_is_refused() -> None:
    """Two different pods asking for host port 80 (so two groups) never share a node, whichever
    heuristic or alternative proposes it; the heuristics themselves never propose it."""
    web = {"hostPorts": [{"port": 80}]}
    c = cluster(
        [{"name": "a", "allocatable": {"cpu": "4", "memory": "8Gi", "pods": 110}}],
        [{"name": "x", "requests": {"cpu": "1"}, **web}, {"name": "y", "requests": {"cpu": "2"}, **web}],
    )
    state, pending = _state(c)
    batch = build_batch(state, pending, CONFIG)
    assert packing.adopt(batch, [(pending[0], 0), (pending[1], 0)]) is None
    assert packing.adopt(batch, [(pending[0], 0)]) is not None
    for run in packing.starts.HEURISTICS.values():
        placed = run(build_batch(state, pending, CONFIG))
        assert len(placed) == 1 and packing.adopt(build_batch(state, pending, CONFIG), placed) is not None


def _exact_best_fit(free: np.ndarray, nodes: np.ndarray, vec: np.ndarray, columns: np.ndarray) -> int:
    """The node best-fit picks, by definition: least exactly rounded sum of scaled room left."""
    top = [max(int(free[:, c].max()), 1) for c in columns]
    sums = [
        math.fsum(float(int(free[n, c]) - int(vec[c])) / t for c, t in zip(columns, top, strict=True)) for n in nodes
    ]
    return int(nodes[sums.index(min(sums))])


@pytest.mark.parametrize("seed", range(20))
def test_best_fit_picks_the_node_of_least_exact_room_left_ties_to_the_first(seed: int) -> None:
    """Permuted rows hold the same scaled amounts (every column has the same largest room), so
    their exact sums tie while sums added in another order may not: the first must win."""
    rng = np.random.default_rng(seed)
    c = _overfull(seed, 3)
    state, pending = _state(c)
    batch = build_batch(state, pending, CONFIG)
    packer = packing.starts._Packer(batch)
    width = packer.free.shape[1]
    base = rng.integers(1, 10**9, size=(8, width))
    rows = [base[int(rng.integers(0, len(base)))][rng.permutation(width)] for _ in range(200)]
    packer.free = np.array(rows, dtype=np.int64)
    packer.free[:, packer.columns] = np.maximum(packer.free[:, packer.columns], 1)
    packer.free[0, packer.columns] = 10**9  # the same largest room in every column asked for
    packer.top = np.full(len(packer.columns), 10**9, dtype=np.float64)
    vec = np.zeros(width, dtype=np.int64)
    vec[packer.columns] = rng.integers(0, 3, size=len(packer.columns))
    nodes = np.flatnonzero(np.all(packer.free >= vec, axis=1))
    assert packer.least_room_after(nodes, vec) == _exact_best_fit(packer.free, nodes, vec, packer.columns)


def test_the_heuristics_wait_for_time_left_unless_the_budget_is_deterministic() -> None:
    c = _overfull(1, 2)
    state, pending = _state(c)
    batch = build_batch(state, pending, CONFIG)
    assert packing.starts.heuristic_starts(batch, Budget(0.0, deterministic=False)) == []
    assert len(packing.starts.heuristic_starts(batch, Budget(0.0, deterministic=True))) == len(
        packing.starts.HEURISTICS
    )


def _ejection_case(seed: int) -> tuple[Cluster, Any, Any, list[int], Any]:
    """A perfect packing, its batch, the nodes, and first-fit decreasing's answer as the start."""
    c = packgen.perfect(seed, 40, 3, (3, 5)).cluster()
    state, pending = _state(c)
    batch = build_batch(state, pending, CONFIG)
    nodes = packing.completion.applies(batch)
    assert nodes is not None
    start = packing.adopt(batch, packing.starts.first_fit_decreasing(batch))
    assert start is not None
    return c, state, batch, nodes, start


@pytest.fixture(params=["python", pytest.param("compiled", marks=pytest.mark.kernel)])
def steps(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The ejection search's steps: in Python (the kernel not compiled yet) or compiled."""
    if request.param == "python":
        monkeypatch.setattr(packing.kernel, "ready", lambda: None)
    else:
        assert packing.kernel.wait(600.0)
    return str(request.param)


@pytest.mark.parametrize("seed", range(4))
def test_the_ejection_search_places_every_pod_that_first_fit_leaves_out(seed: int, steps: str) -> None:
    c, state, batch, nodes, start = _ejection_case(seed)
    assert packgen.placed(start) < sum(g.size for g in batch.groups)  # first fit decreasing leaves pods out
    found = packing.ejection.search(batch, nodes, start, seconds=600.0, seed=seed)
    assert found is not None and packgen.placed(found) == sum(g.size for g in batch.groups)
    assert validate_placements(c, packgen.node_names(state, batch, found)) == []


def test_a_stopped_race_stops_the_ejection_search(steps: str) -> None:
    """The race was stopped (the CP-SAT search won): the search does not start; left a moment,
    its best answer never places fewer pods than its start."""
    c, state, batch, nodes, start = _ejection_case(1)
    with packing.clock.stoppable() as stop:
        stop.set()
        assert packing.ejection.search(batch, nodes, start, seconds=600.0) is None
    found = packing.ejection.search(batch, nodes, start, seconds=1.0)
    assert found is not None and packgen.placed(found) >= packgen.placed(start)
    assert validate_placements(c, packgen.node_names(state, batch, found)) == []
