"""Anytime solving: one batch is solved on a thread of its own while the loop gathers the next.

The solve's time limit adapts to the queue (``solve_budget``). A ``SolveJob`` holds everything
its solve reads, fixed when the batch is taken (the cluster model, with every assumed bind and the
running plan's room held, and the batch), so the loop may go on meanwhile: it applies the answer
(binds, reports, a plan) on its own thread when the solve is done, and takes the next batch only
after that, so that batch's model holds this one's placements: at most one solve is in flight and
no two batches are ever solved against the same free room.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from placer.engine import Budget, Snapshot
from placer.models import Cluster, Config, Pod
from placer.service import Decision, check_decision, decide

__all__ = ["CHECK_SHARE", "Answer", "SolveJob", "solve_budget"]

CHECK_SHARE = 0.5  # of the time limit, at most kept for the check after the decision (``SolveJob``)


def solve_budget(
    *,
    floor: float,
    most: float,
    window: float,
    size: int,
    waiting: int,
    waited: float | None,
    overdue: float = 0.0,
    fills_in: float | None = None,
) -> float:
    """The time limit of a batch's solve, taken when the batch is (``waiting``: pods already
    gathered for the next batch, the oldest for ``waited`` seconds; None: none; ``overdue``: how
    long the batch's own oldest pod has waited; ``fills_in``: when the next batch would be full at
    the recent arrival rate, None when unknown).

    With a full batch already waiting (a backlog), ``floor`` (engine.solver.timeLimit): the next
    batch is due now; so too when the batch's own pods have waited two windows already (the tail
    of a backlog: they are late, and quality would be paid for in their latency). Otherwise the
    solve may run until the next batch falls due: by its window (what is left of the window of the
    oldest waiting pod, the whole window when none waits) or, sooner, by filling up at the rate
    pods arrive; at most ``most`` (maxSolveSeconds), and never less than ``floor``."""
    if waiting >= size or overdue >= 2 * window:
        return floor
    left = window if waited is None else window - waited
    if fills_in is not None:
        left = min(left, fills_in)
    return max(floor, min(left, most))


@dataclass
class Answer:
    """What a solve gives back: the decision, the validator's objections, how long the decision
    took and how long the check after it (``checked``)."""

    decision: Decision
    problems: list[str]
    seconds: float
    checked: float = 0.0


@dataclass
class SolveJob:
    """One batch's solve, its inputs fixed when the batch was taken."""

    cluster: Cluster
    state: Snapshot
    batch: list[Pod]
    config: Config  # the engine's, with solver.timeLimit set to ``budget``
    budget: float
    planning: bool  # may it plan evictions (no plan is in flight)
    max_evictions: int
    max_per_node: int
    frozen: frozenset[str]
    held: frozenset[str] = frozenset()  # moved too recently: never moved, preempted by a higher priority only
    waiting: tuple[Pod, ...] = ()  # queued behind the batch: its balance accounts for them (issue 29)
    # What checking the answer may take (wall seconds: the longest of the recent checks): kept out
    # of the decision's time limit, so that the decision and its check together end within it.
    check_seconds: float = 0.0
    keys: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.keys = frozenset(p.key for p in self.batch)

    def run(self) -> Answer:
        """Decide the batch and check the answer with the independent validator (pure: it writes
        nothing and touches no state of the runner, so it may run on any thread)."""
        started = time.monotonic()
        whole = Budget.of(self.config)
        budget = whole.ending_early(min(self.check_seconds, CHECK_SHARE * whole.limit))
        decision = decide(
            self.cluster,
            self.state,
            self.batch,
            self.config,
            evict=self.planning,
            max_evictions=self.max_evictions,
            max_per_node=self.max_per_node,
            frozen=self.frozen,
            held=self.held,
            waiting=self.waiting,
            budget=budget,
        )
        decided = time.monotonic()
        problems = check_decision(self.cluster, self.state, self.batch, decision, self.config)
        return Answer(decision, problems, decided - started, time.monotonic() - decided)
