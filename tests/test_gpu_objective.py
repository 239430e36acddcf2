"""GPU placement against fragmentation (``objectives.fragmentation``) and the guard that holds a
batch with extended resources to kube-scheduler's pods and GPUs (``engine.extended``).

Aspects: the expected fragment of a node for a workload, shape by shape (model, room on every
resource, whole devices, fractions); the workload read from running pods; which decisions score
with it; placements it changes against balance (whole nodes kept for big pods, fractions
paired, GPU pods packed away from the model bound pods need, pods without GPUs kept off GPU
nodes), every one through the validator (``support.solve``); batches of a run that leave room
for whole-node pods where kube-scheduler's spreading does not; the guard's rule, case by case.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import cluster, node, pod, solve, where

from placer.engine import (
    GPU,
    GPU_MILLI,
    PRODUCT,
    STRATEGIES,
    Fragmentation,
    Scorer,
    Shape,
    Workload,
    build_batch,
    build_snapshot,
    decision_strategy,
    encode,
    extended_allocated,
    extended_requests,
    fragment,
    held_to_other,
    select_candidates,
    solve_batch,
)
from placer.models import Config, StrategyName
from placer.validate import hard_violations


def gpu_node(name: str, gpus: int = 8, model: str = "A100", cpu: str = "64") -> dict[str, Any]:
    return node(
        name,
        cpu=cpu,
        memory="512Gi",
        labels={PRODUCT: model},
        allocatable={GPU: gpus, GPU_MILLI: 1000 * gpus},
    )


def gpu_pod(name: str, milli: int, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    requests: dict[str, Any] = {GPU_MILLI: milli}
    if milli >= 1000:
        requests[GPU] = milli // 1000
    return pod(name, cpu=cpu, requests=requests, **extra)


def _free(milli: float, gpu: float | None = None, cpu: float = 1e9, memory: float = 1e12, pods: float = 110) -> Any:
    whole = milli // 1000 if gpu is None else gpu
    return {
        k: np.array([v], dtype=np.float64)
        for k, v in zip(("milli", "gpu", "cpu", "memory", "pods"), (milli, whole, cpu, memory, pods), strict=True)
    }


def shape(milli: int, share: float = 1.0, models: set[str] | None = None, cpu: int = 0) -> Shape:
    return Shape(milli, milli >= 1000, frozenset(models) if models else None, cpu, 0, share)


@pytest.mark.parametrize(
    ("free", "model", "shapes", "expected"),
    [
        # one whole GPU per pod: half a GPU left over on a node whose fractions took 0.5
        (_free(7500, gpu=8), "A100", [shape(1000)], 500),
        # fractions of 300: what is left beyond three of them
        (_free(1000), "A100", [shape(300)], 100),
        # an 8-GPU pod cannot use 4 free GPUs at all
        (_free(4000), "A100", [shape(8000)], 4000),
        # a pod bound to another model cannot use this node
        (_free(2000), "T4", [shape(1000, models={"A100"})], 2000),
        (_free(2000), "A100", [shape(1000, models={"A100", "V100"})], 0),
        # cpu for one more pod only: the other 3 GPUs are stranded
        (_free(4000, cpu=8000), "A100", [shape(1000, cpu=8000)], 3000),
        # no pod slot left: every free GPU is stranded
        (_free(4000, pods=0), "A100", [shape(1000)], 4000),
        # whole devices limit whole-GPU pods even with milli-GPU left
        (_free(3000, gpu=1), "A100", [shape(1000)], 2000),
        # shares weigh the shapes
        (_free(4000), "A100", [shape(1000, 0.5), shape(8000, 0.5)], 2000),
        # a node without GPUs strands nothing
        (_free(0), None, [shape(1000)], 0),
    ],
)
def test_fragment_per_shape(free: Any, model: str | None, shapes: list[Shape], expected: float) -> None:
    workload = Workload(tuple(shapes))
    assert fragment(free, workload.allowed([model]), workload)[0] == pytest.approx(expected)


def test_scarce_models_weigh_more() -> None:
    """A shape bound to a model with a quarter of the GPUs weighs four times its share."""
    workload = Workload((shape(1000, 0.5, models={"T4"}), shape(1000, 0.5)))
    free = _free(2000)
    free = {k: np.repeat(v, 2) for k, v in free.items()}
    allowed = workload.allowed(["A100", "T4"])
    assert fragment(free, allowed, workload).tolist() == pytest.approx([1000, 0])
    assert fragment(free, allowed, workload, np.array([4.0, 1.0])).tolist() == pytest.approx([4000, 0])
    nodes = [gpu_node("a1"), gpu_node("a2"), gpu_node("a3"), gpu_node("t1", model="T4")]
    scorer = _scorer(nodes, [gpu_pod("bound", 1000, node="t1", nodeSelector={PRODUCT: "T4"}), gpu_pod("p", 500)])
    assert isinstance(scorer.strategy, Fragmentation)
    assert scorer.strategy.scarcity.tolist() == pytest.approx([4.0])


def test_workload_reads_running_gpu_pods() -> None:
    c = cluster(
        [gpu_node("g1"), gpu_node("g2", model="T4")],
        [
            gpu_pod("a", 500, node="g1", nodeSelector={PRODUCT: "A100"}),
            gpu_pod("b", 500, node="g1", nodeSelector={PRODUCT: "A100"}),
            gpu_pod(
                "c",
                2000,
                cpu="8",
                node="g2",
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": ["T4", "A100"]}]}
                            ]
                        }
                    }
                },
            ),
            gpu_pod("d", 1000, node="g2"),
            pod("cpu-only", node="g2"),
        ],
    )
    shapes = {(s.milli, s.whole, s.models): s for s in Workload.of([p for p in c.pods if p.running]).shapes}
    assert set(shapes) == {
        (500, False, frozenset({"A100"})),
        (2000, True, frozenset({"T4", "A100"})),
        (1000, True, None),
    }
    assert shapes[500, False, frozenset({"A100"})].share == pytest.approx(0.5)
    assert shapes[2000, True, frozenset({"T4", "A100"})].cpu == 8000
    assert Workload.of([]).shapes == (Shape(1000, True, None, 0, 0, 1.0),)


def _scorer(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], strategy: str = "balance") -> Scorer:
    c = cluster(nodes, pods)
    config = Config.model_validate({"strategy": strategy})
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [p for p in c.pods if p.running], pending, c.namespaces)
    batch = build_batch(snap, pending, config)
    demand = sum((g.vec * g.size for g in batch.groups), np.zeros(len(snap.resources), dtype=np.int64))
    return Scorer(snap, config, demand)


@pytest.mark.parametrize(
    ("nodes", "pods", "strategy", "gpu_aware"),
    [
        ([node("a"), node("b")], [pod("p")], "balance", False),  # no GPUs anywhere
        ([gpu_node("g"), node("b")], [pod("p")], "balance", False),  # GPU nodes, nobody asks for GPUs
        ([gpu_node("g"), node("b")], [gpu_pod("p", 500)], "balance", True),
        ([gpu_node("g"), node("b")], [gpu_pod("r", 1000, node="g"), pod("p")], "balance", True),
        ([gpu_node("g"), node("b")], [gpu_pod("p", 500)], "spread", True),
        ([gpu_node("g"), node("b")], [gpu_pod("p", 500)], "pack", False),  # pack fills nodes already
    ],
)
def test_which_decisions_score_fragmentation(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], strategy: str, gpu_aware: bool
) -> None:
    scorer = _scorer(nodes, pods, strategy)
    assert isinstance(scorer.strategy, Fragmentation) == gpu_aware
    assert scorer.strategy.name == StrategyName(strategy)
    # the registry decides the same from the snapshot alone
    same = decision_strategy(strategy, scorer.snapshot, np.zeros(len(scorer.snapshot.resources), dtype=np.int64))
    assert isinstance(same, Fragmentation) == any(p.get("node") for p in pods if GPU_MILLI in p["requests"])


def test_cp_sat_holds_gpu_nodes_where_the_float_cost_left_them() -> None:
    """The CP-SAT term is the wrapped strategy's, with each touched GPU node's load held at the
    answer so far: one held expression per resource the batch's pods ask for, on each GPU node,
    none on the node without GPUs."""
    c = cluster(
        [gpu_node("g1"), gpu_node("g2"), node("c1", cpu="8", memory="64Gi")],
        [gpu_pod("one", 1000, node="g1"), gpu_pod("new", 500), pod("cpu", cpu="1")],
    )
    config = Config.model_validate({"solver": {"workers": 1}})
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [p for p in c.pods if p.running], pending, c.namespaces)
    batch = build_batch(snap, pending, config)
    demand = sum((g.vec * g.size for g in batch.groups), np.zeros(len(snap.resources), dtype=np.int64))
    scorer = Scorer(snap, config, demand)
    select_candidates(batch, scorer, config.solver.candidates)
    model, _ = encode(batch, scorer)
    term = scorer.strategy.term(model)
    plain = STRATEGIES[StrategyName.BALANCE].term(model)
    asked = {r for g in batch.groups for r, v in zip(snap.resources, g.vec.tolist(), strict=True) if v}
    assert GPU_MILLI in asked and GPU not in asked
    assert len(term.fixed) == len(plain.fixed) + 2 * len(asked)  # g1 and g2, not c1
    assert term.unit == plain.unit and term.maximize is False


# Placements the objective decides, each against what balance alone would do (named in the comment).
CASES = {
    # Balance takes the empty node; a 4-GPU pod there strands it for the 8-GPU pods that run.
    "whole node kept for big pods": (
        [gpu_node("g1"), gpu_node("g2"), gpu_node("g3")],
        [gpu_pod("big", 8000, node="g3"), gpu_pod("four", 4000, node="g1"), gpu_pod("new", 4000)],
        {"new": "g1"},
    ),
    # Balance takes the empty node; half a GPU beside the running half leaves whole GPUs.
    "fractions paired": (
        [gpu_node("g1"), gpu_node("g2"), gpu_node("g3")],
        [gpu_pod("half", 500, node="g1"), gpu_pod("one", 1000, node="g3"), gpu_pod("new", 500)],
        {"new": "g1"},
    ),
    # The running pods need A100s: an unbound pod goes to the T4 (listed last: ties go to A100).
    "packed by model": (
        [gpu_node("a1", 4), gpu_node("a2", 4), gpu_node("t1", 4, model="T4")],
        [
            gpu_pod("bound-1", 1000, node="a1", nodeSelector={PRODUCT: "A100"}),
            gpu_pod("bound-2", 1000, node="a1", nodeSelector={PRODUCT: "A100"}),
            gpu_pod("new", 1000),
        ],
        {"new": "t1"},
    ),
    # Balance takes the emptier GPU node for the cpu pod; its cpu is kept for GPU pods.
    "pods without GPUs off GPU nodes": (
        [gpu_node("g1", cpu="64"), node("c1", cpu="8", memory="64Gi")],
        [pod("load", cpu="4", node="c1"), gpu_pod("one", 1000, node="g1"), pod("new", cpu="1")],
        {"new": "c1"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_placements_against_fragmentation(case: str) -> None:
    nodes, pods, expected = CASES[case]
    placed = where(solve(cluster(nodes, pods)))
    assert {k: placed[k] for k in expected} == expected


def test_batches_keep_whole_nodes_for_big_pods() -> None:
    """Fractions then 8-GPU pods, in batches: kube-scheduler spreads the fractions over every
    node and places no 8-GPU pod; placer pairs them on one node and places two."""
    nodes = [gpu_node(f"g{i}") for i in range(3)]
    pods = [gpu_pod(f"a-frac-{i}", 500, creationTimestamp="2025-01-01T00:00:00Z") for i in range(4)]
    pods += [gpu_pod(f"b-big-{i}", 8000, creationTimestamp="2025-01-01T00:01:00Z") for i in range(3)]
    c = cluster(nodes, pods)
    ours, theirs = solve(c, batch_size=4), solve(c, policy="default", batch_size=4)

    def gpus(outcome: Any) -> int:
        milli = {p.key: p.requests.get(GPU_MILLI, 0) for p in c.pods}
        return sum(milli[p.pod] for p in outcome.result.placements if p.pod)

    assert len(ours.result.placements) == 6 and gpus(ours) == 18_000
    assert len(theirs.result.placements) < len(ours.result.placements) and gpus(theirs) < gpus(ours)


def _batch(pods: list[dict[str, Any]]) -> Any:
    c = cluster([gpu_node("g1"), gpu_node("g2")], pods)
    config = Config()
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    return build_batch(snap, pending, config)


@pytest.mark.parametrize(
    ("mine", "other", "kept"),
    [
        ({"frac": 2}, {"frac": 2}, True),  # the same
        ({"frac": 2, "one": 1}, {"frac": 2}, True),  # more pods, more GPUs
        ({"frac": 2}, {"one": 2}, False),  # as many pods, fewer GPUs
        ({"frac": 3}, {"one": 2}, True),  # more pods, fewer GPUs: pods come first
        ({"one": 2}, {"frac": 3}, False),  # more GPUs, fewer pods
        ({"one": 1}, {"frac": 1}, True),  # as many pods, more GPUs
        ({"frac": 1}, {}, True),  # the other answer places nothing
        ({"one": 1, "frac": 1}, {"frac": 2}, True),
    ],
)
def test_guard_holds_pods_and_gpus(mine: dict[str, int], other: dict[str, int], kept: bool) -> None:
    batch = _batch([gpu_pod(f"frac-{i}", 300) for i in range(3)] + [gpu_pod(f"one-{i}", 1000) for i in range(2)])
    index = {("frac" if g.vec[batch.snapshot.column(GPU)] == 0 else "one"): gi for gi, g in enumerate(batch.groups)}

    def counts(spec: dict[str, int]) -> dict[tuple[int, int], int]:
        return {(index[k], 0): c for k, c in spec.items()}

    resources = extended_requests(batch)
    assert set(resources) == {GPU, GPU_MILLI}
    assert extended_allocated(batch, counts({"frac": 3, "one": 1}), resources) == {GPU_MILLI: 1900}
    answer, changed = held_to_other(batch, counts(mine), counts(other), resources)
    assert answer == (counts(mine) if kept else counts(other))
    assert changed == (not kept)


def test_solve_batch_never_trades_a_pod_for_the_other_answers_gpus() -> None:
    """Given another answer (kube-scheduler's in ``service.decide``) that allocates more GPUs with
    fewer pods, a batch keeps its pods (README "Objective": pods per key come first); the guard only takes
    the other answer when it places at least as many pods."""
    c = cluster([gpu_node("g1", 2)], [gpu_pod("frac", 500), gpu_pod("one", 1000), gpu_pod("two", 2000)])
    config = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 2}})
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    by_name = {p.name: p for p in pending}
    alone = solve_batch(snap, pending, config)
    guarded = solve_batch(snap, pending, config, alternative=lambda: [(by_name["two"], 0)], no_worse=True)
    for res in (alone, guarded):
        assert hard_violations(c, {p.key: "g1" for p, _ in res.placements}) == []
    # Alone, the placed level takes two pods (1.5 GPUs); the other answer's one pod of 2 GPUs
    # places fewer, so the batch keeps its two.
    assert {p.name for p, _ in alone.placements} == {"frac", "one"}
    assert {p.name for p, _ in guarded.placements} == {"frac", "one"}
    # An other answer that places nothing changes nothing either.
    empty = solve_batch(snap, pending, config, alternative=lambda: [], no_worse=True)
    assert {p.name for p, _ in empty.placements} == {"frac", "one"}
