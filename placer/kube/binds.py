"""A batch's binds: dispatched to the bind workers at once (the pods assumed, as kube-scheduler
assumes them), their outcomes accounted on the loop thread, and a bind of unknown outcome read
back until the API or the watch tells whether it landed.

Volumes: before a pod with unbound WaitForFirstConsumer claims is bound, each claim gets
``volume.kubernetes.io/selected-node`` (kube-scheduler's VolumeBinding PreBind); if that fails the
pod is not bound, a FailedScheduling event says why, and the pod is backed off and retried.
"""

from __future__ import annotations

import itertools
import logging
import time
from concurrent.futures import Future

from placer.inputs.volumes import SELECTED_NODE
from placer.kube.actions import Outcome, result_label
from placer.kube.context import Context
from placer.kube.policy import Result
from placer.kube.view import ClusterView
from placer.models import Pod

__all__ = ["READBACKS", "WATCH_SETTLE", "Binder"]

log = logging.getLogger("placer.controller")
READBACKS = 6  # read-backs of a bind of unknown outcome (1+2+4+8+16+30 s) before the watch decides
WATCH_SETTLE = 10.0  # ... if it delivered something this long after the bind was sent


class Binder:
    def __init__(self, ctx: Context, view: ClusterView) -> None:
        self.ctx = ctx
        self.view = view
        self.inflight: list[tuple[Pod, str, Future[Outcome]]] = []
        self.recheck: dict[str, tuple[Pod, str, float]] = {}  # binds of unknown outcome -> next read-back
        self._batches = itertools.count()  # each batch's binds are a lane of the pool (``FairPool``)

    def select_nodes(self, pod: Pod, node: str) -> Outcome:
        """kube-scheduler's VolumeBinding PreBind for dynamic provisioning: every unbound
        WaitForFirstConsumer claim of the pod records the chosen node before the pod is bound.
        A failure leaves the pod unbound; it is reported (log and event) and retried."""
        actions = self.ctx.actions
        for claim in pod.wffc_claims:
            out = actions.select_node(f"{claim.namespace}/{claim.name}", node)
            if not out.ok:
                note = (
                    f'running PreBind plugin "VolumeBinding": setting {SELECTED_NODE} on '
                    f'persistentvolumeclaim "{claim.name}" failed: {out.status} {out.reason}'
                )
                log.warning("not binding %s to %s: %s", pod.key, node, note)
                actions.event(pod.key, pod.uid, reason="FailedScheduling", note=note, kind="Warning")
                return Outcome(ok=False, status=out.status, reason=note, prebind=True)
        return Outcome(ok=True)

    def bind_one(self, pod: Pod, node: str) -> Outcome:
        out = self.select_nodes(pod, node)
        if not out.ok:
            return out
        actions = self.ctx.actions
        out = actions.bind(pod.key, node, pod.uid)
        if out.ok:
            actions.event(pod.key, pod.uid, reason="Scheduled", note=f"Successfully assigned {pod.key} to {node}")
        return out

    def bind_all(self, binds: list[tuple[Pod, str]]) -> None:
        """Dispatch binds to the pool and return at once, like kube-scheduler's assume + async bind:
        the pods count as placed (``assumed``) right away, so the next batch can be solved while
        these binds are in flight without double-booking; a refused bind drops the assumption.
        The batch's binds are a lane of their own: the workers serve the batches' lanes in turn, so
        the binds of a batch decided later are not queued behind all of a big gang's."""
        now = time.time()
        lane = next(self._batches)
        self.ctx.group_status.placed(pod for pod, _ in binds)  # a group is scheduled once all are bound
        for pod, node in binds:
            self.ctx.assumed.assume(pod, node, now)
            self.inflight.append((pod, node, self.ctx.pool.submit_to(lane, self.bind_one, pod, node)))

    def collect(self) -> None:
        """Account the binds (and read-backs of binds of unknown outcome) that finished since the
        last tick. A bind's exception is taken for an unknown outcome; nothing here raises, and
        every finished future is consumed exactly once."""
        pending: list[tuple[Pod, str, Future[Outcome]]] = []
        done: list[tuple[Pod, str, Outcome]] = []
        for pod, node, future in self.inflight:
            if not future.done():
                pending.append((pod, node, future))
                continue
            try:
                out = future.result()
            except Exception as exc:
                out = Outcome(ok=False, reason=f"{type(exc).__name__}: {exc}", result=Result.UNKNOWN)
            done.append((pod, node, out))
        self.inflight = pending
        for pod, node, out in done:
            self.account(pod, node, out)
        now = time.monotonic()
        for uid, (pod, node, due) in list(self.recheck.items()):
            if due <= now:
                del self.recheck[uid]
                confirm = self.ctx.actions.confirm_bind
                self.inflight.append((pod, node, self.ctx.pool.submit(confirm, pod.key, pod.uid, node)))

    def account(self, pod: Pod, node: str, out: Outcome) -> None:
        """What one bind's outcome means for the assume cache and the queue."""
        ctx = self.ctx
        ctx.metrics.binds.labels(result=result_label(out)).inc()
        if out.ok:
            ctx.batcher.forget(pod.key)
            ctx.group_status.bound(pod.key)
            if ctx.cfg.dry_run:  # nothing was bound: the shadow's picture stays the cluster's
                ctx.assumed.release(pod)
            return
        if out.result is Result.UNKNOWN:
            # Maybe bound: the room stays booked until a read of the pod (or the watch) tells.
            checks = ctx.assumed.mark_unknown(pod)
            if checks == 0:  # the watch has settled it meanwhile (bound or gone)
                return
            if checks > READBACKS and self.watch_settled(pod):
                # No read could tell (refused, or the API keeps failing them) for about a minute,
                # while the watch kept delivering and still shows the pod unbound: a bind that
                # landed would have shown by now. The room is freed and the pod queued again.
                ctx.assumed.release(pod)
                log.error("bind of %s to %s: no read-back could tell (%s); the watch shows it unbound: "
                          "re-queued", pod.key, node, out.reason)  # fmt: skip
                return
            delay = min(30.0, 2.0 ** max(0, checks - 1))
            self.recheck[pod.uid or pod.key] = (pod, node, time.monotonic() + delay)
            log.info("bind of %s to %s: %s; reading the pod back in %.0fs", pod.key, node, out.reason, delay)
            return
        ctx.assumed.release(pod)
        if out.prebind or out.result in (Result.THROTTLED, Result.UNAVAILABLE):
            delay = ctx.batcher.defer(pod.key, time.monotonic())
            log.info("%s not bound to %s (%s: %s): retried in %.1fs", pod.key, node, out.result, out.reason, delay)
        elif out.result is Result.FENCED:
            log.info("bind of %s to %s dropped: %s", pod.key, node, out.reason)
        elif out.result in (Result.CONFLICT, Result.GONE):  # bound elsewhere, or gone: the watch shows it
            log.info("bind of %s to %s: %s (%s): re-queued", pod.key, node, out.result, out.reason)
        else:  # refused (403, 422 ...): backed off like an unplaced pod, not retried every batch
            delay = ctx.batcher.defer(pod.key, time.monotonic())
            log.info("bind of %s to %s refused (%s %s): retried in %.1fs", pod.key, node, out.status, out.reason, delay)

    def watch_settled(self, pod: Pod) -> bool:
        """The pod watch has delivered an event (a bookmark will do) at least ``WATCH_SETTLE``
        seconds after the pod's bind was sent, so a bind that landed would be in its cache."""
        found = self.ctx.assumed.get(pod)
        inf = self.view.informers.get("Pod")
        if found is None or inf is None or inf.last_event is None:
            return False
        sent_ago = time.time() - found.since
        return time.monotonic() - inf.last_event < sent_ago - WATCH_SETTLE
