"""placer.plan: the global plan for infeasible batches (evictions, moves, ordered steps), and the
rebalancing entry. The public surface other packages use; see docs/architecture.md."""

from placer.plan.blocked import name_blocking_pdbs
from placer.plan.eligibility import Eligibility, classify, could_evict, owning_job
from placer.plan.planner import Plan, PlannedEviction, Relief, plan_batch, plan_rebalance
from placer.plan.steps import BindSpec, EvictSpec, StepSpec, order_steps

__all__ = [
    "BindSpec",
    "Eligibility",
    "EvictSpec",
    "Plan",
    "PlannedEviction",
    "Relief",
    "StepSpec",
    "classify",
    "could_evict",
    "name_blocking_pdbs",
    "order_steps",
    "owning_job",
    "plan_batch",
    "plan_rebalance",
]
