"""A plan with no pending pod: the global plan's entry for rebalancing.

Aspects: the same movers, model, level loop and steps as a batch's plan, with the levels in the
rebalancing order (best strategy cost, then fewest moves); the move budget holds; nothing is
planned when no move lowers the cost; PDBs and opt-outs still bind; the final state passes the
independent validator's capacity check.
"""

from __future__ import annotations

from typing import Any

from support import cluster, node, pod

from placer.engine import build_snapshot
from placer.models import Cluster, Config
from placer.plan import Relief, plan_rebalance
from placer.validate import hard_violations

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 5}})


def _skewed(n_pods: int = 4, **extra: Any) -> Cluster:
    """Every replica of a placer ReplicaSet on node a; node b idle."""
    pods = [
        pod(f"web-{i}", cpu="2", memory="2Gi", node="a", owner={"kind": "ReplicaSet", "name": "web"})
        for i in range(n_pods)
    ]
    rss = extra.pop("replicaSets", [{"name": "web"}])
    return cluster(
        [node("a", cpu="16", memory="16Gi"), node("b", cpu="16", memory="16Gi")], pods, replicaSets=rss, **extra
    )


def _plan(c: Cluster, max_moves: int) -> Any:
    running = [p for p in c.pods if p.running]
    state = build_snapshot(c.nodes, running, [], c.namespaces)
    return state, plan_rebalance(c, state, CONFIG, max_moves=max_moves)


def _final(c: Cluster, state: Any, plan: Any) -> dict[str, str]:
    """Pod -> node once the plan ran: moved pods' replacements stand where they landed."""
    names = [n.name for n in state.nodes]
    where = {p.key: p.node_name or "" for p in c.pods if p.running}
    for e in plan.evictions:
        where[e.pod.key] = names[e.to]
    return where


def test_a_skewed_node_sheds_half_its_replicas_with_the_fewest_moves() -> None:
    c = _skewed()
    state, plan = _plan(c, max_moves=4)
    assert plan is not None
    assert sorted(e.kind for e in plan.evictions) == ["move", "move"]  # 2 and 2 is the balance optimum
    assert {state.nodes[e.to].name for e in plan.evictions} == {"b"}
    moved = {e.pod.key for e in plan.evictions}
    ops = [(s.op, s.pod) for s in plan.steps]
    for key in moved:  # evict, wait until gone, bind the replacement: the global plan's steps
        assert ops.index(("evict", key)) < ops.index(("await-gone", key))
    final = _final(c, state, plan)
    assert sorted(final.values()) == ["a", "a", "b", "b"]
    # The replacements re-placed where the plan lands them fit beside the pods that stay.
    stay = [p for p in c.pods if p.key not in moved]
    again = [
        p.model_copy(update={"node_name": None, "phase": "Pending", "scheduler_name": "placer"})
        for p in c.pods
        if p.key in moved
    ]
    after = c.model_copy(update={"pods": tuple(stay + again)})
    assert hard_violations(after, {p.key: final[p.key] for p in again}) == []


def test_the_move_budget_caps_the_plan() -> None:
    c = _skewed()
    _, plan = _plan(c, max_moves=1)
    assert plan is not None and len(plan.evictions) == 1


def test_a_balanced_cluster_gets_no_plan() -> None:
    pods = [
        pod("web-0", cpu="2", memory="2Gi", node="a", owner={"kind": "ReplicaSet", "name": "web"}),
        pod("web-1", cpu="2", memory="2Gi", node="b", owner={"kind": "ReplicaSet", "name": "web"}),
    ]
    c = cluster(
        [node("a", cpu="16", memory="16Gi"), node("b", cpu="16", memory="16Gi")], pods, replicaSets=[{"name": "web"}]
    )
    assert _plan(c, max_moves=4)[1] is None


def test_a_pdb_without_allowed_disruptions_and_bare_pods_keep_everything_in_place() -> None:
    blocked = _skewed(
        pdbs=[{"name": "web", "selector": {"app": "web"}, "disruptionsAllowed": 0}],
    )
    blocked = blocked.model_copy(
        update={"pods": tuple(p.model_copy(update={"labels": {"app": "web"}}) for p in blocked.pods)}
    )
    assert _plan(blocked, max_moves=4)[1] is None
    bare = cluster(
        [node("a", cpu="16", memory="16Gi"), node("b", cpu="16", memory="16Gi")],
        [pod(f"job-{i}", cpu="2", memory="2Gi", node="a") for i in range(4)],
    )
    assert _plan(bare, max_moves=4)[1] is None


def test_caps_per_node_and_namespace_and_a_relief_bind_the_plan() -> None:
    c = _skewed()
    running = [p for p in c.pods if p.running]
    state = build_snapshot(c.nodes, running, [], c.namespaces)
    a = [n.name for n in state.nodes].index("a")

    def moves(**caps: Any) -> int:
        plan = plan_rebalance(c, state, CONFIG, max_moves=4, **caps)
        return 0 if plan is None else len(plan.evictions)

    assert moves() == 2
    assert moves(max_per_node={a: 1}) == 1
    assert moves(max_per_node={}) == 0  # a mapping names the only nodes that may give
    assert moves(max_per_namespace=1) == 1
    # If anything leaves a, it must take 3 units off it; each pod is worth 2.
    relief = {a: Relief(excess=(3,), shares={p.key: (2,) for p in running})}
    assert moves(relief=relief) == 2
    assert moves(relief=relief, max_per_node={a: 1}) == 0
