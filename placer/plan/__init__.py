"""Global plan for infeasible batches: evictions, moves, ordered steps."""

from placer.plan.planner import Plan, PlannedEviction, plan_batch

__all__ = ["Plan", "PlannedEviction", "plan_batch"]
