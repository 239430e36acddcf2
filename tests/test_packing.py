"""Tight batches: the packing start and its safeguards.

Aspects: another answer (kube-scheduler's, from the service) becomes the engine's start only if it
is an answer of the batch (capacity, feasible nodes, whole gangs, one host-port pod per node) and
places more pods per key; the engine's answer then never places fewer; answers keep within the
time limit's budget; perfect packings are found as exact covers of exact node fills.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import packgen
import pytest
from support import cluster, node, pod, solve

from placer.baseline import simulate
from placer.engine import (
    Budget,
    Scorer,
    adopt,
    batch_demand,
    build_batch,
    build_snapshot,
    packing,
    select_candidates,
    solve_batch,
)
from placer.models import Cluster, Config
from placer.validate import validate_placements

completion, exactcover = packing.completion, packing.exactcover
fillsampler, largefills = packing.fillsampler, packing.largefills

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 0.01}})


def _boreas() -> Cluster:
    """Two 15-cpu nodes, two proxies of 7.5 and three backends of 5: all five fit only packed."""
    pods = [pod(f"proxy-{i}", cpu="7.5") for i in range(2)] + [pod(f"backend-{i}", cpu="5") for i in range(3)]
    return cluster([node("a", cpu="15"), node("b", cpu="15")], pods)


def _state(c: Cluster) -> tuple[Any, list[Any]]:
    pending = [p for p in c.pods if p.pending]
    return build_snapshot(c.nodes, [], pending, c.namespaces), pending


def test_a_better_alternative_becomes_the_start() -> None:
    """A perfect packing of small pods (7-10 a node, 5 resources) that neither the greedy pass nor
    the classic heuristics find: the caller's alternative (the packing itself) becomes the start,
    so the answer places every pod even with no time to search."""
    inst = packgen.perfect(7, 120, 5, (7, 10))
    c = inst.cluster()
    state, pending = _state(c)
    by_name = {p.name: p for p in pending}
    planted = [(by_name[f"p{k:03d}"], state.index[f"n{n:03d}"]) for k, n in enumerate(inst.home)]
    no_time = Budget(0.0, deterministic=True)
    plain = solve_batch(state, pending, CONFIG, budget=no_time)
    helped = solve_batch(state, pending, CONFIG, budget=no_time, alternative=lambda: planted)
    assert plain.greedy_placed < inst.pods
    assert helped.greedy_placed == inst.pods == len(helped.placements)


def test_an_alternative_that_is_not_an_answer_is_refused() -> None:
    c = _boreas()
    state, pending = _state(c)
    by = {p.name: p for p in pending}
    batch = build_batch(state, pending, CONFIG)
    overbooked = [(by["proxy-0"], 0), (by["proxy-1"], 0), (by["backend-0"], 0)]
    assert adopt(batch, overbooked) is None
    fine = [(by["proxy-0"], 0), (by["proxy-1"], 0)]
    assert adopt(batch, fine) is not None


def test_an_alternative_in_a_batch_with_inter_pod_rules_is_taken_only_where_the_rules_allow() -> None:
    """kube-scheduler's answer is a start for batches with inter-pod rules too (its simulation
    keeps them), checked pod by pod in its order against the hard rules: two replicas with
    required hostname anti-affinity may not share a node; a zone-affinity group may seed any zone
    but its later pods must join it."""
    host, zone = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
    nodes = [node(n, labels={host: n, zone: z}) for n, z in (("a0", "a"), ("a1", "a"), ("b0", "b"))]

    def term(app: str, key: str) -> dict[str, Any]:
        return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}

    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web", host)]}}
    near = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("db", zone)]}}
    pods = [pod(f"web-{i}", labels={"app": "web"}, affinity=anti) for i in range(2)]
    pods += [pod(f"db-{i}", labels={"app": "db"}, affinity=near) for i in range(2)]
    state, pending = _state(cluster(nodes, pods))
    by = {p.name: p for p in pending}
    a0, a1, b0 = (next(i for i, n in enumerate(state.nodes) if n.name == name) for name in ("a0", "a1", "b0"))

    def answer(web: tuple[int, int], db: tuple[int, int]) -> list[tuple[Any, int]]:
        return [(by["web-0"], web[0]), (by["web-1"], web[1]), (by["db-0"], db[0]), (by["db-1"], db[1])]

    assert adopt(build_batch(state, pending, CONFIG), answer((a0, b0), (a1, a0))) is not None
    assert adopt(build_batch(state, pending, CONFIG), answer((a0, a0), (a1, a0))) is None  # two web on a0
    assert adopt(build_batch(state, pending, CONFIG), answer((a0, b0), (a1, b0))) is None  # db split over zones


def test_a_gang_placed_in_part_is_refused() -> None:
    gang = {"labels": {"placer.io/gang": "train", "placer.io/gang-size": "2"}}
    c = cluster([node("a", cpu="2")], [pod("t-0", cpu="2", **gang), pod("t-1", cpu="2", **gang)])
    state, pending = _state(c)
    batch = build_batch(state, pending, CONFIG)
    assert adopt(batch, [(pending[0], 0)]) is None


def test_bin_completion_packs_what_greedy_does_not() -> None:
    """A perfect packing (``packgen``: 60 pods, 3-5 a node, in 3 resources, on identical
    nodes) that neither greedy pass nor kube-scheduler finds: bin completion places every pod, and
    the validator accepts the answer (``support.solve``)."""
    inst = packgen.perfect(101, 60, 3, (3, 5))
    c = inst.cluster()
    state, pending = _state(c)
    sim = simulate(state.copy(), pending, "default", preemption=False)
    no_time = Budget(0.0, deterministic=True)
    greedy_only = solve_batch(state, pending, CONFIG, budget=no_time, alternative=lambda: sim.placements)
    assert greedy_only.greedy_placed < inst.pods
    outcome = solve(c, solver={"workers": 1, "deterministic": True, "timeLimit": 1, "seed": 0})
    assert outcome.result.metrics.placed == inst.pods


def test_bin_completion_proves_a_packing_impossible() -> None:
    """Three pods of 600m on two 1-cpu nodes: the volume allows them (1.8 of 2 cpus), no packing
    does; the complete first attempt says so without using its steps."""
    c = cluster([node(n, cpu="1") for n in "ab"], [pod(f"p{i}", cpu="600m", memory="1Mi") for i in range(3)])
    state, pending = _state(c)
    batch = build_batch(state, pending, CONFIG)
    nodes = completion.applies(batch)
    assert nodes == [0, 1]
    found, used = completion.complete(batch, nodes, steps=10_000)
    assert found is None
    assert used < 10_000


def test_bin_completion_only_on_identical_nodes_and_plain_pods() -> None:
    """Nodes with different free room, or pods with host ports, are not a plain packing."""
    pods = [pod(f"p{i}", cpu="600m") for i in range(3)]
    assert (
        completion.applies(build_batch(*_state(cluster([node("a", cpu="1"), node("b", cpu="2")], pods)), CONFIG))
        is None
    )
    ported = [pod(f"p{i}", cpu="600m", hostPorts=[{"port": 80}]) for i in range(3)]
    same = [node("a", cpu="1"), node("b", cpu="1")]
    assert completion.applies(build_batch(*_state(cluster(same, ported)), CONFIG)) is None
    assert completion.applies(build_batch(*_state(cluster(same, pods)), CONFIG)) == [0, 1]


def test_a_tight_batch_on_identical_nodes_may_use_every_node() -> None:
    """Six alike nodes, candidate sets of two per pod (the same two: the nodes tie): widened, every
    pod may go to every node, so the model of "every pod placed" keeps the packings that need all
    six; on nodes that differ the candidate sets stay."""
    config = Config.model_validate({"solver": {"candidates": 1}})
    pods = [pod(f"p{i}", cpu=f"{500 + 10 * i}m") for i in range(12)]
    alike = build_batch(*_state(cluster([node(f"n{i}", cpu="1") for i in range(6)], pods)), config)
    state = alike.snapshot
    select_candidates(alike, Scorer(state, config, batch_demand(alike)), config.solver.candidates)
    assert all(len(g.candidates) == 2 for g in alike.groups)
    packing.placeall.widen(alike)
    assert all(list(g.candidates) == list(range(6)) for g in alike.groups)
    mixed = build_batch(*_state(cluster([node(f"n{i}", cpu=str(1 + i)) for i in range(6)], pods)), config)
    select_candidates(mixed, Scorer(mixed.snapshot, config, batch_demand(mixed)), config.solver.candidates)
    before = [list(g.candidates) for g in mixed.groups]
    packing.placeall.widen(mixed)
    assert [list(g.candidates) for g in mixed.groups] == before


def test_an_exact_cover_is_found_and_its_absence_proven() -> None:
    """Knuth's example: the only cover of items 0-6 by these sets is {0, 3}, {2, 4, 5}, {1, 6};
    without {1, 6} there is none, and the search says so before its steps run out."""
    sets = [(2, 4, 5), (0, 3, 6), (1, 2, 5), (0, 3), (1, 6), (3, 4, 6)]
    chosen, _ = exactcover.cover(7, sets, 3, deadline=float("inf"), steps=10_000)
    assert chosen is not None and sorted(sets[i] for i in chosen) == [(0, 3), (1, 6), (2, 4, 5)]
    none, used = exactcover.cover(7, [s for s in sets if s != (1, 6)], 3, deadline=float("inf"), steps=10_000)
    assert none is None and used < 10_000
    assert exactcover.cover(7, sets, 2, deadline=float("inf"), steps=10_000)[0] is None  # only of three sets


def _brute_cover(items: int, sets: list[tuple[int, ...]], count: int) -> bool:
    return any(
        sorted(item for si in combo for item in sets[si]) == list(range(items))
        for combo in itertools.combinations(range(len(sets)), count)
    )


@pytest.mark.parametrize("rare_most", [packing.tuning.COVER_RARE_MOST, 0])
def test_a_cover_of_exactly_the_sets_asked_for_exists_when_brute_force_finds_one(
    rare_most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against brute force over random families of sets of one to four items, for every count:
    a cover is returned exactly when one of that many disjoint sets exists, and it is one. With
    ``RARE_MOST`` 0 the sets of rare sizes are not decided first (the plain item-by-item search)."""
    monkeypatch.setattr(packing.tuning, "COVER_RARE_MOST", rare_most)
    rng = np.random.default_rng(17)
    found = 0
    for _ in range(60):
        items = int(rng.integers(4, 9))
        family = {
            tuple(sorted(rng.choice(items, int(rng.integers(1, 5)), replace=False).tolist()))
            for _ in range(int(rng.integers(6, 14)))
        }
        sets = sorted(family)
        for count in range(1, items + 1):
            chosen, _ = exactcover.cover(items, sets, count, deadline=float("inf"), steps=10**6)
            assert (chosen is not None) == _brute_cover(items, sets, count)
            if chosen is not None:
                found += 1
                assert len(chosen) == count
                assert sorted(item for si in chosen for item in sets[si]) == list(range(items))
    assert found > 20  # the families are not all without a cover


def test_a_packing_that_needs_rare_small_fills_is_covered() -> None:
    """Correlated requests in two resources at 150 pods (``packgen`` alike): a packing takes one
    exact set a node, and the cover that decides the rare set sizes first finds it within 100,000
    steps; every set is an exact fill, checked by summing."""
    inst = packgen.perfect(103, 150, 2, (3, 5), spread="alike")
    vecs = inst.vecs
    room = np.array([1000, 1000], dtype=np.int64)
    sets = exactcover.exact_sets(vecs, room, np.array([True, True]), float("inf"), 5)
    assert sets is not None
    chosen, _ = exactcover.cover(len(vecs), sets, inst.nodes, float("inf"), 100_000)
    assert chosen is not None and len(chosen) == inst.nodes
    assert sorted(p for c in chosen for p in sets[c]) == list(range(len(vecs)))
    for c in chosen:
        assert vecs[list(sets[c])].sum(axis=0).tolist() == room.tolist()


def test_exact_fills_are_every_small_set_filling_a_node_exactly() -> None:
    """Against brute force over every set of up to six pods: the listed sets are exactly those
    whose requests add up to the room in the exact resources and fit it in the others."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        vecs = rng.integers(0, 9, size=(12, 3)).astype(np.int64)
        room = np.array([12, 14, 30], dtype=np.int64)
        exact = np.array([True, True, False])
        listed = exactcover.exact_sets(vecs, room, exact, deadline=float("inf"))
        brute = [
            s
            for k in range(1, packing.tuning.COVER_MOST_PER_NODE + 1)
            for s in itertools.combinations(range(12), k)
            if np.array_equal(vecs[list(s)].sum(axis=0)[:2], room[:2]) and vecs[list(s), 2].sum() <= room[2]
        ]
        assert listed == sorted(brute)


def test_a_two_resource_perfect_packing_is_found() -> None:
    """Independent requests in two resources (60 pods, 3-5 a node): every pod
    placed, and the validator accepts the answer (``support.solve``)."""
    inst = packgen.perfect(100, 60, 2, (3, 5))
    outcome = solve(inst.cluster(), solver={"workers": 1, "deterministic": True, "timeLimit": 2, "seed": 0})
    assert outcome.result.metrics.placed == inst.pods


def _planted(rng: np.random.Generator, n: int, size: int, d: int) -> tuple[Any, Any]:
    """``n`` pods in ``d`` resources of a node of 100 each, the first ``size`` of them cut from
    the node (they fill it exactly), the rest random sizes; in shuffled order."""
    cuts = np.sort(rng.choice(np.arange(1, 100), (d, size - 1), replace=True), axis=1)
    fill = np.diff(np.concatenate([np.zeros((d, 1)), cuts, np.full((d, 1), 100)], axis=1), axis=1).T
    vecs = np.concatenate([fill, rng.integers(1, 30, size=(n - size, d))]).astype(np.int64)
    return vecs[rng.permutation(n)], np.full(d, 100, dtype=np.int64)


def test_sampled_fills_of_many_pods_are_exact_and_each_is_found() -> None:
    """Against brute force over every set of the size: the sampled sets are exact fills of it
    (never another set), and each exact fill turns up within a few trials (a trial keeps about
    two of a fill's splits into halves)."""
    rng = np.random.default_rng(11)
    for size in (5, 7, 8):
        vecs, room = _planted(rng, 18, size, 3)
        exact = np.ones(3, dtype=bool)
        pool = np.arange(18, dtype=np.intp)
        brute = {s for s in itertools.combinations(range(18), size) if np.array_equal(vecs[list(s)].sum(axis=0), room)}
        assert brute  # the planted fill at least
        found: set[tuple[int, ...]] = set()
        for seed in range(8):
            sets = largefills.sampled_sets(vecs, room, exact, pool, size, seed=seed, deadline=float("inf"))
            assert sets is not None
            assert set(sets) <= brute
            found.update(sets)
        assert found == brute


def test_fills_that_are_not_rare_are_not_sampled() -> None:
    """Forty pods of 1-3 units on a node of 14: hundreds of thousands of sets of seven fill it;
    sampling says so rather than listing them."""
    vecs = np.random.default_rng(3).integers(1, 4, size=(40, 1)).astype(np.int64)
    with pytest.raises(largefills.NotRareError):
        largefills.sampled_sets(
            vecs, np.array([14]), np.array([True]), np.arange(40, dtype=np.intp), 7, seed=0, deadline=float("inf")
        )


def test_a_perfect_packing_of_seven_to_ten_pods_a_node_is_found() -> None:
    """Small pods (7-10 a node, 100 pods, 5 resources):
    sets of up to six pods cannot cover it; sampled fills do. Every pod placed, and the validator
    accepts the answer (``support.solve``)."""
    inst = packgen.perfect(101, 100, 5, (7, 10))
    outcome = solve(inst.cluster(), solver={"workers": 1, "deterministic": True, "timeLimit": 2, "seed": 0})
    assert outcome.result.metrics.placed == inst.pods


def test_drawn_fills_pack_many_pods_a_node_in_two_exact_resources() -> None:
    """Small pods in two resources (7-10 a node, 100 pods): exact
    fills abound (too many to list) and a drawn packing finds one: every node's pods add up to
    its room exactly, checked here by summing, every pod on one node, no more nodes than given."""
    inst = packgen.perfect(100, 100, 2, (7, 10))
    vecs = inst.vecs.copy()
    room = np.array([1000, 1000], dtype=np.int64)
    exact = np.array([True, True])
    vecs = vecs[np.argsort(-vecs.sum(axis=1), kind="stable")]

    def tail(rows: Any, left: int) -> list[list[int]] | None:
        sets = exactcover.exact_sets(vecs[rows], room, exact, float("inf"), 10)
        assert sets is not None
        chosen, _ = exactcover.cover(len(rows), sets, left, float("inf"), 20_000)
        return None if chosen is None else [[int(rows[k]) for k in sets[c]] for c in chosen]

    slack = room * inst.nodes - vecs.sum(axis=0)
    assert not slack.any()
    bins, _ = fillsampler.fill_nodes(vecs, room, slack, inst.nodes, tail, deadline=float("inf"), steps=200_000)
    assert bins is not None and len(bins) <= inst.nodes
    assert sorted(p for b in bins for p in b) == list(range(len(vecs)))
    for b in bins:
        assert vecs[b].sum(axis=0).tolist() == room.tolist()


def test_a_perfect_packing_of_many_pods_a_node_in_two_resources_is_found() -> None:
    """The same class through the engine (deterministic): every pod placed, and the validator
    accepts the answer (``support.solve``); the listed and sampled sets alone leave pods out."""
    inst = packgen.perfect(101, 100, 2, (7, 10))
    outcome = solve(inst.cluster(), solver={"workers": 1, "deterministic": True, "timeLimit": 2, "seed": 0})
    assert outcome.result.metrics.placed == inst.pods


def test_drawn_fills_apply_only_where_one_table_tracks_every_exact_resource() -> None:
    """A draw ends exact in every exact resource only when one table tracks them all: one
    resource, or a pair small enough to share a table; three (or a pair too large) are left to
    the other searches."""
    vecs = np.array([[100, 200, 300], [900, 800, 700]], dtype=np.int64)
    room = np.array([1000, 1000, 1000], dtype=np.int64)
    assert fillsampler.applies(vecs, room, np.array([True, False, False]))
    assert fillsampler.applies(vecs, room, np.array([True, True, False]))
    assert not fillsampler.applies(vecs, room, np.array([True, True, True]))
    big = np.array([1_000_001, 1_000_003, 1000], dtype=np.int64)
    assert not fillsampler.applies(np.array([[1, 1, 1]], dtype=np.int64), big, np.array([True, True, False]))


@pytest.mark.parametrize("pods", [150, 200])
def test_a_perfect_packing_in_three_resources_with_many_solutions_is_found_by_the_search(pods: int) -> None:
    """Small pods in three resources (7-10 a node): fills of nine or ten pods are too many to
    list and a draw is exact in all three only by chance, so the node-by-node search must find the
    packing (every other attempt starts near the average pods a node). Every pod placed within
    50,000 steps (500,000 ticks), and the validator accepts the placements."""
    inst = packgen.perfect(102, pods, 3, (7, 10))
    c = inst.cluster()
    state, pending = _state(c)
    batch = build_batch(state, pending, CONFIG)
    nodes = completion.applies(batch)
    assert nodes is not None and len(nodes) == inst.nodes
    found, _ = completion.complete(batch, nodes, steps=50_000)
    assert found is not None
    placements = {
        p.key: batch.snapshot.nodes[int(n)].name
        for group, picked in zip(batch.groups, found, strict=True)
        for p, n in zip(group.pods, picked.tolist(), strict=True)
        if n >= 0
    }
    assert len(placements) == inst.pods
    assert validate_placements(c, placements) == []


def _triplets(rng: np.random.Generator, nodes: int, low: int, high: int) -> Any:
    """Three pods a node of 100 in three resources, each pod's requests in [low, high), cut so
    that the three fill the node exactly; shuffled. Narrow ranges make many spurious exact
    triples (three pods of different nodes that also fill one exactly)."""
    rows = []
    for _ in range(nodes):
        while True:
            a, b = rng.integers(low, high, 3), rng.integers(low, high, 3)
            c = 100 - a - b
            if (c >= low).all() and (c < high).all():
                break
        rows += [a, b, c]
    vecs = np.array(rows, dtype=np.int64)
    return vecs[rng.permutation(len(vecs))]


def test_a_cover_among_many_spurious_exact_triples_is_found_by_the_solver_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """83 nodes of three pods with hundreds of spurious exact triples (the public triplets' shape):
    the cover asked of CP-SAT first finds one on every draw within 2,000 steps, each set an exact
    fill; Algorithm X alone (the solver's share set to 0) needs more than that on some draw."""
    room = np.full(3, 100, dtype=np.int64)
    alone_short = 0
    for seed in range(6):
        vecs = _triplets(np.random.default_rng(seed), 83, 26, 42)
        sets = exactcover.exact_sets(vecs, room, np.ones(3, dtype=bool), float("inf"), 3)
        assert sets is not None and len(sets) > 2 * 83  # spurious triples beside the 83 planted
        chosen, used = exactcover.cover(len(vecs), sets, 83, float("inf"), 2_000)
        assert chosen is not None and len(chosen) == 83 and used <= 2_000
        assert sorted(p for c in chosen for p in sets[c]) == list(range(len(vecs)))
        for c in chosen:
            assert vecs[list(sets[c])].sum(axis=0).tolist() == room.tolist()
        with monkeypatch.context() as m:
            m.setattr(packing.tuning, "COVER_SOLVER_SHARE", 0.0)
            alone, _ = exactcover.cover(len(vecs), sets, 83, float("inf"), 2_000)
        alone_short += alone is None
    assert alone_short > 0


def test_the_solvers_cover_is_the_same_for_the_same_input() -> None:
    """Under a step budget the cover is deterministic (one worker, deterministic time)."""
    vecs = _triplets(np.random.default_rng(3), 83, 26, 42)
    sets = exactcover.exact_sets(vecs, np.full(3, 100, dtype=np.int64), np.ones(3, dtype=bool), float("inf"), 3)
    assert sets is not None
    first = exactcover.cover(len(vecs), sets, 83, float("inf"), 2_000)
    assert first[0] is not None and exactcover.cover(len(vecs), sets, 83, float("inf"), 2_000) == first
