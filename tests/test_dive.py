"""The LP dive (``placer.engine.packing.dive``, its listing of contents compiled from ``contents``).

Aspects: the compiled listing holds exactly the maximal contents of a node (every set of pods that
fits and that no other pod fits beside), checked against all subsets on small random instances, and
stops once there are more than asked; on generic perfect packings the dive places every pod that
first-fit decreasing leaves out (``test_ejection_kernel`` runs it beside the other searches); it
answers a packing of every pod or nothing: None on a batch that cannot be packed whole (once the
time runs out, or at once in a stopped race); in the race it packs while every other technique of
the race is off (the turns ending at once leave it running). That it does not run while the kernel
is not compiled is tested with the overload search (``test_overload_search``). Every placement
goes through the validator.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import packgen
import pytest
from support import cluster

from placer.engine import build_snapshot, packing, solve_batch
from placer.models import Config
from placer.validate import validate_placements

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("compiled_kernel")]

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 0.01}})


def _maximal_by_subsets(vecs: np.ndarray, room: np.ndarray) -> set[tuple[int, ...]]:
    n = len(vecs)
    found = set()
    for size in range(1, n + 1):
        for subset in itertools.combinations(range(n), size):
            load = vecs[list(subset)].sum(axis=0)
            if (load > room).any():
                continue
            if not any((load + vecs[k] <= room).all() for k in range(n) if k not in subset):
                found.add(subset)
    return found


def _listing(
    vecs: np.ndarray, room: np.ndarray, most: int, visits: int = 10**9, per_call: int = 10**9
) -> set[tuple[int, ...]] | None:
    """The compiled listing, called in slices of ``per_call`` sets until it is over or ``visits``
    sets were gone through; None when it reports too many (or is not over by then)."""
    listing = packing.kernel.contents()
    assert listing is not None
    flat = np.zeros(most * len(vecs), dtype=np.int64)
    starts = np.zeros(most + 1, dtype=np.int64)
    path = np.zeros(len(vecs) + 1, dtype=np.int64)
    load = np.zeros(len(room), dtype=np.int64)
    state = np.zeros(3, dtype=np.int64)
    packing.contents.begin(path, state)
    found = packing.contents.MORE
    while found == packing.contents.MORE and visits > 0:
        call = min(per_call, visits)
        found = int(listing(vecs, room, most, call, flat, starts, path, load, state))
        visits -= call
    if found < 0:
        return None
    return {tuple(int(p) for p in flat[starts[c] : starts[c + 1]]) for c in range(found)}


@pytest.mark.parametrize("seed", range(6))
def test_the_listing_holds_exactly_the_maximal_contents_of_a_node(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(4, 11)), int(rng.integers(1, 4))
    vecs = rng.integers(1, 60, size=(n, d)).astype(np.int64)
    room = np.full(d, 100, dtype=np.int64)
    expected = _maximal_by_subsets(vecs, room)
    assert _listing(vecs, room, 10_000) == expected
    assert _listing(vecs, room, len(expected)) == expected  # exactly as many as allowed: listed
    if len(expected) > 1:
        assert _listing(vecs, room, len(expected) - 1) is None  # one more than allowed: stops
    fitting = sum(
        1
        for size in range(1, n + 1)
        for subset in itertools.combinations(range(n), size)
        if (vecs[list(subset)].sum(axis=0) <= room).all()
    )
    assert _listing(vecs, room, 10_000, visits=fitting) == expected  # each set that fits gone through once
    assert _listing(vecs, room, 10_000, visits=fitting - 1) is None
    for per_call in (1, 2, 7):  # in slices, resumed from the arrays: the same listing
        assert _listing(vecs, room, 10_000, per_call=per_call) == expected


def _overfull() -> tuple[object, object, list[int], object]:
    """Six pods of 600 and three of 400 on five nodes of 1000: two pods of 600 never share a node,
    so no packing of all nine exists (the volume allows it)."""
    pods = [{"name": f"big{k}", "requests": {"cpu": "600m", "memory": "600Mi"}} for k in range(6)]
    pods += [{"name": f"small{k}", "requests": {"cpu": "400m", "memory": "400Mi"}} for k in range(3)]
    nodes = [{"name": f"n{i}", "allocatable": {"cpu": "1000m", "memory": "1000Mi", "pods": 110}} for i in range(5)]
    state, batch, chosen, start = packgen.first_fit_case(cluster(nodes, pods), CONFIG)
    return state, batch, chosen, start


def test_with_no_packing_it_answers_nothing_when_the_time_runs_out() -> None:
    _, batch, chosen, start = _overfull()
    assert packing.dive.search(batch, chosen, start, seconds=0.3, seed=1) is None


def test_a_stopped_race_stops_it() -> None:
    _, batch, chosen, start = _overfull()
    with packing.clock.stoppable() as stop:
        timer = threading.Timer(0.3, stop.set)
        timer.start()
        assert packing.dive.search(batch, chosen, start, seconds=600.0, seed=1) is None
        assert stop.is_set()  # it returned because of the stop, not before
        timer.join()


def test_in_the_race_it_packs_while_every_other_race_technique_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tight perfect packing, wall-clock mode, with bin completion, the ejection search, repack
    and the overload search off: the turns end at once, the dive runs on and its answer is the
    batch's (every pod placed, through the validator), unless CP-SAT's place-all wins first."""
    inst = packgen.perfect(3, 60, 3, (3, 5))
    c = inst.cluster()
    pending = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [], pending, c.namespaces)
    dispatch = packing.dispatch
    off = {dispatch.EJECTION, dispatch.REPACK, dispatch.COMPLETION, dispatch.OVERLOAD}
    monkeypatch.setattr(packing.tuning, "OFF", frozenset(off))
    config = Config.model_validate({"solver": {"workers": 2, "deterministic": False, "timeLimit": 30}})
    result = solve_batch(state, pending, config)
    assert result.greedy_placed < inst.pods  # the race ran: the starts left pods out
    reports = {level.name: level for level in result.levels}
    assert dispatch.DIVE in reports and dispatch.OVERLOAD not in reports
    assert len(result.placements) == inst.pods
    assert validate_placements(c, {pod.key: state.nodes[n].name for pod, n in result.placements}) == []
