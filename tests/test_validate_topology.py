"""Table tests of the validator's inter-pod affinity, anti-affinity, topology spread and volume
rules, transcribed from docs/topology.md: each case is a small cluster built from the models and
an answer the validator must accept, or reject with a violation naming the rule.

Nodes: ``a1`` and ``a2`` in zone a, ``b1`` in zone b, ``c1`` in zone c (plus the hostname label);
pods need no resources unless a case says so, so only the rule under test decides. Clusters are
built from the models directly (not through the readers) so each term says exactly what it
matches. Then: the final state of global plans, the building blocks, and the maximality question
("would this pod fit there?") answered quickly against the definition on random clusters.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from placer.models import (
    Cluster,
    Eviction,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Owner,
    Placement,
    Pod,
    PodAffinityTerm,
    ReplicaSet,
    Result,
    SpreadConstraint,
    Step,
    Taint,
    Toleration,
)
from placer.validate import (
    TopologyRules,
    TopologyState,
    label_selector_matches,
    namespace_labels,
    spread_node_eligible,
    term_matches_pod,
    validate_placements,
    validate_plan,
    volume_problems,
)

HOST = "kubernetes.io/hostname"
ZONE = "zone"
WEB = {"app": "web"}
DB = {"app": "db"}


# --- building clusters --------------------------------------------------------------------------


def node(name: str, zone: str | None = None, *, taints: Sequence[Taint] = (), **alloc: int) -> Node:
    """A node with its hostname label and, when given, a zone; ``alloc`` overrides allocatable."""
    labels = {HOST: name} | ({ZONE: zone} if zone else {})
    return Node(name=name, labels=labels, allocatable={"cpu": 4000, **alloc}, taints=tuple(taints))


A1, A2, B1, C1 = node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")


def pod(name: str, *, on: str | None = None, labels: Mapping[str, str] | None = None, **fields: Any) -> Pod:
    """A pending pod of placer, or a running one when ``on`` names its node."""
    running = {"node_name": on, "phase": "Running"} if on else {}
    return Pod(name=name, labels=dict(labels or {}), **({"scheduler_name": "placer"} | running | fields))


def sel(**labels: str) -> LabelSelector:
    return LabelSelector(match_labels=labels)


def term(key: str = ZONE, selector: LabelSelector | None = None, **fields: Any) -> PodAffinityTerm:
    """A pod (anti-)affinity term over the default namespace unless ``fields`` says otherwise."""
    return PodAffinityTerm(topology_key=key, selector=selector, **({"namespaces": ("default",)} | fields))


def spread(selector: LabelSelector | None = None, key: str = ZONE, **fields: Any) -> SpreadConstraint:
    return SpreadConstraint(max_skew=fields.pop("max_skew", 1), topology_key=key, selector=selector, **fields)


def state(
    nodes: Sequence[Node], pods: Sequence[Pod], namespaces: Mapping[str, dict[str, str]] | None = None
) -> Cluster:
    return Cluster(nodes=tuple(nodes), pods=tuple(pods), namespaces=dict(namespaces or {}))


def check(c: Cluster, placements: Mapping[str, str]) -> list[str]:
    return validate_placements(c, {k if "/" in k else f"default/{k}": v for k, v in placements.items()})


def web(name: str, **fields: Any) -> Pod:
    """A pending web pod with required affinity to web pods in its zone (a self-affine group)."""
    return pod(name, labels=WEB, pod_affinity=(term(selector=sel(**WEB)),), **fields)


def to_web(name: str, **fields: Any) -> Pod:
    """A pending pod (not itself web) with required affinity to web pods in its zone."""
    return pod(name, labels={"app": "client"}, **({"pod_affinity": (term(selector=sel(**WEB)),)} | fields))


def spreading(name: str, **fields: Any) -> Pod:
    """A pending web pod spread over zones (maxSkew 1 over web pods) unless ``constraint`` is given."""
    return pod(name, labels=WEB, spread=(fields.pop("constraint", None) or spread(sel(**WEB)),), **fields)


def zone_in(*zones: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key=ZONE, operator="In", values=zones),))


def host_in(*hosts: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key=HOST, operator="In", values=hosts),))


DEDICATED = Taint(key="dedicated", value="x", effect="NoSchedule")
ANTI_DB = term(selector=sel(**DB))
ANTI_WEB_HOST = term(HOST, sel(**WEB))
OTHER_NS_DB = pod("r", on="a1", labels=DB, namespace="other")


# --- accepted -----------------------------------------------------------------------------------

VALID = [
    # required affinity
    pytest.param(state([A1, B1], [web("w1")]), {"w1": "a1"}, id="one seed: the first pod of a self-affine group"),
    pytest.param(
        state([A1, A2, B1], [web("w1"), web("w2")]),
        {"w1": "a1", "w2": "a2"},
        id="two pods of a self-affine group in one zone provide for each other",
    ),
    pytest.param(
        state([A1, B1, C1], [pod("r", on="c1", labels=WEB), web("w1")]),
        {"w1": "c1"},
        id="a running provider in the pod's zone",
    ),
    pytest.param(
        state([A1, A2, B1], [pod("db", labels=WEB), to_web("client")]),
        {"db": "a2", "client": "a1"},
        id="affinity satisfied by another batch pod in the zone",
    ),
    pytest.param(
        state(
            [A1, A2],
            [
                pod("r", on="a2", labels=WEB | {"tier": "cache"}),
                to_web("client", pod_affinity=(term(selector=sel(**WEB)), term(selector=sel(tier="cache")))),
            ],
        ),
        {"client": "a1"},
        id="a provider matching all terms",
    ),
    # required anti-affinity
    pytest.param(
        state([A1, A2, B1], [pod("r", on="a1", labels=DB, pod_anti_affinity=(term(selector=sel(**WEB)),)), web("w")]),
        {"w": "b1"},
        id="a running pod's anti-affinity: the matched pod in another zone",
    ),
    pytest.param(
        state([A1, A2, B1], [pod("r", on="a1", labels=DB), pod("w", pod_anti_affinity=(ANTI_DB,))]),
        {"w": "b1"},
        id="incoming anti-affinity: another zone than the matched running pod",
    ),
    pytest.param(
        state([A1, A2], [pod(n, labels=WEB, pod_anti_affinity=(ANTI_WEB_HOST,)) for n in ("w1", "w2")]),
        {"w1": "a1", "w2": "a2"},
        id="two batch pods repelling per host on two hosts of one zone",
    ),
    pytest.param(
        state(
            [A1, B1],
            [
                pod("r1", on="a1", labels=DB, pod_anti_affinity=(ANTI_DB,)),
                pod("r2", on="a1", labels=DB, pod_anti_affinity=(ANTI_DB,)),
                pod("x"),
            ],
        ),
        {"x": "a1"},
        id="two running pods breaking anti-affinity between themselves are not the batch's fault",
    ),
    pytest.param(
        state([A1], [pod("r", on="a1", labels=DB), pod("w", pod_anti_affinity=(term("rack", sel(**DB)),))]),
        {"w": "a1"},
        id="anti-affinity on a key the node lacks never applies",
    ),
    pytest.param(
        state([A1, A2], [OTHER_NS_DB, pod("w", pod_anti_affinity=(ANTI_DB,))]),
        {"w": "a2"},
        id="anti-affinity over its own namespace ignores the same labels in another",
    ),
    pytest.param(
        state(
            [A1, A2],
            [OTHER_NS_DB, pod("w", pod_anti_affinity=(term(selector=sel(**DB), namespace_selector=sel(team="x")),))],
            {"other": {"team": "y"}},
        ),
        {"w": "a2"},
        id="namespaceSelector not matching the other namespace's labels",
    ),
    pytest.param(
        state([A1, A2], [pod("r", on="a1", labels=DB), pod("w", pod_anti_affinity=(term(selector=None),))]),
        {"w": "a2"},
        id="a null selector matches no pod",
    ),
    # topology spread
    pytest.param(
        state([A1, B1], [spreading("w1"), spreading("w2"), spreading("w3")]),
        {"w1": "a1", "w2": "a1", "w3": "b1"},
        id="spread 2-1 within maxSkew 1",
    ),
    pytest.param(
        state([A1, B1, C1], [pod("r1", on="a1", labels=WEB), pod("r2", on="b1", labels=WEB), spreading("w")]),
        {"w": "c1"},
        id="spread into the empty zone",
    ),
    pytest.param(
        state([A1, B1], [pod("r1", on="a1", labels=WEB), pod("r2", on="b1", labels=WEB), spreading("w")]),
        {"w": "a1"},
        id="minDomains unset: 2-1 over two zones",
    ),
    pytest.param(
        state([A1, B1], [pod("r1", on="a1", labels=WEB), spreading("w", node_selector={HOST: "a1"})]),
        {"w": "a1"},
        id="nodeAffinityPolicy Honor: a zone the pod may not use does not count",
    ),
    pytest.param(
        state(
            [A1, node("b1", "b", taints=[DEDICATED])],
            [pod("r1", on="a1", labels=WEB), spreading("w", constraint=spread(sel(**WEB), node_taints_policy="Honor"))],
        ),
        {"w": "a1"},
        id="nodeTaintsPolicy Honor: a zone of untolerated taints does not count",
    ),
    pytest.param(
        state([A1, B1], [pod("r1", on="a1", labels=WEB, terminating=True), spreading("w")]),
        {"w": "a1"},
        id="a terminating pod does not count",
    ),
    pytest.param(
        state([A1, B1], [pod("r1", on="a1", labels=WEB, namespace="other"), spreading("w")]),
        {"w": "a1"},
        id="pods of another namespace do not count",
    ),
    pytest.param(
        state([A1, B1], [*(pod(f"r{i}", on="a1", labels=WEB) for i in range(3)), spreading("w")]),
        {"w": "b1"},
        id="running pods already over the skew: the batch pod goes to the low zone",
    ),
    pytest.param(
        state(
            [A1, B1],
            [spreading(f"w{i}", constraint=spread(sel(**WEB), when_unsatisfiable="ScheduleAnyway")) for i in range(3)],
        ),
        {"w0": "a1", "w1": "a1", "w2": "a1"},
        id="ScheduleAnyway is never a violation",
    ),
    # volumes
    pytest.param(state([A1, B1], [pod("v", volume_terms=((zone_in("a"),),))]), {"v": "a1"}, id="volume in the zone"),
    pytest.param(
        state([A1, A2, B1], [pod("v", volume_terms=((zone_in("b"), host_in("a1")),))]),
        {"v": "a1"},
        id="one of a volume's terms suffices",
    ),
    pytest.param(
        state([A1, A2], [pod("v", volume_terms=((zone_in("a"),), (host_in("a2"),)))]),
        {"v": "a2"},
        id="every volume's terms hold",
    ),
    pytest.param(
        state([A1], [pod("v", volume_problem="node(s) had volume node affinity conflict")]),
        {},
        id="a pod with a volume problem stays unplaced",
    ),
    # maximality with the rules
    pytest.param(
        state([A1], [pod("r", on="a1", labels=DB), pod("w", pod_anti_affinity=(ANTI_DB,))]),
        {},
        id="left unplaced: anti-affinity forbids the only node",
    ),
    pytest.param(
        state([node("a1", "a", pods=1), node("b1", "b", pods=1)], [web("w1"), web("w2")]),
        {"w1": "a1"},
        id="left unplaced: it could only be a second seed",
    ),
    pytest.param(
        state([A1, node("b1", "b", pods=1)], [pod("r1", on="a1", labels=WEB), pod("full", on="b1"), spreading("w")]),
        {},
        id="left unplaced: the only node with room would break the skew",
    ),
    pytest.param(
        state([A1], [pod("v", volume_terms=((zone_in("b"),),))]),
        {},
        id="left unplaced: no node matches its volume",
    ),
]


@pytest.mark.parametrize(("c", "placements"), VALID)
def test_accepts(c: Cluster, placements: dict[str, str]) -> None:
    assert check(c, placements) == []


# --- rejected -----------------------------------------------------------------------------------

INVALID = [
    # required affinity
    pytest.param(
        state([A1, B1], [web("w1"), web("w2")]),
        {"w1": "a1", "w2": "b1"},
        "only one pod of its self-affine group may start a domain",
        id="two seeds in different zones",
    ),
    pytest.param(
        state([A1, B1, C1], [pod("r", on="c1", labels=WEB), web("w1")]),
        {"w1": "a1"},
        "a running pod matches its terms",
        id="no seed when a running pod matches the terms",
    ),
    pytest.param(
        state([A1, B1], [pod("db", labels=WEB), to_web("client")]),
        {"db": "b1", "client": "a1"},
        "default/client on a1: required pod affinity: no matching pod in its domain zone=a",
        id="the only provider is in another zone",
    ),
    pytest.param(
        state([A1, B1], [to_web("client")]),
        {"client": "a1"},
        "it does not match its own terms",
        id="no provider and the pod does not match its own terms",
    ),
    pytest.param(
        state(
            [A1, A2],
            [
                pod("r1", on="a2", labels=WEB),
                pod("r2", on="a2", labels={"tier": "cache"}),
                to_web("client", pod_affinity=(term(selector=sel(**WEB)), term(selector=sel(tier="cache")))),
            ],
        ),
        {"client": "a1"},
        "no matching pod in its domain zone=a",
        id="providers must match all terms, not one each",
    ),
    pytest.param(
        state(
            [A1, Node(name="k1", labels={HOST: "k1", "rack": "1"})],
            [pod("r", on="a1", labels=WEB), to_web("client", pod_affinity=(term("rack", sel(**WEB)),))],
        ),
        {"client": "a1"},
        "default/client on a1: node has no label rack",
        id="node missing the affinity topology key",
    ),
    # required anti-affinity
    pytest.param(
        state([A1, A2, B1], [pod("r", on="a1", labels=DB, pod_anti_affinity=(term(selector=sel(**WEB)),)), web("w")]),
        {"w": "a2"},
        "default/w on a2: the required pod anti-affinity of running pod default/r on a1 matches it",
        id="symmetry: a running pod's term repels the incoming pod it matches",
    ),
    pytest.param(
        state([A1, A2, B1], [pod("r", on="a1", labels=DB), pod("w", pod_anti_affinity=(ANTI_DB,))]),
        {"w": "a2"},
        "default/w on a2: required pod anti-affinity term matches running pod default/r on a1",
        id="incoming term matches a running pod in its zone",
    ),
    pytest.param(
        state([A1, A2], [pod(n, labels=WEB, pod_anti_affinity=(ANTI_WEB_HOST,)) for n in ("w1", "w2")]),
        {"w1": "a1", "w2": "a1"},
        "matches batch pod",
        id="two batch pods repelling per host on one host",
    ),
    pytest.param(
        state([A1, A2], [pod("w1", labels=WEB), pod("w2", pod_anti_affinity=(term(selector=sel(**WEB)),))]),
        {"w1": "a1", "w2": "a2"},
        "default/w2 on a2: required pod anti-affinity term matches batch pod default/w1 on a1",
        id="a batch pod's term against another batch pod without terms",
    ),
    pytest.param(
        state([A1, A2], [OTHER_NS_DB, pod("w", pod_anti_affinity=(term(selector=sel(**DB), namespaces=("other",)),))]),
        {"w": "a2"},
        "running pod other/r",
        id="anti-affinity naming another namespace",
    ),
    pytest.param(
        state(
            [A1, A2],
            [OTHER_NS_DB, pod("w", pod_anti_affinity=(term(selector=sel(**DB), namespace_selector=LabelSelector()),))],
        ),
        {"w": "a2"},
        "running pod other/r",
        id="an empty namespaceSelector selects every namespace",
    ),
    pytest.param(
        state(
            [A1, A2],
            [OTHER_NS_DB, pod("w", pod_anti_affinity=(term(selector=sel(**DB), namespace_selector=sel(team="x")),))],
            {"other": {"team": "x"}},
        ),
        {"w": "a2"},
        "running pod other/r",
        id="namespaceSelector matching the namespace's labels",
    ),
    pytest.param(
        state(
            [A1, A2],
            [
                OTHER_NS_DB,
                pod(
                    "w",
                    pod_anti_affinity=(
                        term(selector=sel(**DB), namespace_selector=sel(**{"kubernetes.io/metadata.name": "other"})),
                    ),
                ),
            ],
        ),
        {"w": "a2"},
        "running pod other/r",
        id="a namespace the cluster does not list still has its metadata.name label",
    ),
    # topology spread
    pytest.param(
        state([A1, B1], [spreading("w1"), spreading("w2"), spreading("w3")]),
        {"w1": "a1", "w2": "a1", "w3": "a1"},
        "topology spread on zone (maxSkew 1) violated: 3 matching pods in zone=a, minimum 0 over 2 domain(s)",
        id="all in one zone",
    ),
    pytest.param(
        state([A1, B1, C1], [pod("r1", on="a1", labels=WEB), pod("r2", on="b1", labels=WEB), spreading("w")]),
        {"w": "a1"},
        "2 matching pods in zone=a, minimum 0 over 3 domain(s)",
        id="an empty zone makes the minimum 0",
    ),
    pytest.param(
        state(
            [A1, B1],
            [
                pod("r1", on="a1", labels=WEB),
                pod("r2", on="b1", labels=WEB),
                spreading("w", constraint=spread(sel(**WEB), min_domains=3)),
            ],
        ),
        {"w": "a1"},
        "minimum 0 (fewer than minDomains 3) over 2 domain(s)",
        id="fewer zones than minDomains makes the minimum 0",
    ),
    pytest.param(
        state(
            [A1, B1],
            [
                pod("r1", on="a1", labels=WEB),
                spreading(
                    "w", node_selector={HOST: "a1"}, constraint=spread(sel(**WEB), node_affinity_policy="Ignore")
                ),
            ],
        ),
        {"w": "a1"},
        "2 matching pods in zone=a, minimum 0 over 2 domain(s)",
        id="nodeAffinityPolicy Ignore: a zone the pod may not use still counts",
    ),
    pytest.param(
        state([A1, node("b1", "b", taints=[DEDICATED])], [pod("r1", on="a1", labels=WEB), spreading("w")]),
        {"w": "a1"},
        "2 matching pods in zone=a, minimum 0 over 2 domain(s)",
        id="nodeTaintsPolicy Ignore (default): a tainted zone still counts",
    ),
    pytest.param(
        state(
            [A1, node("b1", "b", taints=[DEDICATED])],
            [
                pod("r1", on="a1", labels=WEB),
                spreading(
                    "w",
                    constraint=spread(sel(**WEB), node_taints_policy="Honor"),
                    tolerations=(Toleration(key="dedicated", operator="Exists"),),
                ),
            ],
        ),
        {"w": "a1"},
        "2 matching pods in zone=a, minimum 0 over 2 domain(s)",
        id="nodeTaintsPolicy Honor: a tolerated taint keeps the zone",
    ),
    pytest.param(
        state([A1, B1], [pod("r1", on="a1", labels=WEB), spreading("w")]),
        {"w": "a1"},
        "2 matching pods in zone=a",
        id="a running pod that is not terminating counts",
    ),
    pytest.param(
        state([A1, node("nz")], [spreading("w")]),
        {"w": "nz"},
        "default/w on nz: node has no label zone (topologyKey of its topology spread constraint)",
        id="node missing the spread topology key",
    ),
    pytest.param(
        state([A1, B1], [*(pod(f"r{i}", on="a1", labels=WEB) for i in range(3)), spreading("w")]),
        {"w": "a1"},
        "4 matching pods in zone=a",
        id="running pods over the skew: the batch pod must not add to the high zone",
    ),
    # volumes
    pytest.param(
        state([A1, B1], [pod("v", volume_terms=((zone_in("a"),),))]),
        {"v": "b1"},
        "default/v on b1: node does not match the node affinity of bound volume 1 of 1",
        id="volume in another zone",
    ),
    pytest.param(
        state([A1, A2], [pod("v", volume_terms=((zone_in("a"),), (host_in("a2"),)))]),
        {"v": "a1"},
        "bound volume 2 of 2",
        id="one volume of two does not match",
    ),
    pytest.param(
        state(
            [A1, B1],
            [
                pod(
                    "v",
                    node_selector={ZONE: "z"},
                    annotations={"placer.io/when-no-node-matches": "ignore-affinity"},
                    volume_terms=((zone_in("b"),),),
                )
            ],
        ),
        {"v": "a1"},
        "bound volume 1 of 1",
        id="weak binding never drops volume terms",
    ),
    pytest.param(
        state([A1], [pod("v", volume_problem="node(s) had volume node affinity conflict")]),
        {"v": "a1"},
        "its volumes fit no node: node(s) had volume node affinity conflict",
        id="a pod with a volume problem placed",
    ),
    # maximality with the rules
    pytest.param(
        state([A1, B1], [pod("r", on="a1", labels=DB), pod("w", pod_anti_affinity=(ANTI_DB,))]),
        {},
        "default/w: left unplaced although it fits on node b1",
        id="left unplaced although another zone is free of the repelled pod",
    ),
    pytest.param(
        state([A1], [pod("low", labels=DB), pod("w", priority=5, pod_anti_affinity=(ANTI_DB,))]),
        {"low": "a1"},
        "in place of lower-key pods default/low",
        id="a lower-key pod's labels keep a higher-key pod out",
    ),
]


@pytest.mark.parametrize(("c", "placements", "fragment"), INVALID)
def test_rejects(c: Cluster, placements: dict[str, str], fragment: str) -> None:
    violations = check(c, placements)
    assert any(fragment in v for v in violations), violations


def test_the_pair_rules_name_each_offender_once_per_term() -> None:
    c = state([A1, A2], [pod(n, labels=WEB, pod_anti_affinity=(ANTI_WEB_HOST,)) for n in ("w1", "w2")])
    violations = check(c, {"default/w1": "a1", "default/w2": "a1"})
    assert sorted(violations) == [
        "default/w1 on a1: required pod anti-affinity term matches batch pod default/w2 on a1 in the same domain "
        f"{HOST}=a1",
        "default/w2 on a1: required pod anti-affinity term matches batch pod default/w1 on a1 in the same domain "
        f"{HOST}=a1",
    ]


def test_two_seeds_one_may_start_the_other_is_refused() -> None:
    # Either pod may come first and start its zone; the other then has no provider in its own.
    violations = check(state([A1, B1], [web("w1"), web("w2")]), {"default/w1": "a1", "default/w2": "b1"})
    assert len(violations) == 1
    assert "only one pod of its self-affine group may start a domain" in violations[0]


def test_min_domains_met_keeps_the_real_minimum() -> None:
    pods = [pod("r1", on="a1", labels=WEB), pod("r2", on="b1", labels=WEB)]
    two = state([A1, B1], [*pods, spreading("w", constraint=spread(sel(**WEB), min_domains=2))])
    three = state([A1, B1], [*pods, spreading("w", constraint=spread(sel(**WEB), min_domains=3))])
    assert check(two, {"default/w": "a1"}) == []
    assert check(three, {"default/w": "a1"}) != []


# --- plans: the final state after evictions -----------------------------------------------------


def preemption(*extra: Pod, job: Mapping[str, Any] | None = None, web_zone: str = "a", b_cpu: int = 0) -> Cluster:
    """Node a (zone a, 2 cpu) runs job (Never tier, 2 cpu); web (2 cpu, app=web) is pending;
    node b (zone ``web_zone``) has ``b_cpu`` millicores."""
    a = Node(name="a", labels={ZONE: "a"}, allocatable={"cpu": 2000})
    b = Node(name="b", labels={ZONE: web_zone}, allocatable={"cpu": b_cpu})
    job_pod = pod("job", on="a", requests={"cpu": 2000}, restart_policy="Never", **(job or {}))
    return state([a, b], [job_pod, pod("web", labels=WEB, requests={"cpu": 2000}), *extra])


PREEMPT_PLAN = Result(
    placements=[Placement(pod="default/web", node="a")],
    evictions=[Eviction(pod="default/job", node="a", kind="preempt", for_=["default/web"])],
    steps=[
        Step(id=1, op="evict", pod="default/job", node="a"),
        Step(id=2, op="await-gone", pod="default/job", node="a", after=[1]),
        Step(id=3, op="bind", pod="default/web", node="a", after=[2]),
    ],
)
REPELS_WEB = (term(selector=sel(**WEB)),)


def test_plan_final_state_keeps_running_anti_affinity() -> None:
    repeller = pod("r", on="b", pod_anti_affinity=REPELS_WEB)
    violations = validate_plan(preemption(repeller), PREEMPT_PLAN)
    assert any(
        "default/web on a: the required pod anti-affinity of running pod default/r on b" in v for v in violations
    )
    assert validate_plan(preemption(repeller, web_zone="b"), PREEMPT_PLAN) == []


def test_plan_must_beat_an_answer_without_evictions_that_keeps_the_rules() -> None:
    # b has room for web, but a pod there repels it: without evictions web goes nowhere, so the
    # preemption improves on that; with a harmless pod on b it does not.
    assert (
        validate_plan(
            preemption(pod("r", on="b", pod_anti_affinity=REPELS_WEB), web_zone="b", b_cpu=2000), PREEMPT_PLAN
        )
        == []
    )
    violations = validate_plan(preemption(pod("r", on="b"), web_zone="b", b_cpu=2000), PREEMPT_PLAN)
    assert any("does not strictly improve" in v for v in violations), violations


def test_plan_evicted_pod_no_longer_repels() -> None:
    assert validate_plan(preemption(job={"pod_anti_affinity": REPELS_WEB}), PREEMPT_PLAN) == []


def moving(b_zone: str) -> Cluster:
    """Node a (zone a, 2 cpu) runs x (2 cpu, ReplicaSet web of placer, anti-affine to app=big per
    zone); node b (zone ``b_zone``, 2 cpu) is empty; big (2 cpu, app=big) must run on a."""
    a = Node(name="a", labels={ZONE: "a", HOST: "a"}, allocatable={"cpu": 2000})
    b = Node(name="b", labels={ZONE: b_zone, HOST: "b"}, allocatable={"cpu": 2000})
    x = pod(
        "x",
        on="a",
        requests={"cpu": 2000},
        owner=Owner(kind="ReplicaSet", name="web"),
        pod_anti_affinity=(term(selector=sel(app="big")),),
    )
    big = pod("big", labels={"app": "big"}, requests={"cpu": 2000}, node_selector={HOST: "a"})
    return state([a, b], [x, big]).model_copy(
        update={"replicasets": (ReplicaSet(name="web", scheduler_name="placer"),)}
    )


MOVE_PLAN = Result(
    placements=[
        Placement(pod="default/big", node="a"),
        Placement(pod=None, replaces="default/x", owner="ReplicaSet/default/web", node="b", kind="replacement"),
    ],
    evictions=[Eviction(pod="default/x", node="a", kind="move", to="b", for_=["default/big"])],
    steps=[
        Step(id=1, op="evict", pod="default/x", node="a"),
        Step(id=2, op="await-gone", pod="default/x", node="a", after=[1]),
        Step(id=3, op="bind", pod="default/big", node="a", after=[2]),
        Step(id=4, op="bind", pod=None, replaces="default/x", node="b", after=[2]),
    ],
)


def test_plan_replacement_carries_the_moved_pods_anti_affinity() -> None:
    assert validate_plan(moving("b"), MOVE_PLAN) == []
    violations = validate_plan(moving("a"), MOVE_PLAN)
    assert any(
        v.startswith("default/x~replacement on b: required pod anti-affinity term matches batch pod default/big on a")
        for v in violations
    ), violations


def test_plan_binds_respect_volume_terms() -> None:
    c = preemption()
    c = c.model_copy(
        update={
            "pods": tuple(
                p.model_copy(update={"volume_terms": ((zone_in("b"),),)}) if p.name == "web" else p for p in c.pods
            )
        }
    )
    violations = validate_plan(c, PREEMPT_PLAN)
    assert "step 3 (bind default/web on a): node does not match the node affinity of bound volume 1 of 1" in violations


# --- the building blocks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("constraint", "pod_fields", "target", "expected"),
    [
        pytest.param(spread(), {}, A1, True, id="a node with the key"),
        pytest.param(spread(), {}, node("nz"), False, id="a node without the key"),
        pytest.param(
            spread(),
            {"spread": (spread(), spread(key="rack", when_unsatisfiable="DoNotSchedule"))},
            A1,
            False,
            id="every DoNotSchedule key of the pod is needed",
        ),
        pytest.param(
            spread(),
            {"spread": (spread(), spread(key="rack", when_unsatisfiable="ScheduleAnyway"))},
            A1,
            True,
            id="ScheduleAnyway keys are not needed",
        ),
        pytest.param(spread(), {"node_selector": {ZONE: "b"}}, A1, False, id="Honor: nodeSelector excludes"),
        pytest.param(
            spread(node_affinity_policy="Ignore"), {"node_selector": {ZONE: "b"}}, A1, True, id="Ignore: it does not"
        ),
        pytest.param(
            spread(), {"required_terms": (zone_in("b"),)}, A1, False, id="Honor: required node affinity excludes"
        ),
        pytest.param(spread(), {}, node("t", "a", taints=[DEDICATED]), True, id="taints Ignore by default"),
        pytest.param(
            spread(node_taints_policy="Honor"), {}, node("t", "a", taints=[DEDICATED]), False, id="taints Honor"
        ),
        pytest.param(
            spread(node_taints_policy="Honor"),
            {},
            node("t", "a", taints=[Taint(key="soft", effect="PreferNoSchedule")]),
            True,
            id="taints Honor: PreferNoSchedule does not exclude",
        ),
    ],
)
def test_spread_node_eligibility(
    constraint: SpreadConstraint, pod_fields: dict[str, Any], target: Node, expected: bool
) -> None:
    owner = pod("w", **({"spread": (constraint,)} | pod_fields))
    assert spread_node_eligible(owner, constraint, target) is expected


def test_namespace_labels_fall_back_to_the_name_label() -> None:
    assert namespace_labels({}, "ops") == {"kubernetes.io/metadata.name": "ops"}
    assert namespace_labels({"ops": {"team": "x"}}, "ops") == {"team": "x"}


@pytest.mark.parametrize(
    ("t", "target", "expected"),
    [
        pytest.param(term(selector=sel(**DB)), pod("q", labels=DB), True, id="own namespace, labels match"),
        pytest.param(term(selector=sel(**DB)), pod("q", labels=DB, namespace="x"), False, id="other namespace"),
        pytest.param(term(selector=None), pod("q", labels=DB), False, id="null selector"),
        pytest.param(term(selector=LabelSelector()), pod("q"), True, id="empty selector matches every pod"),
        pytest.param(
            term(
                selector=LabelSelector(
                    match_expressions=(LabelSelectorRequirement(key="app", operator="NotIn", values=("db",)),)
                )
            ),
            pod("q"),
            True,
            id="NotIn holds when the key is absent",
        ),
        pytest.param(
            term(selector=sel(**DB), namespaces=(), namespace_selector=None),
            pod("q", labels=DB),
            False,
            id="no namespaces at all selects none",
        ),
    ],
)
def test_term_matching(t: PodAffinityTerm, target: Pod, expected: bool) -> None:
    assert term_matches_pod(t, target, {}) is expected


def test_volume_problems_lists_each_unmatched_volume() -> None:
    v = pod("v", volume_terms=((zone_in("b"),), (host_in("a1"),), (zone_in("c"),)))
    assert volume_problems(v, A1) == [
        "node does not match the node affinity of bound volume 1 of 3",
        "node does not match the node affinity of bound volume 3 of 3",
    ]


def test_pdb_selector_matching_still_available() -> None:
    assert label_selector_matches(sel(**DB), DB | {"x": "y"})
    assert not label_selector_matches(None, DB)


# --- the maximality question: quick answers against the full check ------------------------------


def _random_case(seed: int) -> tuple[TopologyRules, list[Pod], list[tuple[Pod, str]], list[Node]]:
    """A small random cluster with random terms and spread constraints, a random partial placement."""
    r = random.Random(seed)
    nodes = []
    for i in range(r.randint(2, 6)):
        labels = {HOST: f"n{i}"} | ({ZONE: r.choice("abc")} if r.random() < 0.85 else {})
        labels |= {"pool": "x"} if r.random() < 0.3 else {}
        nodes.append(Node(name=f"n{i}", labels=labels, taints=(DEDICATED,) if r.random() < 0.2 else ()))

    def a_term() -> PodAffinityTerm:
        spaces = ("default",) if r.random() < 0.8 else ("default", "o")
        return PodAffinityTerm(topology_key=r.choice([ZONE, HOST]), selector=sel(app=r.choice("wd")), namespaces=spaces)

    def a_pod(name: str, *, running: bool) -> Pod:
        fields: dict[str, Any] = {"namespace": r.choice(["default", "default", "o"]), "labels": {"app": r.choice("wd")}}
        if r.random() < 0.3:
            fields["pod_anti_affinity"] = (a_term(),)
        if r.random() < 0.25:
            fields["pod_affinity"] = tuple(a_term() for _ in range(r.randint(1, 2)))
        if r.random() < 0.35:
            policies = {
                "node_affinity_policy": r.choice(["Honor", "Ignore"]),
                "node_taints_policy": r.choice(["Honor", "Ignore"]),
            }
            c = spread(
                sel(app=r.choice("wd")),
                r.choice([ZONE, HOST]),
                max_skew=r.randint(1, 2),
                min_domains=r.choice([None, 3]),
                **policies,
            )
            fields["spread"] = (c,)
        if r.random() < 0.2:
            fields["node_selector"] = {"pool": "x"}
        if running:
            fields |= {"terminating": r.random() < 0.1}
            return pod(name, on=r.choice(nodes).name, **fields)
        return pod(name, **fields)

    running = [a_pod(f"r{i}", running=True) for i in range(r.randint(0, 5))]
    batch = [a_pod(f"p{i}", running=False) for i in range(r.randint(1, 7))]
    rules = TopologyRules(state(nodes, [*running, *batch]), running, spread_node_eligible)
    placed = [(p, r.choice(nodes).name) for p in batch if r.random() < 0.6]
    return rules, batch, placed, nodes


@pytest.mark.parametrize("first", range(0, 1500, 250))
def test_quick_fit_answers_agree_with_the_full_check(first: int) -> None:
    # TopologyState.allows answers from the pod's own rules and the pods the change touches; the
    # definition is "the changed state has no violation the state lacks", checked here in full.
    checked = 0
    for seed in range(first, first + 250):
        rules, batch, placed, nodes = _random_case(seed)
        r = random.Random(-seed)
        topology = TopologyState(rules, placed)
        before = {v.what for v in rules.lines(placed)}
        where = {p.key: n for p, n in placed}
        for p in batch:
            others = [q for q, _ in placed if q.key != p.key]
            for n in nodes:
                if n.name == where.get(p.key):
                    continue
                without = r.sample(others, min(len(others), r.randint(0, 2)))
                gone = {q.key for q in without} | {p.key}
                changed = [(q, m) for q, m in placed if q.key not in gone] + [(p, n.name)]
                expected = all(v.what in before for v in rules.lines(changed))
                assert topology.allows(p, n.name, without=without) is expected, (seed, p.key, n.name, without)
                checked += 1
    assert checked > 1000
