"""The overload search (``placer.engine.packing.overload``, steps compiled from ``overloadsteps``).

That it places every pod that first-fit decreasing leaves out on generic perfect packings is
tested with the ejection search's (``test_ejection_kernel``). It is no search for every packing:
on some exact 2-resource fills (``packgen.perfect(7, 60, 2, ...)``) it finds none in ten minutes,
where the ejection search and bin completion do; the race runs them all. Aspects here: it answers
with a packing of every pod or nothing: on a batch that cannot be packed whole it answers None once
the time runs out, and at once in a stopped race (nested races: either stop counts); its compiled
steps keep every pod on one node and each node's load the sum of its pods, and report how many
nodes are over their room; in the race it packs a perfect packing while the ejection search and
repack are off, and CP-SAT gets a worker fewer while it runs; it does not run while the kernel is
not compiled.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import packgen
import pytest
from support import cluster

from placer.engine import LevelSolver, build_snapshot, packing, solve_batch
from placer.models import Cluster, Config
from placer.validate import validate_placements

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("compiled_kernel")]

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 0.01}})


def _overfull() -> tuple[Cluster, Any, Any, list[int], Any]:
    """Six pods of 600 and three of 400 on five nodes of 1000: the volume allows all nine, but two
    pods of 600 never share a node, so no packing of all nine exists."""
    pods = [{"name": f"big{k}", "requests": {"cpu": "600m", "memory": "600Mi"}} for k in range(6)]
    pods += [{"name": f"small{k}", "requests": {"cpu": "400m", "memory": "400Mi"}} for k in range(3)]
    nodes = [{"name": f"n{i}", "allocatable": {"cpu": "1000m", "memory": "1000Mi", "pods": 110}} for i in range(5)]
    c = cluster(nodes, pods)
    state, batch, chosen, start = packgen.first_fit_case(c, CONFIG)
    return c, state, batch, chosen, start


def test_with_no_packing_it_answers_nothing_when_the_time_runs_out() -> None:
    _, _, batch, chosen, start = _overfull()
    assert packgen.placed(start) == 8
    assert packing.overload.search(batch, chosen, start, seconds=0.2, seed=1) is None


@pytest.mark.parametrize("which", ["outer", "inner"])
def test_a_stop_of_either_enclosing_race_stops_it(which: str) -> None:
    """Races nest (the overload search runs inside the dispatcher's race, inside the CP-SAT race):
    a stop of either ends the search at its next look at the clock."""
    _, _, batch, chosen, start = _overfull()
    with packing.clock.stoppable() as outer, packing.clock.stoppable() as inner:
        timer = threading.Timer(0.3, (outer if which == "outer" else inner).set)
        timer.start()
        assert packing.overload.search(batch, chosen, start, seconds=600.0, seed=1) is None
        assert (outer if which == "outer" else inner).is_set()  # it returned because of the stop
        timer.join()
    with packing.clock.stoppable() as outer:
        outer.set()
        with packing.clock.stoppable():
            assert packing.clock.now() == float("inf")
    assert packing.clock.now() < float("inf")


def test_the_steps_keep_every_pod_on_one_node_and_count_the_nodes_over_their_room() -> None:
    run = packing.kernel.overload()
    assert run is not None
    rng = np.random.default_rng(5)
    for _ in range(20):
        n, bins, d = int(rng.integers(10, 60)), int(rng.integers(3, 12)), int(rng.integers(1, 4))
        vecs = rng.integers(50, 400, size=(n, d)).astype(np.int64)
        room = np.full(d, 1000, dtype=np.int64)
        bin_of = rng.integers(bins, size=n).astype(np.int64)
        load = np.zeros((bins, d), dtype=np.int64)
        np.add.at(load, bin_of, vecs)
        weights = np.ones(d)
        tabu = np.zeros((n, bins), dtype=np.int64)
        stats = np.zeros(1, dtype=np.int64)
        for call in range(30):
            over = run(vecs, room, weights, 1.0, bin_of, load, tabu, stats, 7, call)
            assert ((bin_of >= 0) & (bin_of < bins)).all()
            summed = np.zeros((bins, d), dtype=np.int64)
            np.add.at(summed, bin_of, vecs)
            assert (summed == load).all()
            assert over == int((load > room).any(axis=1).sum())
            assert (weights >= 1.0).all()


def test_in_the_race_it_packs_alone_and_cp_sat_gets_a_worker_fewer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tight perfect packing, wall-clock mode, with the ejection search and repack off: the
    overload search's answer is the batch's (every pod placed, through the validator), unless
    CP-SAT's place-all search wins first; either way CP-SAT ran with one worker of the two."""
    inst = packgen.perfect(3, 60, 3, (3, 5))
    c = inst.cluster()
    pending = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [], pending, c.namespaces)
    dispatch = packing.dispatch
    monkeypatch.setattr(packing.tuning, "OFF", frozenset({dispatch.EJECTION, dispatch.REPACK, dispatch.COMPLETION}))
    solvers: list[Any] = []
    make = LevelSolver._solver

    def recording(self: LevelSolver, share: float = 1.0) -> Any:
        solvers.append(make(self, share))
        return solvers[-1]

    monkeypatch.setattr(LevelSolver, "_solver", recording)
    config = Config.model_validate({"solver": {"workers": 2, "deterministic": False, "timeLimit": 30}})
    result = solve_batch(state, pending, config)
    assert result.greedy_placed < inst.pods  # the race ran: the starts left pods out
    names = [level.name for level in result.levels]
    assert dispatch.OVERLOAD in names and dispatch.EJECTION not in names
    assert len(result.placements) == inst.pods
    assert validate_placements(c, {pod.key: state.nodes[n].name for pod, n in result.placements}) == []
    assert solvers[0].parameters.num_workers == 1  # place-all's, the batch's first CP-SAT search


@pytest.mark.parametrize(("search", "compiled"), [("overload", "overload"), ("dive", "contents")])
def test_it_does_not_run_before_the_kernel_is_compiled(
    monkeypatch: pytest.MonkeyPatch, search: str, compiled: str
) -> None:
    """The overload search, and the LP dive whose listing of contents is compiled with it."""
    monkeypatch.setattr(packing.kernel, "ready", lambda: None)
    module = getattr(packing, search)
    assert getattr(packing.kernel, compiled)() is None and not module.available()
    c = packgen.perfect(0, 40, 3, (3, 5)).cluster()
    _, batch, nodes, start = packgen.first_fit_case(c, CONFIG)
    assert module.search(batch, nodes, start, seconds=600.0) is None
