"""The strategy objectives: one definition, consistent in every form.

Aspects: the float cost of ``balance`` and ``spread`` equals the load terms ``placer.metrics``
computes independently from plain maps; the integer CP-SAT term equals the float cost times its
unit within the rounding it documents, so it never ranks two answers against the float cost
beyond that error (balance, spread, pack, with up to five balance resources); a fifth balance
resource configured from here is used end to end by ``placer solve``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from builders import property_settings
from hypothesis import given
from hypothesis import strategies as st
from ortools.sat.python import cp_model
from support import cluster, node, pod, solve, where

from placer.engine import (
    SCALE,
    STRATEGIES,
    Scorer,
    build_batch,
    build_snapshot,
    encode,
    evaluate,
    pod_vector,
    select_candidates,
)
from placer.metrics import load_terms
from placer.models import Config, StrategyName

GPU = "example.com/gpu"
FIVE = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth", GPU)
UNITS = {"cpu": "", "memory": "Mi", "ephemeral-storage": "Mi", "placer.io/bandwidth": "", GPU: ""}


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Small clusters over up to five balance resources: nodes lacking some of them, running
    pods, and pending pods that all fit somewhere."""
    nodes, pods = [], []
    for i in range(draw(st.integers(1, 5))):
        alloc = {r: f"{draw(st.integers(8, 64))}{UNITS[r]}" for r in FIVE if r == "cpu" or draw(st.booleans())}
        nodes.append({"name": f"n{i}", "allocatable": {**alloc, "pods": 110}})
        for j in range(draw(st.integers(0, 2))):
            req = {r: f"{draw(st.integers(0, 3))}{UNITS[r]}" for r in alloc}
            pods.append({"name": f"run-{i}-{j}", "node": f"n{i}", "requests": req})
    for j in range(draw(st.integers(1, 7))):
        req = {r: f"{draw(st.integers(0, 3))}{UNITS[r]}" for r in FIVE if draw(st.booleans())}
        pods.append({"name": f"new-{j}", "requests": req})
    return nodes, pods


def _config(strategy: str, **balance: Any) -> Config:
    return Config.model_validate(
        {"strategy": strategy, "balance": {"resources": list(FIVE), **balance}, "solver": {"workers": 1}}
    )


def _prepared(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], config: Config) -> Any:
    c = cluster(nodes, pods)
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [p for p in c.pods if p.running], pending, c.namespaces)
    batch = build_batch(snap, pending, config)
    demand = sum((g.vec * g.size for g in batch.groups), np.zeros(len(snap.resources), dtype=np.int64))
    return snap, batch, Scorer(snap, config, demand)


def _random_answer(batch: Any, rng: np.random.Generator) -> dict[tuple[int, int], int]:
    """Each pending pod on a random feasible node with room left, or unplaced."""
    used = batch.snapshot.used.copy()
    counts: dict[tuple[int, int], int] = {}
    for gi, group in enumerate(batch.groups):
        for _ in range(group.size):
            room = [n for n in group.candidates.tolist() if np.all(used[n] + group.vec <= batch.snapshot.alloc[n])]
            if not room or rng.random() < 0.1:
                continue
            n = int(rng.choice(room))
            used[n] += group.vec
            counts[gi, n] = counts.get((gi, n), 0) + 1
    return counts


@property_settings("PLACER_OBJECTIVE_EXAMPLES", 40)
@given(instances(), st.integers(0, 2**16))
def test_the_float_cost_of_balance_and_spread_is_what_metrics_reports(inst: Any, seed: int) -> None:
    nodes, pods = inst
    config = _config("balance", intraNode=0.7, interNode=1.3)
    snap, batch, scorer = _prepared(nodes, pods, config)
    used = snap.used.copy()
    counts = _random_answer(batch, np.random.default_rng(seed))
    for (gi, n), c in counts.items():
        used[n] += batch.groups[gi].vec * c
    everywhere = np.arange(len(snap.nodes), dtype=np.int64)
    maps = [dict(zip(snap.resources, row.tolist(), strict=True)) for row in used]
    alloc = [dict(zip(snap.resources, row.tolist(), strict=True)) for row in snap.alloc]
    present = [r for r in FIVE if r in snap.resources and snap.alloc[:, snap.column(r)].sum() > 0]
    before = snap.used.sum(axis=0)
    total = snap.alloc.sum(axis=0)
    demand = sum((pod_vector(p, snap.resources) for g in batch.groups for p in g.pods), np.zeros_like(before))
    cols = [snap.column(r) for r in present]
    target = float(np.mean([(before[c] + demand[c]) / total[c] for c in cols]))
    assert abs(scorer.target - target) < 1e-12
    skews, distances = load_terms(alloc, maps, present, target)

    balance = STRATEGIES[StrategyName.BALANCE].node_cost(scorer, used, everywhere)
    expected = [0.7 * s + 1.3 * d for s, d in zip(skews, distances, strict=True)]
    assert np.allclose(balance, expected, atol=1e-9)
    spread = STRATEGIES[StrategyName.SPREAD].node_cost(scorer, used, everywhere)
    assert np.allclose(spread, distances, atol=1e-9)


def _integer_value(batch: Any, scorer: Scorer, counts: dict[tuple[int, int], int]) -> tuple[float, float, Any]:
    """(integer strategy term / unit, float cost, touched nodes) of one answer of the engine model."""
    model, symmetry = encode(batch, scorer)
    counts = symmetry.order(counts)  # identical nodes are ordered by the model
    for key, var in model.y.items():
        model.cp.add(var == counts.get(key, 0))
    term = scorer.strategy.term(model)
    model.cp.minimize(term.expr)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10
    assert solver.solve(model.cp) == cp_model.OPTIMAL
    used = batch.snapshot.used.copy()
    for (gi, n), c in counts.items():
        used[n] += batch.groups[gi].vec * c
    placed = [(batch.groups[gi].vec, n, c) for (gi, n), c in counts.items()]
    cost = scorer.strategy.cost(scorer, used, model.touched, placed)
    return solver.objective_value / term.unit, cost, model.touched


def _rounding_error(batch: Any, counts: dict[tuple[int, int], int], touched: Any, config: Config) -> float:
    """What rounding utilisations to basis points can move the cost: per node and resource, half a
    basis point for the base load and for each pod there, amplified 2k+1 times by the L1 terms."""
    pods_on = {n: 0 for n in touched.tolist()}
    for (_, n), c in counts.items():
        pods_on[n] = pods_on.get(n, 0) + c
    weight = max(config.balance.intra_node, config.balance.inter_node, 1.0)
    k = len(FIVE)
    per_node = sum((2 * k + 1) * 0.5 * (1 + pods) + 0.5 for pods in pods_on.values())
    return weight * per_node / SCALE + sum(counts.values()) / SCALE


@property_settings("PLACER_OBJECTIVE_EXAMPLES", 25)
@given(instances(), st.sampled_from(list(StrategyName)), st.integers(0, 2**16))
def test_the_integer_term_ranks_answers_as_the_float_cost_does(inst: Any, name: StrategyName, seed: int) -> None:
    nodes, pods = inst
    config = _config(name)
    _, batch, scorer = _prepared(nodes, pods, config)
    select_candidates(batch, scorer, config.solver.candidates)
    rng = np.random.default_rng(seed)
    a, b = _random_answer(batch, rng), _random_answer(batch, rng)
    int_a, float_a, touched_a = _integer_value(batch, scorer, a)
    int_b, float_b, touched_b = _integer_value(batch, scorer, b)
    err_a = _rounding_error(batch, a, touched_a, config)
    err_b = _rounding_error(batch, b, touched_b, config)
    assert abs(int_a - float_a) <= err_a, (int_a, float_a, err_a)
    assert abs(int_b - float_b) <= err_b, (int_b, float_b, err_b)
    if float_a > float_b + err_a + err_b:
        assert int_a > int_b
    if float_b > float_a + err_a + err_b:
        assert int_b > int_a


@property_settings("PLACER_OBJECTIVE_EXAMPLES", 25)
@given(instances(), st.sampled_from(list(StrategyName)), st.integers(0, 2**16))
def test_the_answer_so_far_decides_every_variable_a_strategy_adds(inst: Any, name: StrategyName, seed: int) -> None:
    """A level starts from the whole answer so far (the solver loop completes the hint with the
    term's own variables): given the placements, each added variable gets the value that
    minimises the term, so the term's value there is what CP-SAT finds with the placements fixed."""
    nodes, pods = inst
    config = _config(name)
    _, batch, scorer = _prepared(nodes, pods, config)
    select_candidates(batch, scorer, config.solver.candidates)
    model, symmetry = encode(batch, scorer)
    counts = symmetry.order(_random_answer(batch, np.random.default_rng(seed)))
    values = {var.index: counts.get(key, 0) for key, var in model.y.items()}
    term = scorer.strategy.term(model)
    for aux in term.aux:
        value = aux.value(values)
        assert value is not None
        values[aux.var.index] = value
    completed = evaluate(term.expr, values)
    assert completed is not None
    for key, var in model.y.items():
        model.cp.add(var == counts.get(key, 0))
    model.cp.minimize(term.expr)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(model.cp) == cp_model.OPTIMAL
    assert round(solver.objective_value) == completed


@property_settings("PLACER_OBJECTIVE_EXAMPLES", 25)
@given(instances(), st.sampled_from(list(StrategyName)), st.integers(0, 2**16))
def test_an_answers_cost_adds_each_pods_own_cost(inst: Any, name: StrategyName, seed: int) -> None:
    """``cost`` scores every placed pod in one row-wise call: the same as one call per pod."""
    nodes, pods = inst
    config = _config(name)
    snap, batch, scorer = _prepared(nodes, pods, config)
    counts = _random_answer(batch, np.random.default_rng(seed))
    used = snap.used.copy()
    for (gi, n), c in counts.items():
        used[n] += batch.groups[gi].vec * c
    everywhere = np.arange(len(snap.nodes), dtype=np.int64)
    strategy = STRATEGIES[name]
    one_by_one = float(strategy.node_cost(scorer, used[everywhere], everywhere).sum())
    for (gi, n), c in counts.items():
        one_by_one += c * float(strategy.pod_cost(scorer, batch.groups[gi].vec, np.array([n]))[0])
    placed = [(batch.groups[gi].vec, n, c) for (gi, n), c in counts.items()]
    assert abs(strategy.cost(scorer, used, everywhere, placed) - one_by_one) < 1e-9


def test_a_fifth_balance_resource_configured_here_is_balanced_end_to_end() -> None:
    """Two nodes equal in the four default resources; one already has most of its GPUs in use.
    With the GPU registered as a fifth balance resource, the GPU pods go to the other node."""
    nodes = [
        node("a", cpu="16", memory="32Gi", allocatable={GPU: 8, "ephemeral-storage": "100Gi"}),
        node("b", cpu="16", memory="32Gi", allocatable={GPU: 8, "ephemeral-storage": "100Gi"}),
    ]
    pods = [
        pod("busy", cpu="4", memory="8Gi", node="a", requests={GPU: 6}),
        pod("busy-twin", cpu="4", memory="8Gi", node="b", requests={GPU: 0}),
        pod("train-1", cpu="1", memory="2Gi", requests={GPU: 1}),
        pod("train-2", cpu="1", memory="2Gi", requests={GPU: 1}),
    ]
    resources = ["cpu", "memory", "ephemeral-storage", "placer.io/bandwidth", GPU]
    out = solve(cluster(nodes, pods), balance={"resources": resources})
    assert where(out)["train-1"] == "b"
    assert where(out)["train-2"] == "b"
    # The integer objective agrees with the float cost with k = 4 and 5 resources per node mixed.
    config = Config.model_validate({"balance": {"resources": resources}})
    _, batch, scorer = _prepared([*nodes, node("c", cpu="16", memory="32Gi")], pods, config)
    select_candidates(batch, scorer, config.solver.candidates)
    counts = _random_answer(batch, np.random.default_rng(0))
    as_int, as_float, touched = _integer_value(batch, scorer, counts)
    assert abs(as_int - as_float) <= _rounding_error(batch, counts, touched, config)
    assert GPU in scorer.names
