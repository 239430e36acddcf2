"""Explaining pods from one solve: each pod's whole story, read off the answer.

Which filters turned nodes away (kube-scheduler's order, on the cluster as it was before the
batch), the nodes left with room and what placing the pod there alone costs under the strategy
(lower is better), the node the answer chose (a preemptor's too, whose room the plan made), and
for each node that looked cheaper, the rule that kept the pod off it in the answer
(``alternatives``); the plan step of its bind, the evictions made for it, and for a pending
member of a group held in one topology domain, what each domain lacked (``domains``).
Pure: the solve is ``service.solve_cluster``'s, the same as ``placer solve``, made once for
every pod explained.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placer.engine import fits, pod_vector
from placer.explain.alternatives import why_not
from placer.explain.answer import Answer
from placer.explain.domains import domain_tries
from placer.explain.stories import Candidate, Explanation, PodSpec
from placer.models import Cluster, Pod, Step
from placer.service import Outcome, SolveOptions, solve_cluster

__all__ = ["SHOWN", "explain_answer", "explain_pods", "unknown_pods"]

SHOWN = 10  # candidate nodes listed (the cheapest), plus the chosen one


def _named(cluster: Cluster, keys: Sequence[str]) -> dict[str, Pod]:
    """The pods of ``keys`` (namespace/name) the cluster has."""
    wanted = set(keys)
    names = {k.partition("/")[2] for k in keys}
    return {key: p for p in cluster.pods if p.name in names and (key := f"{p.namespace}/{p.name}") in wanted}


def unknown_pods(cluster: Cluster, keys: Sequence[str]) -> list[str]:
    """Those of ``keys`` (namespace/name) that name no pod of the cluster."""
    known = _named(cluster, keys)
    return [k for k in keys if k not in known]


def explain_pods(cluster: Cluster, options: SolveOptions, keys: Sequence[str]) -> list[Explanation]:
    """The stories of pods ``keys`` (all of the cluster: ``unknown_pods``), from one solve (none
    when no pod named is in the batch or running)."""
    pods = _named(cluster, keys)
    scheduler = options.config.scheduler_name
    # A running pod's story is the answer's too: the plan may move or preempt it.
    decided = any(p.awaits(scheduler) or p.running for p in pods.values())
    outcome = solve_cluster(cluster, options) if decided else None
    return _stories(cluster, options, outcome, pods, keys)


def explain_answer(
    cluster: Cluster, options: SolveOptions, outcome: Outcome | None, keys: Sequence[str]
) -> list[Explanation]:
    """The stories of pods ``keys`` in ``outcome``, the answer of ``solve_cluster(cluster,
    options)`` (None only when no pod named is in the batch or running)."""
    return _stories(cluster, options, outcome, _named(cluster, keys), keys)


def _stories(
    cluster: Cluster, options: SolveOptions, outcome: Outcome | None, pods: dict[str, Pod], keys: Sequence[str]
) -> list[Explanation]:
    answer = Answer(cluster, options.config, outcome) if outcome is not None else None
    return [_story(answer, pods[k], options) for k in keys]


def _outside(pod: Pod, scheduler: str) -> str:
    if pod.node_name is not None:
        return f"bound to {pod.node_name} (phase {pod.phase})"
    if pod.terminating:
        return "being deleted"
    if pod.scheduling_gates:
        return f"waiting on scheduling gates {', '.join(pod.scheduling_gates)}"
    return f"addressed to scheduler {pod.scheduler_name!r}, not {scheduler!r} (--scheduler-name)"


def _spec(pod: Pod) -> PodSpec:
    return PodSpec(
        requests=dict(pod.requests),
        node_selector=dict(pod.node_selector),
        required_terms=pod.required_terms,
        tolerations=pod.tolerations,
        spread=pod.spread,
        pod_affinity=pod.pod_affinity,
        pod_anti_affinity=pod.pod_anti_affinity,
        priority=pod.priority,
        gang=pod.gang_key,
        group_domains=pod.group_domains,
    )


def _story(answer: Answer | None, read: Pod, options: SolveOptions) -> Explanation:
    scheduler = options.config.scheduler_name
    if answer is None or not read.awaits(scheduler):
        why = _outside(read, scheduler)
        story = Explanation(pod=read.key, in_batch=False, note=f"not part of the batch: {why}", spec=_spec(read))
        if answer is not None:
            result = answer.outcome.result
            story.evicted = next((e for e in result.evictions if e.pod == read.key), None)
            story.plan, story.waits_for = _steps(result.steps, read.key)
        return story
    pod = answer.pod(read.key) or read
    outcome = answer.outcome
    before = outcome.before
    prefilter = answer.prefilter
    vec = pod_vector(pod, before.resources)
    masks = prefilter.masks(pod)
    ok = np.flatnonzero(masks.allowed & fits(before, vec))
    result = outcome.result
    node = answer.placed.get(pod.key)
    scorer = answer.scorer
    alone = scorer.delta(vec, ok.astype(np.int64), before.used) if len(ok) else np.zeros(0)
    order = [int(n) for n in ok[np.argsort(alone, kind="stable")[:SHOWN]]]
    if node is not None and node not in order:
        order.append(node)  # a preemptor's landing node too: the plan made its room
    costs = scorer.delta(vec, np.array(order, dtype=np.int64), before.used) if order else np.zeros(0)
    mine = float(costs[order.index(node)]) if node is not None else None
    rivals = [n for n, c in zip(order, costs.tolist(), strict=True) if n != node and (mine is None or c <= mine)]
    whys = why_not(answer, pod, vec, masks, rivals, node)
    fitting = set(ok.tolist())
    candidates = []
    for n, cost in zip(order, costs.tolist(), strict=True):
        alloc = before.alloc[n]
        room = before.free[n] - vec if n in fitting else outcome.after.free[n]
        left = room / np.maximum(alloc, 1)
        free_after = {
            r: round(float(left[j]), 4) for j, r in enumerate(before.resources) if alloc[j] > 0 and vec[j] > 0
        }
        candidates.append(
            Candidate(before.nodes[n].name, round(float(cost), 6), free_after, n == node, n in fitting, whys.get(n, []))
        )
    unplaced = next((u for u in result.unplaced if u.pod == pod.key), None)
    plan, waits_for = _steps(result.steps, pod.key)
    return Explanation(
        pod=pod.key,
        in_batch=True,
        note=f"strategy {options.config.strategy.value}: cost is what placing the pod alone adds, as the decision "
        "scored it (lower is better)",
        spec=_spec(read),
        filters=prefilter.diagnose(pod),
        candidates=candidates,
        feasible=len(ok),
        node=before.nodes[node].name if node is not None else None,
        unplaced_code=unplaced.code if unplaced else None,
        unplaced_reason=unplaced.reason if unplaced else None,
        evictions=[e for e in result.evictions if pod.key in e.for_],
        plan=plan,
        waits_for=waits_for,
        domains=domain_tries(answer, pod) if node is None and pod.group_domains else [],
    )


def _steps(steps: Sequence[Step], key: str) -> tuple[list[Step], list[Step]]:
    """The plan's steps acting on pod ``key`` (its bind; or its eviction, the wait until it is
    gone and its replacement's bind), and the other steps those wait for."""
    mine = [s for s in steps if key in (s.pod, s.replaces)]
    ids = {s.id for s in mine}
    waits = {a for s in mine for a in s.after} - ids
    return mine, [s for s in steps if s.id in waits]
