"""The greedy pass keeps to its share of the decision's budget (issue 31, item 2).

Aspects: with a deterministic budget (node checks, so the same input stops at the same pod on
every machine) the pass stops when its share is spent and returns a valid partial answer: the
highest pods of its order placed, the others unplaced, every placement accepted by the
validator's hard rules; with room in the budget it is the unbudgeted pass exactly; the rule index
that makes topology questions cost one group's rules answers as the full scan did (same hints).
No timing here: speed is in the report's benchmark (``python -m benchmarks.greedy_budget``).
"""

from __future__ import annotations

import json
from typing import Any

from placer.engine import (
    DETERMINISTIC_UNITS_PER_SECOND,
    GREEDY_CHECKS_PER_SECOND,
    GREEDY_SHARE,
    Assignment,
    Batch,
    Budget,
    Scorer,
    batch_demand,
    build_batch,
    build_snapshot,
    greedy,
    select_candidates,
)
from placer.inputs import parse_cluster
from placer.models import Cluster, Config, SolverConfig
from placer.service import SolveOptions, pending_batch, solve_cluster
from placer.validate import hard_violations


def instance(pods: int, nodes: int, groups: int) -> dict[str, Any]:
    """Pods in ``groups`` label groups, each drawn to its group by zone and kept off the next group's
    nodes by required anti-affinity (every pair of groups is a rule), on nodes in five zones."""
    node_docs = [
        {"name": f"n{i}", "labels": {"zone": f"z{i % 5}", "host": f"n{i}"}, "allocatable": {"cpu": "64", "pods": 250}}
        for i in range(nodes)
    ]

    def term(group: int, key: str) -> dict[str, Any]:
        return {"labelSelector": {"matchLabels": {"grp": f"g{group}"}}, "topologyKey": key, "namespaceSelector": {}}

    pod_docs = [
        {
            "name": f"p{i:03d}",
            "namespace": f"ns{i % 3}",
            "schedulerName": "placer",
            "labels": {"grp": f"g{i % groups}"},
            "requests": {"cpu": "100m"},
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(i % groups, "zone")]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term((i + 1) % groups, "host")]},
            },
        }
        for i in range(pods)
    ]
    return {"nodes": node_docs, "pods": pod_docs}


CONFIG = Config(solver=SolverConfig(workers=1, deterministic=True, time_limit=5, seed=0))


def _setup(pods: int = 60, groups: int = 4) -> tuple[Cluster, Batch, Scorer]:
    c = parse_cluster("greedy.json", json.dumps(instance(pods, 10, groups)))
    pending, _ = pending_batch(c, CONFIG.scheduler_name)
    snap = build_snapshot(c.nodes, [p for p in c.pods if p.running], pending, c.namespaces)
    batch = build_batch(snap, pending, CONFIG)
    scorer = Scorer(snap, CONFIG, batch_demand(batch))
    select_candidates(batch, scorer, CONFIG.solver.candidates)
    return c, batch, scorer


def _placements(c: Cluster, batch: Batch, hint: Assignment) -> dict[str, str]:
    names = [n.name for n in c.nodes]
    return {
        pod.key: names[int(n)]
        for group, nodes in zip(batch.groups, hint, strict=True)
        for pod, n in zip(group.pods, nodes.tolist(), strict=True)
        if n >= 0
    }


def _budget_for(checks: float) -> Budget:
    """A deterministic budget whose greedy share is ``checks`` node checks."""
    seconds = checks / GREEDY_CHECKS_PER_SECOND / GREEDY_SHARE
    return Budget(seconds * DETERMINISTIC_UNITS_PER_SECOND, deterministic=True)


def test_a_spent_budget_stops_the_pass_with_a_valid_partial_answer() -> None:
    c, batch, scorer = _setup()
    whole = _placements(c, batch, greedy(batch, scorer))
    assert len(whole) == 60
    c, batch, scorer = _setup()
    part = _placements(c, batch, greedy(batch, scorer, budget=_budget_for(200)))
    assert 0 < len(part) < len(whole)
    assert hard_violations(c, part) == []


def test_the_same_budget_stops_at_the_same_pod() -> None:
    runs = []
    for _ in range(2):
        c, batch, scorer = _setup()
        runs.append(_placements(c, batch, greedy(batch, scorer, budget=_budget_for(500))))
    assert runs[0] == runs[1]


def test_with_room_in_the_budget_the_pass_is_the_unbudgeted_one() -> None:
    c, batch, scorer = _setup()
    free = _placements(c, batch, greedy(batch, scorer))
    c, batch, scorer = _setup()
    assert _placements(c, batch, greedy(batch, scorer, budget=Budget.of(CONFIG))) == free


def test_a_decision_whose_greedy_pass_is_cut_short_is_still_valid() -> None:
    """A tiny deterministic limit: the levels place what the greedy pass did not reach, or keep
    its partial answer; either way the validator accepts it."""
    c = parse_cluster("greedy.json", json.dumps(instance(120, 10, 6)))
    config = Config(solver=SolverConfig(workers=1, deterministic=True, time_limit=0.01, seed=0))
    result = solve_cluster(c, SolveOptions(config=config, evict=False)).result
    placements = {p.pod: p.node for p in result.placements if p.pod}
    assert hard_violations(c, placements) == []
    assert result.status in ("optimal", "feasible", "fallback")


def test_the_rule_index_answers_as_the_full_scan_did() -> None:
    """Pairwise anti-affinity between all groups: every group's pods land where the validator's
    own topology rules accept them (the greedy hint is valid), on a few shapes."""
    for pods, groups in ((40, 40), (60, 3), (30, 1)):
        c = parse_cluster("greedy.json", json.dumps(instance(pods, 8, groups)))
        pending, _ = pending_batch(c, CONFIG.scheduler_name)
        snap = build_snapshot(c.nodes, [], pending, c.namespaces)
        batch = build_batch(snap, pending, CONFIG)
        scorer = Scorer(snap, CONFIG, batch_demand(batch))
        select_candidates(batch, scorer, CONFIG.solver.candidates)
        placed = _placements(c, batch, greedy(batch, scorer))
        assert hard_violations(c, placed) == [], (pods, groups)
