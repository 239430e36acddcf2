"""Table tests of ``validate_plan``: it accepts valid global plans (hand-written ones and the
planner's answers on the shipped infeasible-batch fixtures) and catches each kind of violation
(who may be evicted, how and for whom; budgets and caps; step order and room at every bind;
the final state).

Plans are written by hand as ``Result`` objects on small native-schema clusters: a node ``a``
of 2 cpu full of a lower-key pod ``job`` and a pending ``web`` that needs its room (a
preemption), or a pod ``x`` of a ReplicaSet of placer that must leave node ``a`` for ``big``
(a move to node ``b``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support import cluster, node, pod

from placer.check import load_expectations
from placer.inputs import load_cluster, parse_cluster
from placer.models import Cluster, Config, Eviction, Placement, Result, Step
from placer.service import SolveOptions, solve_cluster
from placer.validate import hard_violations, validate_plan

FIXTURES = Path(__file__).parent / "fixtures" / "infeasible"
DETERMINISTIC = {"workers": 1, "deterministic": True, "timeLimit": 5, "seed": 0}
RS = {"kind": "ReplicaSet", "name": "web"}
ZONE_A = {"zone": "a"}
PDB = {"name": "jobs", "selector": {"matchLabels": {"app": "job"}}}


# --- building plans ----------------------------------------------------------------------------


def placed(name: str, where: str) -> Placement:
    return Placement(pod=f"default/{name}", node=where)


def replacement(victim: str, where: str, owner: str = "ReplicaSet/default/web") -> Placement:
    return Placement(pod=None, replaces=f"default/{victim}", owner=owner, node=where, kind="replacement")


def preempt(victim: str, at: str, *preemptors: str) -> Eviction:
    return Eviction(pod=f"default/{victim}", node=at, kind="preempt", for_=[f"default/{p}" for p in preemptors])


def move(victim: str, at: str, to: str, *waiting: str) -> Eviction:
    return Eviction(pod=f"default/{victim}", node=at, kind="move", to=to, for_=[f"default/{p}" for p in waiting])


def steps(*specs: tuple[str, str, str, Sequence[int]]) -> list[Step]:
    """(op, pod name or "~name" for the replacement of name, node, after) in order; ids count from 1."""
    out = []
    for i, (op, name, where, after) in enumerate(specs, start=1):
        replacement = name.startswith("~")
        ref = {"pod": None, "replaces": f"default/{name[1:]}"} if replacement else {"pod": f"default/{name}"}
        out.append(Step(id=i, op=op, node=where, after=list(after), **ref))
    return out


def result(placements: list[Placement], evictions: list[Eviction], plan_steps: list[Step]) -> Result:
    return Result(placements=placements, evictions=evictions, steps=plan_steps)


# --- clusters ----------------------------------------------------------------------------------


def preemption(job: dict[str, Any] | None = None, web: dict[str, Any] | None = None, **extra: Any) -> Cluster:
    """Node a (2 cpu) runs job (Never tier, 2 cpu); web (Always tier, 2 cpu) is pending."""
    return cluster(
        [node("a", cpu="2")],
        [
            pod("job", **({"cpu": "2", "node": "a", "restartPolicy": "Never"} | (job or {}))),
            pod("web", **({"cpu": "2"} | (web or {}))),
        ],
        **extra,
    )


PREEMPT = preempt("job", "a", "web")
PREEMPT_STEPS = steps(("evict", "job", "a", []), ("await-gone", "job", "a", [1]), ("bind", "web", "a", [2]))
PREEMPT_PLAN = result([placed("web", "a")], [PREEMPT], PREEMPT_STEPS)


def relaxed() -> Cluster:
    """Node a (zone a, 3 cpu) runs job (Never tier, 2 cpu), node o has 1 cpu; web (2 cpu) and rel
    (1 cpu, zone a or, when that is full, anywhere) are pending: web needs job's room."""
    rel = {"nodeSelector": ZONE_A, "annotations": {"placer.io/when-no-node-fits": "ignore-affinity"}}
    return cluster(
        [node("a", cpu="3", labels=ZONE_A), node("o", cpu="1")],
        [pod("job", cpu="2", node="a", restartPolicy="Never"), pod("web", cpu="2"), pod("rel", cpu="1", **rel)],
    )


def moving(
    x: dict[str, Any] | None = None,
    replica_sets: Any = None,
    b: dict[str, Any] | None = None,
    scheduler: str = "placer",
) -> Cluster:
    """Node a (zone a, 2 cpu) runs x (2 cpu) of ReplicaSet web; b (2 cpu) is empty; big (2 cpu)
    must run in zone a."""
    x_doc = {"owner": RS, **(x or {})}
    return cluster(
        [node("a", cpu="2", labels=ZONE_A), node("b", cpu="2", **(b or {}))],
        [pod("x", cpu="2", node="a", **x_doc), pod("big", cpu="2", nodeSelector=ZONE_A, schedulerName=scheduler)],
        replicaSets=[{"name": "web"}] if replica_sets is None else replica_sets,
    )


MOVE_STEPS = steps(
    ("evict", "x", "a", []),
    ("await-gone", "x", "a", [1]),
    ("bind", "big", "a", [2]),
    ("bind", "~x", "b", [2]),
)
MOVE_PLAN = result([placed("big", "a"), replacement("x", "b")], [move("x", "a", "b", "big")], MOVE_STEPS)


# --- valid plans -------------------------------------------------------------------------------

VALID = [
    pytest.param(preemption(), PREEMPT_PLAN, {}, id="preempt a lower tier for the pod that needs its room"),
    pytest.param(moving(), MOVE_PLAN, {}, id="move a ReplicaSet pod of placer out of the way"),
    pytest.param(
        moving(replica_sets=[{"name": "web", "schedulerName": "custom"}], scheduler="custom"),
        MOVE_PLAN,
        {"scheduler_name": "custom"},
        id="a move for the scheduler name the ReplicaSet names",
    ),
    pytest.param(
        preemption(web={"preemptionPolicy": "Never"}),
        result([], [], []),
        {},
        id="no plan: a pod that may not preempt stays pending",
    ),
    pytest.param(
        cluster(
            [node("a", cpu="3")],
            [pod("job", cpu="2", node="a", restartPolicy="Never"), pod("web", cpu="2"), pod("tiny", cpu="1")],
        ),
        result(
            [placed("web", "a"), placed("tiny", "a")],
            [PREEMPT],
            steps(
                ("evict", "job", "a", []),
                ("bind", "tiny", "a", []),
                ("await-gone", "job", "a", [1]),
                ("bind", "web", "a", [3]),
            ),
        ),
        {},
        id="a bind that fits the room already free need not wait",
    ),
    pytest.param(
        cluster(
            [node("a", cpu="2")],
            [
                pod("job", cpu="2", node="a", restartPolicy="Never"),
                pod("web", cpu="2"),
                pod("vip", cpu="2", priority=5, preemptionPolicy="Never"),
            ],
        ),
        PREEMPT_PLAN,
        {},
        id="a higher key that may not preempt does not outrank the preemptor it would displace",
    ),
    pytest.param(
        preemption(job={"labels": {"app": "job"}}, pdbs=[PDB]),
        result([], [], []),
        {},
        id="a budget allowing no disruption: no plan",
    ),
    pytest.param(
        preemption(job={"annotations": {"placer.io/evictable": "false"}}, web={"priority": 1}),
        PREEMPT_PLAN,
        {},
        id="a strictly higher priority preempts a pod opted out by placer.io/evictable",
    ),
    pytest.param(
        preemption(
            job={"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, "priority": 5},
            web={"priority": 1_000_000},
        ),
        PREEMPT_PLAN,
        {},
        id="a strictly higher priority preempts a pod opted out by safe-to-evict",
    ),
    pytest.param(
        preemption(job={"labels": {"app": "job"}}, pdbs=[PDB | {"disruptionsAllowed": 1}]),
        PREEMPT_PLAN,
        {"max_evictions": 1},
        id="within the budget and max_evictions",
    ),
]


@pytest.mark.parametrize(("state", "answer", "options"), VALID)
def test_accepts_valid_plans(state: Cluster, answer: Result, options: dict[str, Any]) -> None:
    assert validate_plan(state, answer, **options) == []


# --- violations --------------------------------------------------------------------------------


def _mirror(c: Cluster) -> Cluster:
    return c.model_copy(update={"pods": tuple(p.model_copy(update={"mirror": p.name == "job"}) for p in c.pods)})


VIOLATIONS = [
    # steps
    pytest.param(
        preemption(),
        result(
            [placed("web", "a")],
            [PREEMPT],
            steps(("evict", "job", "a", []), ("bind", "web", "a", [1]), ("await-gone", "job", "a", [1])),
        ),
        {},
        "step 2 (bind default/web on a): the node lacks room at that step: insufficient cpu",
        id="bind before the await-gone it needs",
    ),
    pytest.param(
        preemption(),
        result(
            [placed("web", "a")],
            [PREEMPT],
            steps(("evict", "job", "a", []), ("await-gone", "job", "a", [1]), ("bind", "web", "a", [])),
        ),
        {},
        "does not wait for the room it needs",
        id="bind listed after the await-gone but not waiting for it",
    ),
    pytest.param(
        moving(),
        result(
            MOVE_PLAN.placements,
            MOVE_PLAN.evictions,
            steps(
                ("evict", "x", "a", []),
                ("await-gone", "x", "a", [1]),
                ("bind", "big", "a", [2]),
                ("bind", "~x", "b", [1]),
            ),
        ),
        {},
        "binds replacement of default/x before default/x is gone",
        id="replacement bound before its victim is gone",
    ),
    pytest.param(
        preemption(),
        result(
            [placed("web", "a")],
            [PREEMPT],
            steps(("evict", "job", "a", []), ("await-gone", "job", "a", []), ("bind", "web", "a", [2])),
        ),
        {},
        "does not wait for the eviction of default/job",
        id="await-gone not after its evict",
    ),
    pytest.param(
        preemption(),
        result(
            [placed("web", "a")],
            [PREEMPT],
            steps(("evict", "job", "a", []), ("await-gone", "job", "a", [3]), ("bind", "web", "a", [2])),
        ),
        {},
        "cycle",
        id="dependencies in a cycle",
    ),
    pytest.param(
        preemption(),
        result(
            [placed("web", "a")],
            [PREEMPT],
            steps(("bind", "web", "a", [3]), ("evict", "job", "a", []), ("await-gone", "job", "a", [2])),
        ),
        {},
        "waits on step 3, which comes later in the list",
        id="after names a later step",
    ),
    pytest.param(
        preemption(),
        result([placed("web", "a")], [PREEMPT], PREEMPT_STEPS[:2]),
        {},
        "pending placement default/web: 0 bind steps, not 1",
        id="a placement without its bind step",
    ),
    pytest.param(
        preemption(),
        result([placed("web", "a")], [PREEMPT], PREEMPT_STEPS[1:]),
        {},
        "0 evict and 1 await-gone steps",
        id="an eviction without its evict step",
    ),
    pytest.param(
        cluster([node("a", cpu="2"), node("b", cpu="2")], [pod("job", cpu="2", node="a", restartPolicy="Never")]),
        result(
            [],
            [],
            steps(("bind", "web", "b", [])),
        ),
        {},
        "step 1 binds default/web, which the plan does not place",
        id="a bind step without its placement",
    ),
    pytest.param(
        moving(b={"unschedulable": True}),
        MOVE_PLAN,
        {},
        "step 4 (bind replacement of default/x on b): node is cordoned",
        id="replacement bound to a cordoned node",
    ),
    pytest.param(
        moving(x={"nodeSelector": ZONE_A}),
        MOVE_PLAN,
        {},
        "step 4 (bind replacement of default/x on b): node does not match",
        id="replacement bound where its victim's selector does not match",
    ),
    # who may be evicted
    pytest.param(
        preemption(job={"owner": {"kind": "DaemonSet", "name": "agent"}}),
        PREEMPT_PLAN,
        {},
        "never evicted: it is a DaemonSet pod",
        id="evicting a DaemonSet pod",
    ),
    pytest.param(_mirror(preemption()), PREEMPT_PLAN, {}, "never evicted: it is a mirror", id="evicting a mirror pod"),
    pytest.param(
        preemption(job={"annotations": {"placer.io/evictable": "false"}}),
        PREEMPT_PLAN,
        {},
        "opted out: a priority above 0",
        id="preempting a pod opted out by placer.io/evictable for a higher tier of equal priority",
    ),
    pytest.param(
        preemption(job={"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}),
        PREEMPT_PLAN,
        {},
        "opted out: a priority above 0",
        id="preempting a pod opted out by safe-to-evict for a higher tier of equal priority",
    ),
    pytest.param(
        moving(x={"annotations": {"placer.io/evictable": "false"}}),
        MOVE_PLAN,
        {},
        'may not move: it is annotated placer.io/evictable: "false"',
        id="moving a pod opted out by placer.io/evictable",
    ),
    pytest.param(
        moving(x={"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}),
        MOVE_PLAN,
        {},
        "may not move: it is annotated cluster-autoscaler.kubernetes.io/safe-to-evict",
        id="moving a pod opted out by safe-to-evict",
    ),
    pytest.param(
        preemption(job={"annotations": {"placer.io/evictable": "false"}, "priority": 10}, web={"priority": 10}),
        PREEMPT_PLAN,
        {},
        "opted out: a priority above 10",
        id="preempting an opted-out pod for a pod of equal priority and higher tier",
    ),
    pytest.param(
        preemption(
            job={"labels": {"app": "job"}},
            pdbs=[PDB | {"disruptionsAllowed": 1}, {"name": "more", "selector": {}, "disruptionsAllowed": 1}],
        ),
        PREEMPT_PLAN,
        {},
        "covered by 2 PodDisruptionBudgets",
        id="evicting a pod covered by two budgets",
    ),
    pytest.param(
        preemption(job={"hostPorts": [{"port": 80}]}),
        PREEMPT_PLAN,
        {},
        "never evicted: it uses host ports",
        id="evicting a pod with host ports",
    ),
    pytest.param(
        preemption(job={"restartPolicy": "Always"}),
        PREEMPT_PLAN,
        {},
        "no pending pod placed on a may preempt it",
        id="preempting an equal key",
    ),
    pytest.param(
        preemption(job={"restartPolicy": "Always"}),
        PREEMPT_PLAN,
        {"restart_tiers": False},
        "no pending pod placed on a may preempt it",
        id="restart tiers off: equal priorities are equal keys",
    ),
    pytest.param(
        preemption(web={"preemptionPolicy": "Never"}),
        PREEMPT_PLAN,
        {},
        "no pending pod placed on a may preempt it",
        id="preempting for a preemptionPolicy Never pod",
    ),
    pytest.param(
        preemption(),
        result([placed("web", "a")], [preempt("job", "a")], PREEMPT_STEPS),
        {},
        "its 'for' list does not name its preemptor (default/web)",
        id="a preemption that does not name its preemptor",
    ),
    pytest.param(
        cluster(
            [node("a", cpu="2"), node("b", cpu="2")],
            [pod("job", cpu="2", node="a", restartPolicy="Never"), pod("web", cpu="2")],
        ),
        result(
            [placed("web", "b")],
            [preempt("job", "a", "web")],
            steps(("evict", "job", "a", []), ("await-gone", "job", "a", [1]), ("bind", "web", "b", [])),
        ),
        {},
        "it is for default/web, which the plan does not place on a",
        id="a preemption for a pod placed elsewhere",
    ),
    pytest.param(
        moving(x={"owner": None}),
        MOVE_PLAN,
        {},
        "may not move: it is a bare pod",
        id="moving a bare pod",
    ),
    pytest.param(
        moving(replica_sets=[{"name": "web", "schedulerName": "default-scheduler"}]),
        MOVE_PLAN,
        {},
        "may not move: its ReplicaSet default/web is scheduled by 'default-scheduler', not 'placer'",
        id="moving a pod whose ReplicaSet is not placer's",
    ),
    pytest.param(
        moving(replica_sets=[]),
        MOVE_PLAN,
        {},
        "its ReplicaSet default/web is not in the cluster",
        id="moving a pod of an unknown ReplicaSet",
    ),
    pytest.param(
        moving(),
        result([placed("big", "a")], MOVE_PLAN.evictions, MOVE_STEPS[:3]),
        {},
        "move of default/x to b: no replacement placement",
        id="a move without its replacement",
    ),
    pytest.param(
        moving(),
        result([placed("big", "a"), replacement("x", "a")], MOVE_PLAN.evictions, MOVE_STEPS),
        {},
        "replacement of default/x placed on a, but the move sends it to b",
        id="a replacement elsewhere than the move says",
    ),
    # budgets and caps
    pytest.param(
        preemption(job={"labels": {"app": "job"}}, pdbs=[PDB]),
        PREEMPT_PLAN,
        {},
        "PodDisruptionBudget default/jobs allows 0 disruption(s), the plan evicts 1: default/job",
        id="a budget cap exceeded",
    ),
    pytest.param(preemption(), PREEMPT_PLAN, {"max_evictions": 0}, "exceed max_evictions 0", id="max_evictions"),
    # the final state
    pytest.param(
        cluster([node("a", cpu="4")], [pod("job", cpu="2", node="a", restartPolicy="Never"), pod("web", cpu="2")]),
        PREEMPT_PLAN,
        {},
        "does not strictly improve",
        id="an eviction that improves nothing",
    ),
    pytest.param(
        cluster(
            [node("a", cpu="2")],
            [
                pod("job", cpu="2", node="a", restartPolicy="Never"),
                pod("web", cpu="2"),
                pod("vip", cpu="2", priority=5),
            ],
        ),
        PREEMPT_PLAN,
        {},
        "default/vip: left unplaced although it would fit on node a in place of lower-key pods default/web",
        id="a lower key placed while a higher one that could preempt waits",
    ),
    pytest.param(
        cluster(
            [node("a", cpu="2"), node("b", cpu="1")],
            [pod("job", cpu="2", node="a", restartPolicy="Never"), pod("web", cpu="2"), pod("tiny", cpu="1")],
        ),
        PREEMPT_PLAN,
        {},
        "default/tiny: left unplaced although it fits on node b after the plan",
        id="a pod that fits after the plan left unplaced",
    ),
    pytest.param(
        relaxed(),
        result(
            [placed("web", "a"), placed("rel", "o")],
            [PREEMPT],
            [*PREEMPT_STEPS, Step(id=4, op="bind", pod="default/rel", node="o")],
        ),
        {},
        "default/rel on o: placed outside its node affinity (when-no-node-fits: ignore-affinity) although "
        "matching node a has room for it after the plan",
        id="a relaxed-affinity pod off its matching node that has room after the plan",
    ),
]


@pytest.mark.parametrize(("state", "answer", "options", "fragment"), VIOLATIONS)
def test_catches_violation(state: Cluster, answer: Result, options: dict[str, Any], fragment: str) -> None:
    violations = validate_plan(state, answer, **options)
    assert any(fragment in v for v in violations), violations


def test_a_relaxed_pod_beside_its_preemptor_on_the_matching_node_is_valid() -> None:
    answer = result(
        [placed("web", "a"), placed("rel", "a")],
        [PREEMPT],
        [*PREEMPT_STEPS, Step(id=4, op="bind", pod="default/rel", node="a", after=[2])],
    )
    assert validate_plan(relaxed(), answer) == []


def test_without_a_plan_it_is_validate_placements() -> None:
    state = cluster([node("a", cpu="2")], [pod("web", cpu="1"), pod("tiny", cpu="1")])
    assert validate_plan(state, result([placed("web", "a"), placed("tiny", "a")], [], [])) == []
    assert validate_plan(state, result([placed("web", "a")], [], [])) == [
        "default/tiny: left unplaced although it fits on node a"
    ]


# --- the planner's answers -----------------------------------------------------------------------


@pytest.mark.parametrize("fixture", sorted(p.parent for p in FIXTURES.glob("*/expect.yaml")), ids=lambda p: p.name)
def test_the_planner_answers_on_the_shipped_fixtures_are_valid(fixture: Path) -> None:
    """Each fixture solved as ``placer check`` solves it (its options, deterministic solver)."""
    opts = load_expectations(fixture / "expect.yaml").options
    state = load_cluster(next(p for p in sorted(fixture.iterdir()) if p.stem == "cluster"))
    config = Config.model_validate(
        {"strategy": opts.strategy, "priority": {"restartTiers": opts.restart_tiers}, "solver": DETERMINISTIC}
    )
    options = SolveOptions(
        policy=opts.policy,
        batch_size=opts.batch_size,
        config=config,
        evict=not opts.no_evict,
        max_evictions=opts.max_evictions,
    )
    answer = solve_cluster(state, options).result
    violations = validate_plan(
        state,
        answer,
        restart_tiers=opts.restart_tiers,
        scheduler_name=config.scheduler_name,
        max_evictions=opts.max_evictions,
    )
    assert violations == []


def _solve(doc: dict[str, Any] | Cluster, strategy: str = "balance", **options: Any) -> tuple[Cluster, Result]:
    state = doc if isinstance(doc, Cluster) else parse_cluster("test", json.dumps(doc))
    config = Config.model_validate({"strategy": strategy, "solver": DETERMINISTIC})
    return state, solve_cluster(state, SolveOptions(config=config, **options)).result


def test_planner_keeps_relaxed_affinity_pods_on_matching_nodes_with_room() -> None:
    """relaxed(): the plan preempts job for web on a (3 cpu); rel (1 cpu, zone a, when-no-node-fits:
    ignore-affinity) fits on a beside web, yet with strategy spread (or pack) the plan puts it on
    o, outside its affinity."""
    state, answer = _solve(relaxed(), strategy="spread")
    assert [e.pod for e in answer.evictions] == ["default/job"]
    assert validate_plan(state, answer) == []


PORTS = {
    "nodes": [{"name": "a", "allocatable": {"cpu": 4, "memory": "8Gi"}}],
    "pods": [
        {"name": "job", "node": "a", "requests": {"cpu": 3}, "restartPolicy": "Never"},
        {"name": "p1", "requests": {"cpu": 1}, "priority": 10, "hostPorts": [{"port": 80}]},
        {"name": "p2", "requests": {"cpu": 2}, "priority": 10, "hostPorts": [{"port": 80}]},
    ],
}  # node a (4 cpu) runs a Never-tier job of 3 cpu; p1 and p2 (different sizes) share host port 80


def test_regression_the_plan_keeps_host_ports_apart_across_pod_groups() -> None:
    """Found by validate_plan (fixed in the plan model): preempting the job made room for p1 and
    p2 together, and the plan bound both on a, where their host ports clash."""
    state, answer = _solve(PORTS)
    assert ("default/p1", "a") in {(p.pod, p.node) for p in answer.placements}
    assert answer.evictions == []
    assert hard_violations(state, {p.pod: p.node for p in answer.placements if p.pod}) == []


def test_no_plan_is_made_when_nothing_improves() -> None:
    """PORTS: without evictions p1 runs and p2 waits; preempting the job would let only one of
    them run (host port 80), so no plan may improve. The greedy hint (job preempted, p1 and p2
    both on a) looks like an improvement, and a 'plan' with no eviction comes out: bind steps for
    what the first solve already placed. Were the CP-SAT level to time out, the greedy plan itself
    (with its port clash) would be returned."""
    state, answer = _solve(PORTS)
    assert answer.steps == []
    assert validate_plan(state, answer) == []


def test_regression_batched_binds_wait_for_the_room_an_earlier_plan_frees() -> None:
    """Found by validate_plan (fixed in the service): node a (4 cpu) is full of a Never-tier job;
    p1 and p2 (2 cpu each) arrive in batches of one. Batch 1 preempts the job for p1; batch 2
    placed p2 in the rest of the job's room with no step waiting until the job is gone."""
    state, answer = _solve(
        {
            "nodes": [{"name": "a", "allocatable": {"cpu": 4, "memory": "8Gi"}}],
            "pods": [
                {"name": "job", "node": "a", "requests": {"cpu": 4}, "restartPolicy": "Never"},
                {"name": "p1", "requests": {"cpu": 2}, "priority": 10, "creationTimestamp": "2024-01-01T00:00:01Z"},
                {"name": "p2", "requests": {"cpu": 2}, "priority": 10, "creationTimestamp": "2024-01-01T00:00:02Z"},
            ],
        },
        batch_size=1,
    )
    assert [e.pod for e in answer.evictions] == ["default/job"]
    assert validate_plan(state, answer) == []


def test_batched_plans_never_evict_a_replacement_stand_in() -> None:
    """Batches of one: p1 (zone a) needs r's room on n0, so batch 1 moves r (ReplicaSet web of
    placer, Never tier) to n1; p2 (priority 5, zone b) then needs n1's room, but batch 2 must not
    preempt r's replacement: it is still being bound (and its stand-in name is no real pod)."""
    _state, answer = _solve(
        {
            "nodes": [
                {"name": "n0", "labels": {"zone": "a"}, "allocatable": {"cpu": 3, "memory": "8Gi"}},
                {"name": "n1", "labels": {"zone": "b"}, "allocatable": {"cpu": 2, "memory": "8Gi"}},
            ],
            "pods": [
                {"name": "r", "node": "n0", "requests": {"cpu": 1}, "restartPolicy": "Never", "owner": RS},
                {"name": "b", "node": "n0", "requests": {"cpu": 1}, "priority": 9},
                {"name": "p1", "requests": {"cpu": 2}, "priority": 1, "nodeSelector": {"zone": "a"}},
                {"name": "p2", "requests": {"cpu": 2}, "priority": 5, "nodeSelector": {"zone": "b"}},
            ],
            "replicaSets": [{"name": "web"}],
        },
        batch_size=1,
    )
    assert [(e.pod, e.kind) for e in answer.evictions] == [("default/r", "move")]
    assert all("~" not in (st.pod or st.replaces or "") for st in answer.steps)
    # p2 stays Pending: batch 1 took n1's room for r's replacement, which a later batch never evicts.
    assert [u.pod for u in answer.unplaced] == ["default/p2"]
