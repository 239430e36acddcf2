"""``placer explain NS/POD cluster.json``: one pod's whole story in one answer.

Which filters turned nodes away (kube-scheduler's order, on the cluster as it was before the
batch), the nodes left with room and what placing the pod there costs under the strategy (lower
is better), and what the solve decided: its node, or why it stays pending, and the evictions made
for it. Pure: the solve is ``service.solve_cluster``'s, the same as ``placer solve``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from placer.engine import Prefilter, Scorer, fits, pod_vector
from placer.models import SCHEMA_VERSION, Cluster, Eviction, Reason
from placer.service import SolveOptions, solve_cluster

__all__ = ["Candidate", "Explanation", "explain_document", "explain_pod", "explain_schema"]

SHOWN = 10  # candidate nodes listed (the cheapest), plus the chosen one


@dataclass(frozen=True)
class Candidate:
    node: str
    cost: float  # the strategy's cost of placing the pod there alone (lower is better)
    free_after: dict[str, float]  # per resource, the share of the node left free after it, 0..1
    chosen: bool


@dataclass
class Explanation:
    pod: str
    in_batch: bool  # pending and addressed to the scheduler (else: why not, in ``note``)
    note: str
    filters: Reason | None = None  # what turned nodes away before the batch
    candidates: list[Candidate] = field(default_factory=list)
    feasible: int = 0  # nodes with room that every filter allows
    node: str | None = None  # where the solve put it
    unplaced_code: str | None = None
    unplaced_reason: str | None = None
    evictions: list[Eviction] = field(default_factory=list)  # made for it


def explain_pod(cluster: Cluster, options: SolveOptions, key: str) -> Explanation | None:
    """The story of pod ``key`` (namespace/name) in a solve of ``cluster``; None if no such pod."""
    pod = next((p for p in cluster.pods if p.key == key), None)
    if pod is None:
        return None
    scheduler = options.config.scheduler_name
    if not pod.awaits(scheduler):
        why = (
            f"bound to {pod.node_name} (phase {pod.phase})"
            if pod.node_name is not None
            else "being deleted"
            if pod.terminating
            else f"waiting on scheduling gates {', '.join(pod.scheduling_gates)}"
            if pod.scheduling_gates
            else f"addressed to scheduler {pod.scheduler_name!r}, not {scheduler!r} (--scheduler-name)"
        )
        return Explanation(pod=key, in_batch=False, note=f"not part of the batch: {why}")
    outcome = solve_cluster(cluster, options)
    before = outcome.before
    prefilter = Prefilter(before)
    vec = pod_vector(pod, before.resources)
    ok = np.flatnonzero(prefilter.masks(pod).allowed & fits(before, vec))
    scorer = Scorer(before, options.config, vec)
    costs = scorer.delta(vec, ok.astype(np.int64), before.used) if len(ok) else np.zeros(0)
    result = outcome.result
    node = next((p.node for p in result.placements if p.pod == key), None)
    order = [int(i) for i in np.argsort(costs, kind="stable")[:SHOWN]]
    names = [n.name for n in before.nodes]
    if node is not None and node in names and names.index(node) in ok.tolist():
        chosen = ok.tolist().index(names.index(node))
        if chosen not in order:
            order.append(chosen)
    candidates = []
    for i in order:
        n = int(ok[i])
        alloc = before.alloc[n]
        left = (before.free[n] - vec) / np.maximum(alloc, 1)
        free_after = {
            r: round(float(left[j]), 4) for j, r in enumerate(before.resources) if alloc[j] > 0 and vec[j] > 0
        }
        candidates.append(Candidate(names[n], round(float(costs[i]), 6), free_after, names[n] == node))
    unplaced = next((u for u in result.unplaced if u.pod == key), None)
    return Explanation(
        pod=key,
        in_batch=True,
        note=f"strategy {options.config.strategy.value}: cost is what placing the pod alone adds (lower is better)",
        filters=prefilter.diagnose(pod),
        candidates=candidates,
        feasible=len(ok),
        node=node,
        unplaced_code=unplaced.code if unplaced else None,
        unplaced_reason=unplaced.reason if unplaced else None,
        evictions=[e for e in result.evictions if key in e.for_],
    )


def explain_document(story: Explanation) -> dict[str, Any]:
    """``placer explain -o json``: the story as JSON data, versioned like every answer."""
    data = asdict(story)
    data["filters"] = story.filters.model_dump(by_alias=True) if story.filters else None
    data["evictions"] = [e.model_dump(by_alias=True) for e in story.evictions]
    return {"schemaVersion": SCHEMA_VERSION, **data}


def explain_schema() -> dict[str, Any]:
    """The JSON Schema of ``explain_document``."""
    schema = TypeAdapter(Explanation).json_schema(mode="serialization", by_alias=True)
    schema["properties"] = {"schemaVersion": {"const": SCHEMA_VERSION, "type": "integer"}, **schema["properties"]}
    schema["required"] = ["schemaVersion", *schema.get("required", [])]
    schema["additionalProperties"] = False
    return schema
