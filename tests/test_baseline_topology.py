"""The kube-scheduler simulation's topology plugins, against upstream (v1.36) semantics.

Aspects: PodTopologySpread filter (round-robin over zones, skew, missing label, minDomains,
inclusion policies, namespace and terminating pods) and score (ScheduleAnyway, system defaults
only when asked); InterPodAffinity filter (first pod of a self-affine group, affinity, anti-affinity,
existing pods' anti-affinity, namespaceSelector) and score (preferred terms of both sides); bound
volumes' node affinity; FailedScheduling messages; DefaultPreemption re-running these filters in
its dry run; the two critical paths' upstream approximation.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from builders import node

from placer.baseline import SimResult, simulate
from placer.baseline.spread import Paths
from placer.engine import build_snapshot
from placer.inputs import parse_cluster
from placer.models import Cluster, NodeSelectorRequirement, NodeSelectorTerm, Pod, describe

H = "kubernetes.io/hostname"
Z = "topology.kubernetes.io/zone"
SPREAD = "node(s) didn't match pod topology spread constraints"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"


def _pod(name: str, cpu: str = "100m", memory: str = "100Mi", **extra: Any) -> dict[str, Any]:
    return {"name": name, "requests": {"cpu": cpu, "memory": memory}, **extra}


def _tiny(name: str, **extra: Any) -> dict[str, Any]:
    """A pod too small to move the resource scores: the topology score (or the name) decides."""
    return _pod(name, cpu="1m", memory="1Ki", **extra)


def _cluster(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], **extra: Any) -> Cluster:
    return parse_cluster("test.json", json.dumps({"nodes": nodes, "pods": pods, **extra}))


def _zones(*zones: str, per_zone: int = 1, **labels: str) -> list[dict[str, Any]]:
    """Nodes ``n<zone><i>`` labelled with their hostname and zone."""
    names = [f"n{z}{i}" for z in zones for i in range(per_zone)]
    return [node(n, labels={H: n, Z: n[1:-1], **labels}) for n in names]


def _simulate(c: Cluster, pods: list[Pod] | None = None, **options: Any) -> SimResult:
    pods = list(c.pods) if pods is None else pods
    pending = [p for p in pods if p.pending]
    snap = build_snapshot(c.nodes, [p for p in pods if p.running], pending)
    return simulate(snap, pending, pdbs=c.pdbs, namespaces=c.namespaces, replicasets=c.replicasets, **options)


def _placed(res: SimResult, c: Cluster) -> dict[str, str]:
    return {p.name: c.nodes[n].name for p, n in res.placements}


def _why(res: SimResult) -> dict[str, str]:
    return {p.name: describe(reason) for p, _, reason in res.unplaced}


def _spread(key: str = Z, skew: int = 1, app: str = "web", **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": skew,
            "topologyKey": key,
            "whenUnsatisfiable": extra.pop("when", "DoNotSchedule"),
            "labelSelector": {"matchLabels": {"app": app}},
            **extra,
        }
    ]


def _term(app: str, key: str = H, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def _required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def _preferred(kind: str, weight: int, term: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": term}]}}


def _ts(**extra: Any) -> dict[str, Any]:
    return {"topologySpreadConstraints": _spread(**extra)}


def _replicas(prefix: str, count: int, **extra: Any) -> list[dict[str, Any]]:
    return [_pod(f"{prefix}-{i}", creationTimestamp=f"2024-01-01T00:00:{i:02d}Z", **extra) for i in range(count)]


# --- PodTopologySpread: filter -----------------------------------------------------------------


def test_three_zones_max_skew_one_fill_round_robin() -> None:
    c = _cluster(_zones("a", "b", "c", per_zone=2), _replicas("web", 6, labels={"app": "web"}, **_ts()))
    placed = _placed(_simulate(c), c)
    assert [placed[f"web-{i}"][1] for i in range(6)] == ["a", "b", "c", "a", "b", "c"]


@pytest.mark.parametrize(
    ("nodes", "running", "reason"),
    [
        pytest.param(
            _zones("a", "b"),
            [_pod("w0", node="na0", labels={"app": "web"}), _pod("w1", node="na0", labels={"app": "web"})],
            f"0/2 nodes are available: 1 Insufficient cpu, 1 {SPREAD}.",
            id="skew 2 + 1 - 0 > 1 in zone a; zone b is full",
        ),
        pytest.param(
            [node("bare0"), node("bare1"), *_zones("b")],
            [],
            f"0/3 nodes are available: 1 Insufficient cpu, 2 {SPREAD} (missing required label).",
            id="nodes without the topology key",
        ),
    ],
)
def test_spread_filter_messages(nodes: list[dict[str, Any]], running: list[dict[str, Any]], reason: str) -> None:
    full = _pod("full", cpu="4", node="nb0", priority=100)
    c = _cluster(nodes, [*running, full, _pod("web", labels={"app": "web"}, **_ts())])
    assert _why(_simulate(c)) == {"web": reason}


def test_min_domains_above_the_zone_count_makes_the_global_minimum_zero() -> None:
    pods = _replicas("web", 3, labels={"app": "web"}, **_ts(minDomains=3))
    c = _cluster(_zones("a", "b", per_zone=2), pods)
    res = _simulate(c)
    assert sorted(v[1] for v in _placed(res, c).values()) == ["a", "b"]
    assert _why(res) == {"web-2": f"0/4 nodes are available: 4 {SPREAD}."}


@pytest.mark.parametrize(("policy", "placed"), [("Honor", True), ("Ignore", False)])
def test_node_affinity_policy_decides_whether_an_unselectable_zone_counts(policy: str, placed: bool) -> None:
    """Zone c has no matching web pod but the pod's nodeSelector excludes it: with Honor it is no
    domain (min 1, skew 1 in a or b); with Ignore it is (min 0, skew 2 everywhere selectable)."""
    nodes = _zones("a", "b", pool="x") + _zones("c")
    running = [_pod("w-a", node="na0", labels={"app": "web"}), _pod("w-b", node="nb0", labels={"app": "web"})]
    web = _pod("web", labels={"app": "web"}, nodeSelector={"pool": "x"}, **_ts(nodeAffinityPolicy=policy))
    c = _cluster(nodes, [*running, web])
    assert ("web" in _placed(_simulate(c), c)) is placed


def test_spread_counts_only_the_namespace_and_skips_terminating_pods() -> None:
    running = [
        _pod("other-ns", node="na0", namespace="other", labels={"app": "web"}),
        _pod("leaving", node="na0", labels={"app": "web"}),
        _pod("full", cpu="4", node="nb0"),
    ]
    c = _cluster(_zones("a", "b"), [*running, _pod("web", labels={"app": "web"}, **_ts())])
    pods = [p.model_copy(update={"terminating": p.name == "leaving"}) for p in c.pods]
    # Zone a counts 0 (skew 1); were both pods counted it would be 2 (skew 3).
    assert _placed(_simulate(c, pods), c) == {"web": "na0"}
    counted = [p.model_copy(update={"namespace": "default"}) if p.name == "other-ns" else p for p in c.pods]
    assert _why(_simulate(c, counted)) == {"web": f"0/2 nodes are available: 1 Insufficient cpu, 1 {SPREAD}."}


# --- PodTopologySpread: score ------------------------------------------------------------------


def test_schedule_anyway_steers_to_the_emptiest_zone() -> None:
    running = [_tiny(f"w{i}", node="na0", labels={"app": "web"}) for i in range(2)]
    running.append(_tiny("w2", node="nb0", labels={"app": "web"}))
    web = _tiny("web", labels={"app": "web"}, **_ts(when="ScheduleAnyway"))
    c = _cluster(_zones("a", "b", "c"), [*running, web])
    assert _placed(_simulate(c), c) == {"web": "nc0"}


@pytest.mark.parametrize(("defaults", "where"), [(False, "na0"), (True, "na1")])
def test_system_default_spreading_only_when_asked(defaults: bool, where: str) -> None:
    owner = {"kind": "ReplicaSet", "name": "web-1"}
    running = [_tiny("w0", node="na0", labels={"app": "web"}, owner=owner)]
    web = _tiny("web", labels={"app": "web"}, owner=owner)
    rs = {"name": "web-1", "selector": {"matchLabels": {"app": "web"}}}
    c = _cluster(_zones("a", per_zone=2), [*running, web], replicaSets=[rs])
    assert _placed(_simulate(c, default_spreading=defaults), c) == {"web": where}


# --- InterPodAffinity: filter ------------------------------------------------------------------


def test_the_first_pod_of_a_self_affine_group_is_admitted_and_the_rest_follow() -> None:
    affinity = _required("podAffinity", _term("cache", Z))
    c = _cluster(_zones("a", "b", per_zone=2), _replicas("cache", 3, labels={"app": "cache"}, affinity=affinity))
    placed = _placed(_simulate(c), c)
    assert len(placed) == 3
    assert {n[1] for n in placed.values()} == {"a"}


def test_affinity_to_pods_that_do_not_exist_fails_unless_self_matching() -> None:
    affinity = _required("podAffinity", _term("cache", Z))
    c = _cluster(_zones("a", "b"), [_pod("x", labels={"app": "other"}, affinity=affinity)])
    assert _why(_simulate(c)) == {"x": f"0/2 nodes are available: 2 {AFFINITY}."}


def test_affinity_requires_every_term_key_on_the_node() -> None:
    affinity = _required("podAffinity", _term("cache", Z), _term("cache", "rack"))
    nodes = [*_zones("a"), node("nr", labels={H: "nr", Z: "a", "rack": "r1"})]
    running = [_pod("c0", node="nr", labels={"app": "cache"})]
    c = _cluster(nodes, [*running, _pod("x", labels={"app": "x"}, affinity=affinity)])
    assert _placed(_simulate(c), c) == {"x": "nr"}


def test_required_anti_affinity_one_per_node() -> None:
    anti = _required("podAntiAffinity", _term("db"))
    c = _cluster(_zones("a", "b", "c"), _replicas("db", 4, labels={"app": "db"}, affinity=anti))
    res = _simulate(c)
    assert sorted(_placed(res, c).values()) == ["na0", "nb0", "nc0"]
    assert _why(res) == {"db-3": f"0/3 nodes are available: 3 {ANTI}."}


def test_a_running_pods_anti_affinity_repels_the_pods_it_matches() -> None:
    guard = _pod("guard", node="na0", labels={"app": "guard"}, affinity=_required("podAntiAffinity", _term("noisy", Z)))
    c = _cluster(_zones("a", "b", per_zone=2), [guard, _pod("noisy", labels={"app": "noisy"})])
    assert _placed(_simulate(c), c) == {"noisy": "nb0"}
    c = _cluster(_zones("a"), [guard, _pod("noisy", labels={"app": "noisy"})])
    assert _why(_simulate(c)) == {"noisy": f"0/1 nodes are available: 1 {EXISTING}."}


@pytest.mark.parametrize(("namespace", "blocked"), [("team-a", True), ("team-b", False)])
def test_namespace_selector_picks_the_namespaces_a_term_looks_at(namespace: str, blocked: bool) -> None:
    term = _term("db", namespaceSelector={"matchLabels": {"team": "a"}})
    db = _pod("db", node="na0", namespace=namespace, labels={"app": "db"})
    x = _pod("x", labels={"app": "x"}, affinity=_required("podAntiAffinity", term))
    c = _cluster(_zones("a"), [db, x], namespaces={"team-a": {"team": "a"}, "team-b": {"team": "b"}})
    assert ("x" in _why(_simulate(c))) is blocked


# --- InterPodAffinity: score -------------------------------------------------------------------


def test_preferred_anti_affinity_steers_away_from_a_matching_node() -> None:
    running = [_tiny("db-0", node="na0", labels={"app": "db"}), _tiny("db-1", node="nb0", labels={"app": "db"})]
    x = _tiny("x", labels={"app": "x"}, affinity=_preferred("podAntiAffinity", 100, _term("db")))
    c = _cluster(_zones("a", "b", "c"), [*running, x])
    assert _placed(_simulate(c), c) == {"x": "nc0"}


def test_a_running_pods_preferred_affinity_draws_the_pods_it_matches() -> None:
    fan = _tiny("fan", node="nb0", labels={"app": "fan"}, affinity=_preferred("podAffinity", 50, _term("x")))
    c = _cluster(_zones("a", "b"), [fan, _tiny("x", labels={"app": "x"})])
    assert _placed(_simulate(c), c) == {"x": "nb0"}


# --- Volumes -----------------------------------------------------------------------------------


def test_bound_volume_node_affinity_and_volume_problems() -> None:
    c = _cluster(_zones("a", "b"), [_pod("v")])
    pinned = [p.model_copy(update={"volume_terms": (_in_zone("b"),)}) for p in c.pods]
    assert _placed(_simulate(c, pinned), c) == {"v": "nb0"}
    # Two bound volumes pinned to different zones: every entry needs a matching term, no node has both.
    nowhere = [p.model_copy(update={"volume_terms": (_in_zone("a"), _in_zone("b"))}) for p in c.pods]
    assert _why(_simulate(c, nowhere)) == {"v": "0/2 nodes are available: 2 node(s) had volume node affinity conflict."}
    problem = "pod has unbound immediate PersistentVolumeClaims"
    stuck = [p.model_copy(update={"volume_problem": problem}) for p in c.pods]
    assert _why(_simulate(c, stuck)) == {"v": f"0/2 nodes are available: {problem}."}


def _in_zone(zone: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key=Z, operator="In", values=(zone,)),)),)


# --- DefaultPreemption -------------------------------------------------------------------------


def test_preemption_removes_the_lower_priority_pod_anti_affinity_rejects() -> None:
    running = [
        _pod("low-0", node="na0", labels={"app": "db"}, priority=1, startTime="2024-01-01T00:00:00Z"),
        _pod("low-1", node="nb0", labels={"app": "db"}, priority=1, startTime="2024-01-01T00:00:01Z"),
    ]
    high = _pod("high", labels={"app": "db"}, priority=10, affinity=_required("podAntiAffinity", _term("db")))
    c = _cluster(_zones("a", "b"), [*running, high])
    res = _simulate(c)
    # Equal victims on both nodes: the latest-started one goes.
    assert [(v.name, c.nodes[n].name, by.name) for v, n, by in res.preemptions] == [("low-1", "nb0", "high")]
    assert _placed(res, c) == {"high": "nb0"}


def test_preemption_never_claims_a_node_the_new_filters_reject() -> None:
    """Room on n-a needs the low pod gone, but a higher-priority db pod stays there; n-b's low pod
    is the only victim that makes every filter pass."""
    running = [
        _pod("big", cpu="4", node="na0", priority=1),
        _pod("db", cpu="0", node="na0", labels={"app": "db"}, priority=100),
        _pod("small", cpu="4", node="nb0", priority=1),
    ]
    high = _pod("high", cpu="2", labels={"app": "db"}, priority=10, affinity=_required("podAntiAffinity", _term("db")))
    c = _cluster(_zones("a", "b"), [*running, high])
    res = _simulate(c)
    assert [v.name for v, _, _ in res.preemptions] == ["small"]
    assert _placed(res, c) == {"high": "nb0"}


def test_preemption_of_a_running_pods_anti_affinity_and_of_spread_skew() -> None:
    guard = _pod("guard", node="na0", priority=1, affinity=_required("podAntiAffinity", _term("noisy", Z)))
    c = _cluster(_zones("a"), [guard, _pod("noisy", labels={"app": "noisy"}, priority=10)])
    assert [v.name for v, _, _ in _simulate(c).preemptions] == ["guard"]
    # Zone a holds two low web pods, zone b is full of a higher pod: both lows go (skew with one back is 2).
    running = [_pod(f"low-{i}", node="na0", labels={"app": "web"}, priority=1) for i in range(2)]
    running.append(_pod("full", cpu="4", node="nb0", priority=100))
    c = _cluster(_zones("a", "b"), [*running, _pod("web", labels={"app": "web"}, priority=10, **_ts())])
    res = _simulate(c)
    assert sorted(v.name for v, _, _ in res.preemptions) == ["low-0", "low-1"]
    assert _placed(res, c) == {"web": "na0"}


def test_no_preemption_when_the_anti_affinity_pods_rank_higher() -> None:
    running = [_pod(f"db-{z}", node=f"n{z}0", labels={"app": "db"}, priority=100) for z in "ab"]
    high = _pod("high", labels={"app": "db"}, priority=10, affinity=_required("podAntiAffinity", _term("db")))
    res = _simulate(_cluster(_zones("a", "b"), [*running, high]))
    assert res.preemptions == []
    assert _why(res) == {"high": f"0/2 nodes are available: 2 {ANTI}."}


# --- Critical paths ----------------------------------------------------------------------------


def test_critical_paths_keep_upstreams_approximation() -> None:
    """Counts a=0, b=0, c=0 track a and b; raising a then b reports a minimum of 1 although c is 0,
    exactly as kube-scheduler's two paths do during a preemption dry run."""
    paths = Paths()
    for value in "abc":
        paths.update(value, 0)
    assert (paths.values, paths.nums) == (["a", "b"], [0, 0])
    paths.update("a", 1)
    paths.update("b", 1)
    assert paths.nums[0] == 1
    paths.update("c", 0)
    assert (paths.values[0], paths.nums[0]) == ("c", 0)
