"""The thesis's restart tiers inside a namespace, spec.priority alone across namespaces (issue 31).

Aspects, all with the default ``restartTiers: namespace``: inside one namespace and one
spec.priority the tiers are lexicographic (one Always pod outweighs any number of Never pods: it
preempts two of them, the seed's "always big" case); across namespaces only a strictly higher
spec.priority preempts and pods count one for one; a plan is accepted only if no namespace ends
worse in its own (priority, tier) order except to a strictly higher priority. Brute force on tiny
instances checks the batch answer against every feasible assignment; a randomized check runs the
plans' acceptance rule. Every answer goes through the validator (``support.solve``), whose own
rules (``placements._worse_off``, ``plans._namespaces_improve`` in ``placer.validate``) share no code with the engine.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from builders import property_settings
from hypothesis import example, given, note
from hypothesis import strategies as st
from support import DETERMINISTIC, cluster, node, pod, solve, where

from placer.models import Cluster, Config, Pod
from placer.service import SolveOptions, solve_cluster
from placer.validate import batch_pods, hard_violations, validate_placements

TIERS = {"Always": 0, "OnFailure": 1, "Never": 2}  # index in a namespace's vector, highest tier first


def _thesis(*, victims_namespace: str = "default") -> Cluster:
    """One node of 1700m/3500Mi runs pods 1-3 (400m/800Mi) and 4-6 (100m/200Mi) of tiers Never,
    OnFailure, Always; an Always pod of 500m/2000Mi arrives and needs pod-1 and pod-2 gone."""
    tiers = ["Never", "OnFailure", "Always"]
    running = [
        pod(f"pod-{i + 1 + 3 * big}", cpu=cpu, memory=mem, node="n", restartPolicy=t, namespace=victims_namespace)
        for big, (cpu, mem) in enumerate([("400m", "800Mi"), ("100m", "200Mi")])
        for i, t in enumerate(tiers)
    ]
    arrival = pod("arrival", cpu="500m", memory="2000Mi", schedulerName="placer")
    return cluster([node("n", cpu="1700m", memory="3500Mi")], [*running, arrival])


def test_an_always_pod_preempts_two_lower_tier_pods_of_its_own_namespace() -> None:
    outcome = solve(_thesis())
    assert sorted(e.pod for e in outcome.result.evictions) == ["default/pod-1", "default/pod-2"]
    assert where(outcome) == {"arrival": "n"}


def test_an_always_pod_preempts_no_pod_of_another_namespace_at_equal_priority() -> None:
    outcome = solve(_thesis(victims_namespace="tenant-b"))
    assert outcome.result.evictions == [] and where(outcome) == {}


def contest(web_ns: str) -> Cluster:
    """One free 2-cpu node; a 2-cpu Always pod ``web`` of ``web_ns`` and two 1-cpu Never pods of
    namespace a."""
    pods = [
        pod("web", cpu="2", namespace=web_ns, schedulerName="placer"),
        *(pod(f"job-{i}", cpu="1", namespace="a", restartPolicy="Never", schedulerName="placer") for i in (0, 1)),
    ]
    return cluster([node("n", cpu="2")], pods)


def test_across_namespaces_pods_count_one_for_one_and_inside_one_the_tier_decides() -> None:
    assert where(solve(contest("a"))) == {"web": "n"}
    assert sorted(where(solve(contest("b")))) == ["job-0", "job-1"]


# --- brute force: the batch answer against every feasible assignment --------------------------

Vectors = dict[int, dict[str, list[int]]]  # priority -> namespace -> pods per tier, Always first


def _vectors(pods: Mapping[str, Pod], placed: Mapping[str, str]) -> Vectors:
    out: Vectors = {}
    for key in placed:
        p = pods[key]
        row = out.setdefault(p.priority, {}).setdefault(p.namespace, [0, 0, 0])
        row[TIERS[p.restart_policy]] += 1
    return out


def _at(v: Vectors, priority: int, names: set[str]) -> dict[str, list[int]]:
    return {n: v.get(priority, {}).get(n, [0, 0, 0]) for n in names}


def _dominates(x: dict[str, list[int]], y: dict[str, list[int]]) -> bool:
    """Every namespace no worse in its own lexicographic tier order, one better."""
    return all(x[n] >= y[n] for n in x) and x != y


@st.composite
def tiny(draw: st.DrawFn) -> Cluster:
    nodes = [node(f"n{i}", cpu=str(draw(st.sampled_from([2, 2, 1, 3])))) for i in range(draw(st.integers(1, 2)))]
    pods: list[dict[str, Any]] = []
    for i in range(draw(st.integers(3, 4))):
        pods.append(
            pod(
                f"p{i}",
                cpu=str(draw(st.integers(1, 2))),
                namespace=draw(st.sampled_from(["a", "a", "b"])),
                priority=draw(st.sampled_from([0, 0, 0, 1])),
                restartPolicy=draw(st.sampled_from(list(TIERS))),
                schedulerName="placer",
                creationTimestamp=f"2024-01-01T00:00:{i:02d}Z",
            )
        )
    for i in range(draw(st.integers(0, 2))):
        pods.append(
            pod(
                f"r{i}",
                cpu="1",
                node=f"n{draw(st.integers(0, len(nodes) - 1))}",
                namespace=draw(st.sampled_from(["a", "b"])),
                priority=draw(st.sampled_from([0, 1])),
                restartPolicy=draw(st.sampled_from(list(TIERS))),
                owner={"kind": "ReplicaSet", "name": f"r{i}"},
            )
        )
    return cluster(nodes, pods)


def _feasible(c: Cluster) -> list[dict[str, str]]:
    batch = [p.key for p in batch_pods(c)]
    names = [n.name for n in c.nodes]
    out = []
    for choice in itertools.product([None, *names], repeat=len(batch)):
        placed = {k: n for k, n in zip(batch, choice, strict=True) if n is not None}
        if not hard_violations(c, placed):
            out.append(placed)
    return out


@property_settings("PLACER_TIER_EXAMPLES", 150)
@given(c=tiny())
@example(c=contest("a"))
@example(c=contest("b"))
def test_no_feasible_assignment_beats_the_batch_answer_in_any_namespaces_own_order(c: Cluster) -> None:
    """At every spec.priority (highest first), among the assignments equal to the answer above it:
    none is at least as good for every namespace in its own tier order and better for one; and the
    answer is at least as good, for every namespace, as some assignment placing the most pods of
    that priority (so a namespace's tiers never cost another namespace a pod)."""
    note(repr([(p.key, p.node_name, p.priority, p.restart_policy, p.requests.get("cpu")) for p in c.pods]))
    result = solve_cluster(c, SolveOptions(config=Config.model_validate(DETERMINISTIC), evict=False)).result
    answer = {p.pod: p.node for p in result.placements if p.pod}
    assert validate_placements(c, answer, restart_tiers="namespace") == []
    pods = {p.key: p for p in c.pods}
    mine = _vectors(pods, answer)
    others = [(x, _vectors(pods, x)) for x in _feasible(c)]
    names = {p.namespace for p in c.pods}
    for priority in sorted({p.priority for p in batch_pods(c)}, reverse=True):
        alike = [v for _, v in others if all(_at(v, q, names) == _at(mine, q, names) for q in mine | v if q > priority)]
        ours = _at(mine, priority, names)
        assert not any(_dominates(_at(v, priority, names), ours) for v in alike), priority
        most = max(sum(map(sum, _at(v, priority, names).values())) for v in alike)
        counted = [_at(v, priority, names) for v in alike if sum(map(sum, _at(v, priority, names).values())) == most]
        assert any(all(ours[n] >= r[n] for n in names) for r in counted), priority


# --- plans: no namespace ends worse in its own order, except to a strictly higher priority -------


@property_settings("PLACER_TIER_EXAMPLES", 150)
@given(c=tiny())
def test_a_plan_leaves_no_namespace_worse_except_to_a_strictly_higher_priority(c: Cluster) -> None:
    outcome = solve(c)  # with evictions; support.solve runs validate_plan on it
    pods = {p.key: p for p in c.pods}
    placed = {p.pod: p.node for p in outcome.result.placements if p.pod}
    preempted = {e.pod for e in outcome.result.evictions if e.kind == "preempt"}
    before = {p.key: str(p.node_name) for p in c.pods if p.running}
    after = {**{k: n for k, n in before.items() if k not in preempted}, **placed}
    was, now = _vectors(pods, before), _vectors(pods, after)
    for key in preempted:
        victim = pods[key]
        higher = any(pods[k].priority > victim.priority and n == victim.node_name for k, n in placed.items())
        ns = {victim.namespace}
        own_better = _at(now, victim.priority, ns)[victim.namespace] > _at(was, victim.priority, ns)[victim.namespace]
        assert higher or own_better, key
