"""Global plan for infeasible batches: evictions, moves, ordered steps."""

from placer.plan.eligibility import could_evict
from placer.plan.planner import Plan, PlannedEviction, plan_batch, plan_rebalance

__all__ = ["Plan", "PlannedEviction", "could_evict", "plan_batch", "plan_rebalance"]
