"""Global plan for infeasible batches: evictions, moves, ordered steps."""

from placer.plan.planner import Plan, PlannedEviction, plan_batch, plan_rebalance

__all__ = ["Plan", "PlannedEviction", "plan_batch", "plan_rebalance"]
