"""Which budgets held a rebalancing plan back, and what the plan would do with each raised.

A budget *stops* the plan where the plan used all of it while pods it offered in the same scope
stayed: ``limits.perPeriod`` (the plan's moves), ``limits.perNamespace`` (a namespace's),
``limits.perNode`` (a giving node still above ``high`` after its moves, with pods left to give)
and a PodDisruptionBudget (its ``disruptionsAllowed``). What raising one would do is not guessed:
``what_if`` makes the plan again with only that budget lifted (by the same planning function, on
the same offer) and reports the moves it adds and the balance it reaches; a budget reached
without which the plan makes no more moves did not stop it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from placer.models import BudgetStop, Cluster, Pod, RebalanceLimits
from placer.plan import Plan, classify
from placer.rebalance.load import Loads
from placer.rebalance.select import Offer

__all__ = ["Lift", "Replan", "Scope", "Stop", "hot_nodes", "stops", "what_if"]


@dataclass(frozen=True)
class Lift:
    """One budget lifted for a second plan: the plan's moves, a namespace's (None: no limit), the
    moves off one node, and PodDisruptionBudgets (index -> disruptions allowed) overridden."""

    max_moves: int
    per_namespace: int | None
    per_node: int
    pdbs: tuple[tuple[int, int], ...] = ()


# Makes a plan with a lift and a budget share; returns the plan and the loads after it, or None.
Replan = Callable[[Lift, float], tuple[Plan, Loads] | None]


Scope = Callable[[Pod, int], str]  # a pod on a node: its scope under one budget ("" outside it)


@dataclass(frozen=True)
class Stop:
    report: BudgetStop
    lift: Lift  # the plan's limits with this budget lifted
    scope_of: Scope


def hot_nodes(loads: Loads, high: float) -> int:
    """Nodes with some weighted resource above ``high`` (a fraction)."""
    return int(((loads.util > high) & (loads.alloc > 0)).any(axis=1).sum())


def stops(
    cluster: Cluster,
    names: list[str],
    offered: Offer,
    plan: Plan | None,
    *,
    scheduler_name: str,
    lift: Lift,
    limits: RebalanceLimits,
) -> list[Stop]:
    """The budgets the plan (None: no plan) used up with offered pods still staying in scope;
    ``lift`` holds the limits the plan was made with, from ``limits`` (each named by the setting
    that gave it: a count, or its percentage when that was more)."""
    moved = [(e.pod, e.node) for e in (plan.evictions if plan is not None else []) if e.to is not None]
    keys = {pod.key for pod, _ in moved}
    staying = [(pod, n) for pod, n in offered.candidates if pod.key not in keys]
    if not staying:
        return []
    out: list[Stop] = []
    unlimited = len(offered.candidates)

    def add(key: str, scopes: list[str], limit: int, relaxed: Lift, scope_of: Scope) -> None:
        ready = sum(1 for pod, n in staying if scope_of(pod, n) in scopes)
        out.append(Stop(BudgetStop(key=key, scopes=scopes, limit=limit, ready=ready), relaxed, scope_of))

    def whole(pod: Pod, n: int) -> str:
        return "the plan"

    def namespace(pod: Pod, n: int) -> str:
        return pod.namespace

    def node(pod: Pod, n: int) -> str:
        return names[n]

    if len(moved) >= lift.max_moves:
        key = "perPeriod" if lift.max_moves == limits.per_period else "perPeriodPercent"
        add(f"rebalance.limits.{key}", ["the plan"], lift.max_moves, replace(lift, max_moves=unlimited), whole)
    if lift.per_namespace is not None:
        per_ns = Counter(pod.namespace for pod, _ in moved)
        full = sorted({pod.namespace for pod, _ in staying if per_ns[pod.namespace] >= lift.per_namespace})
        if full:
            key = "perNamespace" if lift.per_namespace == limits.per_namespace else "perNamespacePercent"
            add(f"rebalance.limits.{key}", full, lift.per_namespace, replace(lift, per_namespace=None), namespace)
    per_node = Counter(n for _, n in moved)
    capped = sorted({names[n] for n in offered.capped if per_node[n] >= lift.per_node})
    if capped:
        wider = replace(lift, per_node=max(unlimited, lift.per_node))
        add("rebalance.limits.perNode", capped, lift.per_node, wider, node)
    budgets: dict[str, tuple[int, ...]] = {}  # pod key -> the PodDisruptionBudgets covering it

    def budgets_of(pod: Pod) -> tuple[int, ...]:
        if pod.key not in budgets:
            budgets[pod.key] = classify(cluster, pod, scheduler_name, jobs=True).pdbs
        return budgets[pod.key]

    for i, pdb in enumerate(cluster.pdbs):
        name = f"{pdb.namespace}/{pdb.name}"

        def covered(pod: Pod, n: int, i: int = i, name: str = name) -> str:
            return name if i in budgets_of(pod) else ""

        used = sum(1 for pod, n in moved if covered(pod, n))
        if used >= pdb.disruptions_allowed and any(covered(pod, n) for pod, n in staying):
            add(
                "PodDisruptionBudget",
                [name],
                pdb.disruptions_allowed,
                replace(lift, pdbs=(*lift.pdbs, (i, unlimited))),
                covered,
            )
    return out


def what_if(stop: Stop, replan: Replan, share: float, moves: int, high: float) -> BudgetStop:
    """``stop`` with what the plan does with its budget lifted (``moves``: the plan's own)."""
    again = replan(stop.lift, share)
    if again is None:
        return stop.report.model_copy(update={"raised_to": stop.report.limit, "more": 0})
    plan, after = again
    moved = [(e.pod, e.node) for e in plan.evictions if e.to is not None]
    per_scope = Counter(s for s in (stop.scope_of(pod, n) for pod, n in moved) if s in stop.report.scopes)
    return stop.report.model_copy(
        update={
            "raised_to": max(per_scope.values(), default=0),
            "more": len(moved) - moves,
            "spread": round(after.spread(), 6),
            "hot": hot_nodes(after, high),
        }
    )
