"""Property tests of the global plan on small random clusters (hypothesis).

a. every answer of the planner passes ``validate_plan`` (which shares no code with the planner);
b. evictions never make it worse: placed-and-still-running pods per key (pending pods placed plus
   running pods not preempted), compared from the highest key down, are at least what the same
   solve reaches without evictions;
c. on tiny instances, a brute force over every way to keep, preempt or move each running pod and
   to place or leave each pending pod, built only from the validator's functions, finds the same
   best vector, and no plan reaching it has fewer victims per key (highest key first), then
   fewer moves, than the planner's.

The clusters mix pods the plan may move (owned by a ReplicaSet of placer), pods it may only
preempt (bare, or of another scheduler's ReplicaSet), pods it may never evict (DaemonSet pods,
opted-out pods, pods with host ports, pods under two budgets), random priorities and restart
tiers, and sometimes a PodDisruptionBudget allowing 0 or 1 disruption. Examples are derandomised
(docs/architecture.md, Determinism); set ``PLACER_PROPERTY_RANDOM=1`` to explore new ones and
``PLACER_PLAN_EXAMPLES=N`` to run more.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from builders import property_settings
from hypothesis import example, given, note
from hypothesis import strategies as st

from placer import validate
from placer.inputs import parse_cluster
from placer.models import Cluster, Config, Pod, Result
from placer.service import SolveOptions, solve_cluster

Json = dict[str, Any]
Key = tuple[int, int]

PROPERTY = property_settings("PLACER_PLAN_EXAMPLES", 40)

NODE_NAMES = ["n0", "n1", "n2"]
ZONES = ["a", "b"]
# ReplicaSets: two of placer (their pods may move), one of another scheduler (only preempted).
REPLICA_SETS: list[Json] = [
    {"name": "rs-a"},
    {"name": "rs-b"},
    {"name": "rs-other", "schedulerName": "default-scheduler"},
]
OWNERS: list[Json | None] = [
    {"kind": "ReplicaSet", "name": "rs-a"},
    {"kind": "ReplicaSet", "name": "rs-a"},
    {"kind": "ReplicaSet", "name": "rs-b"},
    {"kind": "ReplicaSet", "name": "rs-other"},
    {"kind": "DaemonSet", "name": "agent"},
    None,
    None,
]
RELAXED = {"placer.io/when-no-node-fits": "ignore-affinity"}


# --- the vocabulary of random clusters ---------------------------------------------------------


def _one_in(n: int, draw: st.DrawFn) -> bool:
    """True about once in ``n`` draws; False (the simple case) is what hypothesis shrinks to."""
    return bool(draw(st.sampled_from([False] * (n // 2) + [True] + [False] * (n - n // 2 - 1))))


@st.composite
def node_docs(draw: st.DrawFn, index: int) -> Json:
    cpu, memory = draw(st.sampled_from([2, 3, 4, 4, 6])), draw(st.sampled_from(["4Gi", "4Gi", "2Gi"]))
    allocatable: Json = {"cpu": cpu, "memory": memory}
    if _one_in(4, draw):
        allocatable["pods"] = draw(st.integers(1, 3))
    doc: Json = {"name": NODE_NAMES[index], "labels": {"zone": draw(st.sampled_from(ZONES))}}
    doc["allocatable"] = allocatable
    if _one_in(8, draw):
        doc["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    if _one_in(10, draw):
        doc["unschedulable"] = True
    return doc


def _requests(draw: st.DrawFn, cpu: Sequence[int]) -> Json:
    out: Json = {"cpu": draw(st.sampled_from(cpu))}
    if _one_in(3, draw):
        out["memory"] = draw(st.sampled_from(["1Gi", "2Gi"]))
    return out


@st.composite
def running_docs(draw: st.DrawFn, index: int, nodes: int, movers: bool) -> Json:
    """A running pod; ``movers``: most likely a small ReplicaSet pod of placer of the top key
    (pending pods cannot preempt it, a plan can only move it: fragmentation)."""
    owner = draw(st.sampled_from(OWNERS[:3] if movers and not _one_in(4, draw) else OWNERS))
    top = movers and not _one_in(4, draw)
    doc: Json = {
        "name": f"r{index}",
        "node": NODE_NAMES[draw(st.integers(0, nodes - 1))],
        "requests": _requests(draw, [1] if movers else [1, 2]),
        "priority": 2 if top else draw(st.sampled_from([0, 0, 1, 2])),
        "restartPolicy": "Always" if top else draw(st.sampled_from(["Always", "OnFailure", "Never"])),
        "labels": {"app": owner["name"] if owner else "bare"},
    }
    if owner is not None:
        doc["owner"] = owner
    if _one_in(5, draw):
        doc["nodeSelector"] = {"zone": draw(st.sampled_from(ZONES))}
    if _one_in(10, draw):
        doc["annotations"] = {
            draw(st.sampled_from(["placer.io/evictable", "cluster-autoscaler.kubernetes.io/safe-to-evict"])): "false"
        }
    if _one_in(10, draw):
        doc["hostPorts"] = [{"port": 80}]
    if _one_in(10, draw):
        doc["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return doc


@st.composite
def pending_docs(draw: st.DrawFn, index: int) -> Json:
    doc: Json = {
        "name": f"p{index}",
        "creationTimestamp": f"2024-01-01T00:00:{index:02d}Z",
        "requests": _requests(draw, [1, 2, 2, 3]),
        "priority": draw(st.sampled_from([0, 1, 2, 2])),
        "restartPolicy": draw(st.sampled_from(["Always", "Always", "OnFailure", "Never"])),
    }
    if _one_in(6, draw):
        doc["preemptionPolicy"] = "Never"
    if _one_in(4, draw):
        doc["nodeSelector"] = {"zone": draw(st.sampled_from(ZONES))}
        if draw(st.booleans()):
            doc["annotations"] = dict(RELAXED)
    if _one_in(6, draw):
        # Port 80 clashes with running pods only: pending pods of different groups sharing a host
        # port make the planner's greedy hint count an infeasible plan as an improvement (see
        # test_validate_plan.py, test_no_plan_is_made_when_nothing_improves, xfail).
        doc["hostPorts"] = [{"port": 80 if index == 0 else 8000 + index}]
    if _one_in(8, draw):
        doc["tolerations"] = [{"operator": "Exists"}]
    return doc


@st.composite
def clusters(draw: st.DrawFn, max_nodes: int = 3, max_running: int = 6, max_pending: int = 4) -> str:
    """A native-schema cluster document (JSON text); some pending pods are replicas of the
    previous one (the planner groups identical pods)."""
    n = draw(st.integers(1, max_nodes))
    nodes = [draw(node_docs(i)) for i in range(n)]
    movers = draw(st.booleans())
    running = [draw(running_docs(i, n, movers)) for i in range(draw(st.integers(1, max_running)))]
    running = _fitting(nodes, running)
    pending: list[Json] = []
    for i in range(draw(st.integers(1, max_pending))):
        doc = draw(pending_docs(i))
        if pending and _one_in(4, draw):
            doc = dict(pending[-1], name=doc["name"], creationTimestamp=doc["creationTimestamp"])
            doc.pop("hostPorts", None)
        pending.append(doc)
    cluster: Json = {"nodes": nodes, "pods": running + pending, "replicaSets": REPLICA_SETS}
    if _one_in(3, draw):
        app = draw(st.sampled_from(["rs-a", "rs-b", "bare"]))
        cluster["pdbs"] = [
            {"name": "budget", "selector": {"matchLabels": {"app": app}}, "disruptionsAllowed": draw(st.integers(0, 1))}
        ]
        if _one_in(5, draw):  # a second budget over the same pods: they may not be evicted
            cluster["pdbs"].append(
                {"name": "twice", "selector": {"matchLabels": {"app": app}}, "disruptionsAllowed": 1}
            )
    return json.dumps(cluster, indent=1)


def _gi(quantity: str | int) -> int:
    return int(str(quantity).removesuffix("Gi"))


def _fitting(nodes: list[Json], running: list[Json]) -> list[Json]:
    """The running pods that fit their node in turn (the others are left out): a consistent dump."""
    room = {
        n["name"]: [n["allocatable"]["cpu"], _gi(n["allocatable"]["memory"]), n["allocatable"].get("pods", 110)]
        for n in nodes
    }
    out = []
    for doc in running:
        need = [doc["requests"]["cpu"], _gi(doc["requests"].get("memory", 0)), 1]
        free = room[doc["node"]]
        if all(f >= q for f, q in zip(free, need, strict=True)):
            room[doc["node"]] = [f - q for f, q in zip(free, need, strict=True)]
            out.append(doc)
    return out


def _doc(nodes: dict[str, int], running: list[tuple[str, str, int, Json]], pending: list[Json], **extra: Any) -> str:
    pods = [
        {"name": name, "node": at, "requests": {"cpu": cpu}, "priority": 2, **more} for name, at, cpu, more in running
    ]
    pods += [{"name": f"p{i}", "creationTimestamp": f"2024-01-01T00:00:{i:02d}Z", **p} for i, p in enumerate(pending)]
    node_docs = [{"name": n, "allocatable": {"cpu": cpu, "memory": "4Gi"}} for n, cpu in nodes.items()]
    return json.dumps({"nodes": node_docs, "pods": pods, "replicaSets": REPLICA_SETS, **extra})


RS_A, RS_B = {"owner": {"kind": "ReplicaSet", "name": "rs-a"}}, {"owner": {"kind": "ReplicaSet", "name": "rs-b"}}
LOW = {"priority": 0, "restartPolicy": "Never"}
# Examples every run checks besides the generated ones: plans that need moves.
FRAGMENTED = _doc(
    {"n0": 4, "n1": 4},
    [("r0", "n0", 1, RS_A), ("r1", "n0", 2, RS_B), ("r2", "n1", 2, RS_A), ("r3", "n1", 1, {})],
    [{"requests": {"cpu": 2}, "priority": 2}],
)  # 1 cpu free on each node; p0 (2 cpu, the top key: it preempts nobody) fits once r0 moves to n1
MOVE_OR_PREEMPT = _doc(
    {"n0": 2, "n1": 2},
    [("r0", "n0", 1, RS_A | LOW), ("r1", "n0", 1, LOW), ("r2", "n1", 1, {})],
    [{"requests": {"cpu": 2}, "priority": 1}],
)  # p0 needs n0: preempting r0 and r1 (two victims) or moving r0 to n1 and preempting r1 (one)
BUDGET_BLOCKS_THE_MOVE = _doc(
    {"n0": 4, "n1": 4},
    [("r0", "n0", 1, RS_A | {"labels": {"app": "rs-a"}}), ("r1", "n0", 2, RS_B), ("r2", "n1", 3, RS_B)],
    [{"requests": {"cpu": 2}, "priority": 2}, {"requests": {"cpu": 1}, "priority": 0, "restartPolicy": "Never"}],
    pdbs=[{"name": "budget", "selector": {"matchLabels": {"app": "rs-a"}}, "disruptionsAllowed": 0}],
)  # r0 may not move (its budget allows no disruption): r1 and r2 swap nodes so that p0 fits on n1


# --- helpers -----------------------------------------------------------------------------------


def config(*, restart_tiers: bool = True) -> Config:
    return Config.model_validate(
        {
            "priority": {"restartTiers": restart_tiers},
            "solver": {"workers": 1, "deterministic": True, "timeLimit": 5, "seed": 0},
        }
    )


def solve(
    cluster: Cluster, *, evict: bool = True, restart_tiers: bool = True, max_evictions: int | None = None
) -> Result:
    options = SolveOptions(config=config(restart_tiers=restart_tiers), evict=evict, max_evictions=max_evictions)
    return solve_cluster(cluster, options).result


def kept(cluster: Cluster, answer: Result, *, restart_tiers: bool = True) -> dict[Key, int]:
    """Placed pending pods plus running pods not preempted, per key."""
    pods = {p.key: p for p in cluster.pods}
    placed = [pods[p.pod] for p in answer.placements if p.kind == "pending" and p.pod is not None]
    preempted = [e.pod for e in answer.evictions if e.kind == "preempt"]
    return validate.kept_vector(cluster, placed, preempted, restart_tiers=restart_tiers)


def cost(victims: Iterable[Pod], moves: int, keys: Sequence[Key], *, restart_tiers: bool = True) -> list[int]:
    """Objective (2): victims per key from the highest key down, then moves (lower is better)."""
    counts = Counter(validate.pod_key(p, restart_tiers=restart_tiers) for p in victims)
    return [counts[k] for k in keys] + [moves]


def keys_of(cluster: Cluster, *, restart_tiers: bool = True) -> list[Key]:
    """The keys of the running pods and of the batch, highest first."""
    pods = [*(p for p in cluster.pods if p.running), *validate.batch_pods(cluster)]
    return sorted({validate.pod_key(p, restart_tiers=restart_tiers) for p in pods}, reverse=True)


def brute_force(cluster: Cluster, *, restart_tiers: bool = True) -> tuple[dict[Key, int], list[int], str]:
    """The best (kept per key, then cost) over every plan, with the validator's functions only.

    Every running pod stays, is preempted (when it may be evicted) or moves to another node its
    spec allows (when it may move); every pending pod of the batch goes to a node it may use or
    stays pending. A plan counts when every node holds what is on it (capacity, host ports), every
    budget and every preemption has a pending pod on the victim's node that may preempt it.
    Returns the best kept vector, the least cost among plans reaching it, and a witness.
    """
    nodes = {n.name: n for n in cluster.nodes}
    running = [p for p in cluster.pods if p.running and p.node_name in nodes]
    pending = validate.batch_pods(cluster)
    keys = keys_of(cluster, restart_tiers=restart_tiers)

    def binding(pod: Pod) -> validate.Binding:
        return validate.affinity_binding(pod, cluster.nodes)

    actions: list[list[tuple[str, str | None]]] = []
    for pod in running:
        options: list[tuple[str, str | None]] = [("stay", None)]
        if validate.eviction_refusal(cluster, pod) is None:
            options.append(("preempt", None))
            if validate.move_refusal(cluster, pod) is None:
                options += [
                    ("move", name)
                    for name, node in nodes.items()
                    if name != pod.node_name and not validate.eligibility_problems(pod, node, binding(pod))
                ]
        actions.append(options)
    targets = [
        [None, *(n for n, node in nodes.items() if not validate.eligibility_problems(p, node, binding(p)))]
        for p in pending
    ]
    best: tuple[list[int], list[int]] | None = None
    best_kept: dict[Key, int] = {}
    witness = ""
    for choice in itertools.product(*actions):
        evicted = [pod for pod, (what, _) in zip(running, choice, strict=True) if what != "stay"]
        if _over_budget(cluster, evicted):
            continue
        preempted = [pod for pod, (what, _) in zip(running, choice, strict=True) if what == "preempt"]
        moves = sum(1 for what, _ in choice if what == "move")
        base = {name: validate.NodeState(node) for name, node in nodes.items()}
        for pod, (what, _) in zip(running, choice, strict=True):
            if what == "stay":
                base[pod.node_name or ""].add(pod, batch=False)
        moved_in = True
        for pod, (what, to) in zip(running, choice, strict=True):
            if what == "move":
                replacement = pod.model_copy(update={"name": f"{pod.name}~replacement"})
                moved_in = moved_in and not base[to or ""].room_problems(replacement)
                base[to or ""].add(replacement, batch=False)
        if not moved_in:
            continue
        for where in itertools.product(*targets):
            states = {name: _copy(state) for name, state in base.items()}
            fits = True
            for pod, name in zip(pending, where, strict=True):
                if name is None:
                    continue
                if states[name].room_problems(pod):
                    fits = False
                    break
                states[name].add(pod, batch=True)
            if not fits:
                continue
            if not all(
                any(validate.may_preempt(q, v, restart_tiers=restart_tiers) for q in states[v.node_name or ""].placed)
                for v in preempted
            ):
                continue
            placed = [pod for pod, name in zip(pending, where, strict=True) if name is not None]
            vector = validate.kept_vector(cluster, placed, [p.key for p in preempted], restart_tiers=restart_tiers)
            score = (
                [vector.get(k, 0) for k in keys],
                [-c for c in cost(preempted, moves, keys, restart_tiers=restart_tiers)],
            )
            if best is None or score > best:
                best, best_kept = score, vector
                witness = f"{dict(zip([p.key for p in running], choice, strict=True))} {where}"
    assert best is not None  # keeping everything and placing nothing is always a plan
    return best_kept, [-c for c in best[1]], witness


def _over_budget(cluster: Cluster, evicted: Sequence[Pod]) -> bool:
    """Some PodDisruptionBudget's pods are evicted more often than it allows."""
    return any(
        sum(1 for p in evicted if p.namespace == b.namespace and validate.label_selector_matches(b.selector, p.labels))
        > b.disruptions_allowed
        for b in cluster.pdbs
    )


def _copy(state: validate.NodeState) -> validate.NodeState:
    return validate.NodeState(state.node, dict(state.used), list(state.ports), list(state.placed))


# --- properties --------------------------------------------------------------------------------


@PROPERTY
@given(doc=clusters(), restart_tiers=st.booleans(), max_evictions=st.sampled_from([None, None, None, 1]))
@example(doc=FRAGMENTED, restart_tiers=True, max_evictions=None)
@example(doc=MOVE_OR_PREEMPT, restart_tiers=True, max_evictions=1)
@example(doc=BUDGET_BLOCKS_THE_MOVE, restart_tiers=False, max_evictions=None)
def test_every_plan_passes_validate_plan(doc: str, restart_tiers: bool, max_evictions: int | None) -> None:
    note(doc)
    cluster = parse_cluster("property", doc)
    answer = solve(cluster, restart_tiers=restart_tiers, max_evictions=max_evictions)
    note(answer.model_dump_json(by_alias=True, exclude={"metrics", "unplaced"}))
    violations = validate.validate_plan(cluster, answer, restart_tiers=restart_tiers, max_evictions=max_evictions)
    assert violations == []


@PROPERTY
@given(doc=clusters())
@example(doc=FRAGMENTED)
@example(doc=MOVE_OR_PREEMPT)
def test_evictions_never_lose_placed_and_running_pods_per_key(doc: str) -> None:
    note(doc)
    cluster = parse_cluster("property", doc)
    with_plan = kept(cluster, solve(cluster))
    without = kept(cluster, solve(cluster, evict=False))
    ours, theirs = validate.per_key([with_plan, without])
    note(f"with evictions {ours}, without {theirs}")
    assert ours >= theirs


@PROPERTY
@given(doc=clusters(max_nodes=2, max_running=4, max_pending=3), restart_tiers=st.booleans())
@example(doc=FRAGMENTED, restart_tiers=True)
@example(doc=MOVE_OR_PREEMPT, restart_tiers=True)
@example(doc=BUDGET_BLOCKS_THE_MOVE, restart_tiers=True)
def test_the_plan_is_optimal_against_brute_force(doc: str, restart_tiers: bool) -> None:
    note(doc)
    cluster = parse_cluster("property", doc)
    answer = solve(cluster, restart_tiers=restart_tiers)
    note(answer.model_dump_json(by_alias=True, exclude={"metrics", "unplaced"}))
    best, least, witness = brute_force(cluster, restart_tiers=restart_tiers)
    note(f"brute force: {witness}")
    ours, optimum = validate.per_key([kept(cluster, answer, restart_tiers=restart_tiers), best])
    assert ours == optimum
    pods = {p.key: p for p in cluster.pods}
    victims = [pods[e.pod] for e in answer.evictions if e.kind == "preempt"]
    moves = sum(1 for e in answer.evictions if e.kind == "move")
    assert cost(victims, moves, keys_of(cluster, restart_tiers=restart_tiers), restart_tiers=restart_tiers) == least
