"""Dynamic rebalancing (the thesis's chapter 5, issue 15): load per node, scoring and queues, what
may move, and one planned move set whose landing nodes the solver chooses."""

from placer.rebalance.load import Loads, node_loads
from placer.rebalance.run import Move, RebalanceOptions, RebalanceOutcome, job_backoff, rebalance_cluster
from placer.rebalance.score import Queues, balance_scores, node_scores, queues

__all__ = [
    "Loads",
    "Move",
    "Queues",
    "RebalanceOptions",
    "RebalanceOutcome",
    "balance_scores",
    "job_backoff",
    "node_loads",
    "node_scores",
    "queues",
    "rebalance_cluster",
]
