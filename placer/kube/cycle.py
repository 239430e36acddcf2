"""The scheduling cycle: the queue (pods waiting for this scheduler, fed to the batcher) and the
solve of a batch, with the same ``decide`` as ``placer solve``, on a solver thread while the loop
goes on gathering the next batch (``placer.kube.anytime``: one solve in flight; its time limit is
the floor with a backlog and grows up to what is left of the batch window when arrivals are
slow). The model it solves holds the binds issued but not yet seen (``assumed``) and the running
plan's room, so nothing is double-booked.

When the answer is in, placed pods are bound concurrently (``placer.kube.binds``), unplaced ones
get PodScheduled=False/Unschedulable and a FailedScheduling event and are backed off, and a
global plan (only when none is running) is handed to the plan driver (``placer.kube.plans``).
The validator's objections refuse an answer whole.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from placer.engine import build_snapshot
from placer.kube.anytime import Answer, SolveJob, solve_budget
from placer.kube.binds import Binder
from placer.kube.context import Context
from placer.kube.plans import PlanDriver
from placer.kube.reports import ReportQueue
from placer.kube.view import ClusterView
from placer.models import UNPLACED_CODES, Cluster, EvictionDetail, Pod, describe, describe_eviction
from placer.service import nominated_holds, plan_steps

__all__ = ["SchedulingCycle"]

log = logging.getLogger("placer.controller")

CHECKS_KEPT = 8  # recent answers whose check times the next solve's time limit keeps room for


def group_object(pod: Pod) -> tuple[str, str, str]:
    """The (api, namespace, name) of the PodGroup object the pod names (``ClusterView.pod_groups``)."""
    return (pod.gang_object or "", pod.namespace, pod.gang or "")


def incomplete(
    waiting: Iterable[Pod], running: Mapping[str, int], sizes: Mapping[tuple[str, str, str], int | None]
) -> frozenset[str]:
    """Gangs with fewer members pending (``waiting``) and running (gang -> count) than their size
    (minCount: a PodGroup's from ``sizes``, by ``group_object``, else ``Pod.gang_size``):
    kube-scheduler's GangScheduling PreEnqueue keeps such a gang's pods out of its queue until
    minCount of them exist, and so does the cycle (``pending_keys``): they are neither batched nor
    reported until the gang is complete. A gang without a size (the members present, a ``basic``
    policy, an unreadable or missing PodGroup) is never incomplete here."""
    want: dict[str, int] = {}
    have: dict[str, int] = {}
    for pod in waiting:
        gang = pod.gang_key
        if gang is None:
            continue
        size = pod.gang_size if pod.gang_object is None else sizes.get(group_object(pod))
        if size:
            want[gang] = max(want.get(gang, 0), size)
            have[gang] = have.get(gang, 0) + 1
    return frozenset(g for g, size in want.items() if have[g] + running.get(g, 0) < size)


class SchedulingCycle:
    def __init__(
        self, ctx: Context, view: ClusterView, binder: Binder, driver: PlanDriver, reports: ReportQueue
    ) -> None:
        self.ctx = ctx
        self.view = view
        self.binder = binder
        self.driver = driver
        self.reports = reports
        # Anytime solving: the batch being solved on the solver thread (at most one).
        self.solver = ThreadPoolExecutor(1, thread_name_prefix="solver")
        self.solving: tuple[SolveJob, Future[Answer]] | None = None
        self.solve_started: float | None = None  # when the solve in flight was submitted
        self.wake = threading.Event()  # set when a solve is done: the loop applies it at once
        self.pending = 0  # pods pending at the last look (queued or being solved)
        self._gangs: dict[str, str] = {}  # pending pod -> its batch unit, to keep gangs in one batch
        self._gang_of: dict[str, str] = {}  # pending pod -> its gang (``Pod.gang_key``)
        self._rivals: set[str] = set()  # batch units held to a topology domain: batched together
        # Gangs a batch found incomplete -> members it saw pending: held until more are pending.
        self._short: dict[str, int] = {}
        # Pods whose plan search ran out of time (``Decision.settled``) -> the budget it had: their
        # next batch gets twice that (at most maxSolveSeconds) instead of waiting out a back-off;
        # left out at maxSolveSeconds, they keep that budget after their back-off instead of
        # climbing from the floor again (two ladders of 17 solves for a big gang under load).
        self._more_time: dict[str, float] = {}
        self._left_as: dict[str, str] = {}  # pending pod -> the unplaced code its last solve gave
        # How long the validator's check of the recent answers took per pod of their batch: the
        # next solve keeps the longest times its own batch out of its time limit (capped:
        # ``SolveJob.check_seconds``), so a large batch's check does not shrink small ones.
        self._checks: deque[float] = deque(maxlen=CHECKS_KEPT)
        self.gated: list[str] = []  # pending members of gangs short of their size: not batched yet

    # -- the queue ------------------------------------------------------------------------------
    def pending_keys(self) -> list[str]:
        """Pods waiting for this scheduler (``Pod.awaits``) in the configured namespaces, less
        those a plan will bind, assumed or being solved, and less the members of gangs that are
        not complete yet (``gated``); also records each one's gang, so that gangs are batched
        whole. Reads the queue the pod index keeps (only changed pods are looked at)."""
        pods = self.view.pods
        pods.update(self.view.informers.get("Pod"))
        solving = self.solving[0].keys if self.solving is not None else frozenset()
        reserved, assumed = self.driver.reserved, self.ctx.assumed
        # The queue reads pods unresolved: a gang's minCount and topology come from its object.
        groups = self.view.pod_groups()
        sizes = {key: (g.size if g.problem is None else None) for key, g in groups.items()}
        domains = {
            key for key, g in groups.items() if g.problem is None and (g.rules.topology_key or g.rules.parent)
        }  # held to a domain: a topology key of their own, or a composite parent whose chain may hold one
        short = incomplete(pods.waiting.values(), pods.running_members, sizes)
        out = []
        self._gangs, self._gang_of, self._rivals, self.gated = {}, {}, set(), []
        for key, pod in pods.waiting.items():
            if key in reserved or key in solving or pod in assumed:
                continue
            if pod.gang_key in short:
                self.gated.append(key)
                continue
            out.append(key)
            if pod.batch_unit is not None:  # a gang, or a composite gang's groups, batched together
                self._gangs[key] = pod.batch_unit
                if pod.group_domains or group_object(pod) in domains:
                    self._rivals.add(pod.batch_unit)
            if pod.gang_key is not None:
                self._gang_of[key] = pod.gang_key
        return out

    def queue(self) -> None:
        """Feed the batcher the pods pending now; the pending gauges."""
        metrics = self.ctx.metrics
        queued = self.pending_keys()
        solving = sorted(self.solving[0].keys) if self.solving is not None else []
        pending = queued + solving + self.gated  # a pod being solved, or gated, is still pending
        self.pending = len(pending)
        metrics.pending.set(len(pending))
        self._left_as = {k: v for k, v in self._left_as.items() if k in set(pending)}
        self._more_time = {k: v for k, v in self._more_time.items() if k in set(pending)}
        counts: dict[str, int] = dict.fromkeys((*UNPLACED_CODES, "new"), 0)
        for key in pending:
            counts[self._left_as.get(key, "new")] += 1
        for reason, count in counts.items():
            metrics.pending_by_reason.labels(reason=reason).set(count)
        self._release_grown(queued)
        self.ctx.batcher.sync(queued, time.monotonic(), held=solving)

    def _release_grown(self, queued: list[str]) -> None:
        """Members of a gang a batch found incomplete join the queue again, all at once, when
        more of its members are pending than that batch saw: the next batch then takes the gang
        whole."""
        if not self._short:
            return
        members: dict[str, list[str]] = {}
        for key in queued:
            gang = self._gang_of.get(key)
            if gang in self._short:
                members.setdefault(gang, []).append(key)
        for gang, seen in list(self._short.items()):
            keys = members.get(gang, [])
            if len(keys) > seen or not keys:  # grown, or none pending any more
                del self._short[gang]
                self.ctx.batcher.wake(time.monotonic(), keys)

    # -- the solve ------------------------------------------------------------------------------
    def job(self, cluster: Cluster) -> SolveJob | None:
        """Take the next batch and fix what its solve reads; None when no pod of it can be solved."""
        cfg, batcher = self.ctx.cfg, self.ctx.batcher
        now = time.monotonic()
        overdue = batcher.waited(now) or 0.0  # the batch's own oldest pod (taken first)
        keys = set(batcher.take(self._gangs, self._rivals))
        # awaits: the assembled pod, whose gang's PodGroup may not exist yet (it then waits).
        batch = [p for p in cluster.pods if p.key in keys and p.awaits(cfg.scheduler_name)]
        if not batch:
            return None
        planning = self.driver.plan is None  # at most one plan in flight: meanwhile batches only place
        cluster = self.driver.holding(cluster)
        running = [p for p in cluster.pods if p.running] + nominated_holds(cluster, cfg.scheduler_name, batch)
        state = build_snapshot(cluster.nodes, running, batch, cluster.namespaces)
        engine = cfg.engine
        budget = solve_budget(
            floor=engine.solver.time_limit,
            most=cfg.max_solve,
            window=cfg.batch_window,
            size=cfg.batch_size,
            waiting=len(batcher),
            waited=batcher.waited(now),
            overdue=overdue,
            fills_in=batcher.fills_in(now),
        )
        short = max((self._more_time.get(p.key, 0.0) for p in batch), default=0.0)
        if short:  # a plan search these pods needed ran out of time: twice its budget now
            budget = max(budget, min(2 * short, cfg.max_solve))
        if budget != engine.solver.time_limit:
            solver = engine.solver.model_copy(update={"time_limit": budget})
            engine = engine.model_copy(update={"solver": solver})
        limits = cfg.evictions
        # The pods the batcher has not taken yet go with the batch: its balance accounts for them.
        queued = batcher.queued()
        waiting = tuple(p for p in cluster.pods if p.key in queued)
        return SolveJob(
            cluster=cluster,
            state=state,
            batch=batch,
            config=engine,
            budget=budget,
            planning=planning,
            max_evictions=limits.per_cycle,
            max_per_node=limits.per_node,
            frozen=self.view.out_of_scope(cluster),
            held=self.view.recently_moved(cluster),
            waiting=waiting,
            check_seconds=max(self._checks, default=0.0) * len(batch),
        )

    def submit(self, cluster: Cluster) -> None:
        """Take the next batch and solve it on the solver thread; ``finish`` applies the answer."""
        job = self.job(cluster)
        if job is None:
            return
        future = self.solver.submit(job.run)
        future.add_done_callback(lambda _: self.wake.set())
        self.solving = (job, future)
        self.solve_started = time.monotonic()

    def solve(self, cluster: Cluster) -> None:
        """Take the next batch, solve it and apply the answer, here and now."""
        job = self.job(cluster)
        if job is not None:
            self.apply(job, job.run())

    def done(self) -> bool:
        """A solve in flight has finished: ``finish`` applies it."""
        return self.solving is not None and self.solving[1].done()

    def finish(self) -> None:
        """Apply the answer of the solve in flight (done). A solve that raised puts its batch back
        (backed off), as a refused answer does."""
        assert self.solving is not None
        job, future = self.solving
        self.solving = None
        try:
            answer = future.result()
        except Exception:
            for pod in job.batch:
                self.ctx.batcher.defer(pod.key, time.monotonic())
            raise
        self.apply(job, answer)

    # -- the answer -----------------------------------------------------------------------------
    def apply(self, job: SolveJob, answer: Answer) -> None:
        """What a batch's answer means: binds, reports, or a plan (the validator's objections
        refuse it whole)."""
        metrics, batcher = self.ctx.metrics, self.ctx.batcher
        batch, state, decision = job.batch, job.state, answer.decision
        metrics.solve_seconds.observe(answer.seconds)
        self._checks.append(answer.checked / max(len(batch), 1))
        metrics.solve_budget.observe(job.budget)
        metrics.solve_gap.set(decision.gap)
        metrics.batch_size.observe(len(batch))
        if answer.problems:
            self.refuse(batch, "plan" if decision.plan is not None else "placements", answer.problems)
            return
        if decision.plan is not None and self.driver.plan is not None:  # never two plans (a guard: not reached)
            self.refuse(batch, "plan", ["another plan started while this batch was solved"])
            return
        names = [n.name for n in state.nodes]
        for pod in batch:
            self._more_time.pop(pod.key, None)
        # A plan search that ran out of time did not show the pods unschedulable: they are decided
        # again at once with more time (``job``), until maxSolveSeconds, before being reported.
        unsettled = job.planning and not decision.settled
        retry = unsettled and job.budget < self.ctx.cfg.max_solve
        for pod, code, reason in decision.unplaced:
            metrics.unplaced.labels(code=code).inc()
            self._left_as[pod.key] = code
            if unsettled:
                self._more_time[pod.key] = job.budget
            if retry:
                continue
            if not job.planning:
                # Solved while a plan ran, so no plan could be made for it: it waits for that plan
                # to end (at once if it has ended) and is solved again, with planning, before it is
                # reported; a preemptor is not told it is unschedulable while its victims go.
                if self.driver.plan is not None:
                    batcher.hold(pod.key)
                continue
            self.reports.submit(pod, describe(reason))  # kube-scheduler's words, formatted at the edge
            self.ctx.group_status.unschedulable(pod, describe(reason))
            gang = reason.gang
            if gang is not None and gang.pending < gang.size:
                # Its gang lacks members: it waits for the next one (``_release_grown``), not for a
                # back-off of its own, which would part the gang into cohorts that each come back
                # incomplete (kube-scheduler's GangScheduling waits for minCount pods likewise).
                self._short[gang.gang] = max(self._short.get(gang.gang, 0), gang.pending)
                batcher.hold(pod.key)
                continue
            batcher.defer(pod.key, time.monotonic())
        if decision.plan is None:
            self.binder.bind_all([(pod, names[n]) for pod, n in decision.placements])
            log.info(
                "batch of %d: %d placed (binding), %d unplaced; decided in %.2fs of a %.2fs budget",
                len(batch),
                len(decision.placements),
                len(decision.unplaced),
                answer.seconds,
                job.budget,
            )
            return
        plan = decision.plan
        log.info(
            "global plan: %d evictions, %d steps; decided in %.2fs of a %.2fs budget",
            len(plan.evictions),
            len(plan.steps),
            answer.seconds,
            job.budget,
        )
        why = {
            e.pod.key: describe_eviction(
                e.kind,
                names[e.node],
                names[e.to] if e.to is not None else None,
                e.for_,
                EvictionDetail(short_of=e.short_of, outranked_by=e.outranked_by, choice=e.choice),
            )
            for e in plan.evictions
        }
        self.driver.start(plan, plan_steps(plan.steps, names), why, reason="Preempted")
        self.driver.advance(self.view.cluster())  # the cluster as it is now, not as the solve began

    def refuse(self, batch: list[Pod], kind: str, problems: list[str]) -> None:
        """The validator rejected the answer: write nothing, say so, try these pods again later."""
        self.ctx.metrics.refused.labels(kind=kind).inc()
        log.error("refusing a batch answer (%s): %d validator problems: %s", kind, len(problems), problems[:3])
        note = f"placer refused its own answer for this batch (validator: {problems[0]}); retried later"
        for pod in batch:
            self.ctx.actions.event(pod.key, pod.uid, reason="FailedScheduling", note=note, kind="Warning")
            self.ctx.batcher.defer(pod.key, time.monotonic())
