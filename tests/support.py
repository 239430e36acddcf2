"""Shared test support: build native-schema clusters, solve them, validate every answer.

Every placement the engine returns in a test goes through ``placer.validate`` (which shares no
code with the engine) before the test looks at it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from placer.engine import Scorer, Snapshot, build_batch, greedy, select_candidates
from placer.inputs import parse_cluster
from placer.models import Cluster, Config, Pod
from placer.service import Outcome, SolveOptions, solve_cluster
from placer.validate import hard_violations, validate_placements, validate_plan

DETERMINISTIC = {"solver": {"workers": 1, "deterministic": True, "timeLimit": 5, "seed": 0}}


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110, **extra: Any) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": pods}
    alloc.update(extra.pop("allocatable", {}))
    return {"name": name, "allocatable": alloc, **extra}


def pod(name: str, cpu: str = "1", memory: str = "1Gi", **extra: Any) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    requests.update(extra.pop("requests", {}))
    return {"name": name, "requests": requests, **extra}


def cluster(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], **extra: Any) -> Cluster:
    return parse_cluster("test.json", json.dumps({"nodes": nodes, "pods": pods, **extra}))


def solve(c: Cluster, *, policy: str = "placer", batch_size: int | None = None, **config: Any) -> Outcome:
    cfg = Config.model_validate({**DETERMINISTIC, **config})
    outcome = solve_cluster(c, SolveOptions(policy=policy, batch_size=batch_size, config=cfg))  # type: ignore[arg-type]
    return validated(c, outcome, cfg, policy)


def validated(c: Cluster, outcome: Outcome, cfg: Config, policy: str) -> Outcome:
    """``outcome`` after the independent validator found nothing wrong with it."""
    placements = {p.pod: p.node for p in outcome.result.placements if p.pod}
    evicted = {e.pod for e in outcome.result.evictions}
    if evicted and policy == "placer":
        # A global plan: its evictions free room, so placements alone would look over capacity.
        violations = validate_plan(
            c, outcome.result, restart_tiers=cfg.priority.restart_tiers, scheduler_name=cfg.scheduler_name
        )
    elif evicted:
        # kube-scheduler's DefaultPreemption (no steps): feasible once its victims are gone.
        survivors = c.model_copy(update={"pods": tuple(p for p in c.pods if p.key not in evicted)})
        violations = hard_violations(survivors, placements)
    else:
        violations = validate_placements(c, placements, restart_tiers=cfg.priority.restart_tiers)
    assert violations == [], violations
    return outcome


def where(outcome: Outcome) -> dict[str, str]:
    """Pod name (without namespace) -> node."""
    return {p.pod.split("/", 1)[1]: p.node for p in outcome.result.placements if p.pod}


def unplaced(outcome: Outcome) -> dict[str, str]:
    """Pod name -> unplaced code."""
    return {u.pod.split("/", 1)[1]: u.code for u in outcome.result.unplaced}


def greedy_answer(c: Cluster, snap: Snapshot, pending: list[Pod], config: Config, **validate: Any) -> list[list[int]]:
    """The greedy pass's answer for ``pending`` on ``snap`` (each group's node per pod, -1: left
    out), after the validator found nothing wrong with its placements (``validate``: its options)."""
    batch = build_batch(snap, pending, config)
    demand = sum((g.vec * g.size for g in batch.groups), np.zeros(len(snap.resources), dtype=np.int64))
    scorer = Scorer(snap, config, demand)
    select_candidates(batch, scorer, config.solver.candidates)
    result = greedy(batch, scorer)
    names = {
        p.key: snap.nodes[int(n)].name
        for g, ns in zip(batch.groups, result, strict=True)
        for p, n in zip(g.pods, ns, strict=True)
        if n >= 0
    }
    assert validate_placements(c, names, **validate) == []
    return [nodes.tolist() for nodes in result]
