"""PodGroup status conditions, written as kube-scheduler writes them (``k8s.io/kubernetes``
v1.37.2 ``pkg/scheduler/schedule_one_podgroup.go`` ``updatePodGroupCondition``), off the
scheduling path.

- ``PodGroupInitiallyScheduled`` (1.36's ``v1alpha2``: ``PodGroupScheduled``): ``True``, reason
  ``Scheduled``, empty message, once every pod placer placed for the group is bound (placer places a
  gang whole, so with its running members that is at least ``minCount``); ``False``, reason
  ``Unschedulable``, with kube-scheduler's words, when the group's pods are reported unschedulable.
  Once ``True`` it never goes back to ``False`` (upstream's rule: a terminal state).
- ``DisruptionTarget``: ``True``, reason ``PreemptionByScheduler``, when a plan preempts a member
  (the condition type and reason ``k8s.io/api`` scheduling/v1beta1 declares for PodGroups; kube-
  scheduler 1.37.2 itself writes it only on the victim pods, which the Eviction API marks for placer).

Only groups of the Workload API (``spec.schedulingGroup.podGroupName``) whose pods this scheduler
places, and only a gang's (a ``basic`` group's pods carry no group name once read). A condition is
a strategic-merge patch of the ``status`` subresource in the newest version the server serves
(``v1beta1``, else ``v1alpha2``); ``observedGeneration`` is the group's ``metadata.generation``,
``lastTransitionTime`` moves only when the status changes (``meta.SetStatusCondition``). A condition
the cached object (or this replica's last patch) already carries is not patched again. One write
per group and type is queued (a newer one replaces it), at most ``QUEUE_MAX``; writes draw only on
the write bucket's tokens above a reserve, as the unschedulable reports do.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from placer.inputs.kinds import BY_NAME
from placer.kube.informers import BETA_POD_GROUP, WORKLOAD_POD_GROUP
from placer.kube.sendqueue import KeyedQueue
from placer.models import Pod
from placer.plan import Plan

__all__ = ["APIS", "DISRUPTION", "QUEUE_MAX", "GroupApi", "GroupStatus", "condition_of"]

log = logging.getLogger("placer.kube.groupstatus")
QUEUE_MAX = 5000  # group conditions waiting
TRACKED_MAX = 20000  # groups whose binds are being awaited, and last patches remembered
DISRUPTION = "DisruptionTarget"
Raw = dict[str, Any]


@dataclass(frozen=True)
class GroupApi:
    """A served PodGroup version: its informer, its path and its name of the scheduled condition."""

    informer: str
    path: str  # "/apis/scheduling.k8s.io/v1beta1"
    scheduled: str  # "PodGroupInitiallyScheduled" (v1beta1), "PodGroupScheduled" (v1alpha2)


APIS = (
    GroupApi(BETA_POD_GROUP, BY_NAME[BETA_POD_GROUP].group_path, "PodGroupInitiallyScheduled"),
    GroupApi(WORKLOAD_POD_GROUP, BY_NAME[WORKLOAD_POD_GROUP].group_path, "PodGroupScheduled"),
)


@dataclass(frozen=True)
class _Want:
    kind: str  # "scheduled" (the version's name for it) or DISRUPTION
    status: str
    reason: str
    message: str


def condition_of(raw: Raw | None, ctype: str) -> Raw | None:
    """The condition ``ctype`` of a cached PodGroup, if it carries one."""
    conditions = ((raw or {}).get("status") or {}).get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GroupStatus(KeyedQueue[tuple[str, str], tuple[str, _Want]]):
    def __init__(
        self,
        actions: Callable[[], Any],
        *,
        cached: Callable[[str, str], Raw | None],
        scheduler_name: str,
        apis: Sequence[GroupApi] = APIS,
        counted: Callable[[str], None] | None = None,
        queue_max: int = QUEUE_MAX,
    ) -> None:
        super().__init__(name="PodGroup condition", log=log, counted=counted, queue_max=queue_max)
        self._actions = actions  # placer.kube.actions.Actions (tests swap in a fake)
        self._cached = cached  # (informer, "ns/name") -> the cached object, None if not there
        self._apis = tuple(apis)  # preferred first
        self._scheduler = scheduler_name
        self._sent: OrderedDict[tuple[str, str, str], tuple[str, str, str, object]] = OrderedDict()
        self._awaited: OrderedDict[str, set[str]] = OrderedDict()  # group -> pods placed, not yet bound
        self._group_of: dict[str, str] = {}  # pod -> the awaited group it belongs to
        self._victims: dict[str, tuple[Pod, bool]] = {}  # the running plan's preempted pods -> for a group?
        self._lock = threading.Lock()  # the awaited binds (bind workers and the loop report them)

    # -- what the controller tells ----------------------------------------------------------------
    def _group(self, pod: Pod) -> str | None:
        if pod.gang_object != "workload" or pod.gang is None or pod.scheduler_name != self._scheduler:
            return None
        return f"{pod.namespace}/{pod.gang}"

    def placed(self, pods: Iterable[Pod]) -> None:
        """Pods whose binds were just sent: each group among them is scheduled once all are bound."""
        by_group: dict[str, set[str]] = {}
        for pod in pods:
            if (group := self._group(pod)) is not None:
                by_group.setdefault(group, set()).add(pod.key)
        with self._lock:
            for group, keys in by_group.items():
                for old in self._awaited.pop(group, ()):
                    self._group_of.pop(old, None)
                self._awaited[group] = keys
                self._group_of.update(dict.fromkeys(keys, group))
            while len(self._awaited) > TRACKED_MAX:
                for old in self._awaited.popitem(last=False)[1]:
                    self._group_of.pop(old, None)

    def bound(self, key: str) -> None:
        """Pod ``key``'s bind landed."""
        with self._lock:
            group = self._group_of.pop(key, None)
            if group is None:
                return
            left = self._awaited.get(group)
            if left is None:
                return
            left.discard(key)
            if left:
                return
            del self._awaited[group]
        self._submit(group, _Want("scheduled", "True", "Scheduled", ""))

    def unschedulable(self, pod: Pod, message: str) -> None:
        """Pod ``pod`` of a group was reported unschedulable (kube-scheduler's words)."""
        if (group := self._group(pod)) is not None:
            self._submit(group, _Want("scheduled", "False", "Unschedulable", message))

    def planned(self, plan: Plan) -> None:
        """A plan started: its binds are awaited as ``placed``; its preemptions are remembered for
        ``evicted`` (a move is no preemption)."""
        self.placed(pod for pod, _ in plan.placements)
        gangs = {pod.key for pod, _ in plan.placements if pod.gang_object == "workload" and pod.gang is not None}
        with self._lock:
            self._victims = {
                e.pod.key: (e.pod, any(key in gangs for key in e.for_)) for e in plan.evictions if e.kind == "preempt"
            }

    def evicted(self, key: str) -> None:
        """The running plan's eviction of pod ``key`` landed."""
        with self._lock:
            victim = self._victims.pop(key, None)
        if victim is not None and (group := self._group(victim[0])) is not None:
            preemptor = "PodGroup" if victim[1] else "Pod"
            message = f"{self._scheduler}: preempting to accommodate a higher priority {preemptor}"
            self._submit(group, _Want(DISRUPTION, "True", "PreemptionByScheduler", message))

    # -- the sender ----------------------------------------------------------------------------------
    def _submit(self, group: str, want: _Want) -> None:
        self._put((group, want.kind), (group, want))

    def _send(self, item: tuple[str, _Want]) -> None:
        self._counted(self._patch(*item))

    def _patch(self, group: str, want: _Want) -> str:
        found = next(((api, raw) for api in self._apis if (raw := self._cached(api.informer, group)) is not None), None)
        if found is None:
            return "gone"  # deleted meanwhile, or a version placer does not watch
        api, raw = found
        ctype = api.scheduled if want.kind == "scheduled" else DISRUPTION
        generation = (raw.get("metadata") or {}).get("generation")
        now = condition_of(raw, ctype)
        slot = (api.informer, group, ctype)
        was = {now.get("status") if now is not None else None, (self._sent.get(slot) or (None,))[0]}
        if ctype == api.scheduled and "True" in was and want.status != "True":
            return "unchanged"  # upstream never takes a group's first scheduling back
        shown = (now.get("status"), now.get("reason"), now.get("message") or "") if now is not None else None
        mine = (want.status, want.reason, want.message)
        if shown == mine or self._sent.get(slot) == (*mine, generation):
            return "unchanged"
        condition: Raw = {"type": ctype, **dict(zip(("status", "reason", "message"), mine, strict=True))}
        condition["lastTransitionTime"] = (
            now.get("lastTransitionTime") if now is not None and now.get("status") == want.status else None
        ) or _now()
        if isinstance(generation, int):
            condition["observedGeneration"] = generation
        out = self._actions().pod_group_condition(api.path, group, condition)
        if not out.ok:
            return "failed"
        self._sent[slot] = (*mine, generation)
        self._sent.move_to_end(slot)
        while len(self._sent) > TRACKED_MAX:
            self._sent.popitem(last=False)
        return "patched"
