"""Which running pods a global plan may touch, and how.

- never evicted: DaemonSet pods, mirror/static pods, pods placer cannot fully read
  (``Pod.unevictable``), pods covered by more than one PodDisruptionBudget (the Eviction API
  refuses them), and pods using host ports (kept fixed: the plan does not model port clashes of
  moved pods);
- opted out (``opted_out``): pods annotated ``placer.io/evictable: "false"`` or
  ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, and pods moved too recently (the
  planner's ``held``): never moved or rebalanced, but preempted by a pod of strictly higher
  ``spec.priority`` like any other (kube-scheduler ignores such opt-outs when it preempts, so no
  tenant can shield its pods from a higher priority by annotating them);
- movable: owned by a ReplicaSet whose template has the placer scheduler name (its replacement
  comes back and is bound where the plan says); for rebalancing (``jobs``) also owned by a Job
  with that scheduler name that opts in (``Job.opted_in``: evictions do not count as failures, or
  its owner accepted that a moved pod restarts its work);
- preemptible: anything else not excluded above, as a victim of a strictly higher key only (an
  opted-out pod: of a strictly higher priority only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from placer.engine import Snapshot, selector_matches
from placer.models import Cluster, Job, Pod, PodDisruptionBudget

__all__ = ["Eligibility", "calm", "classify", "could_evict", "opted_out", "owning_job"]

OPT_OUT = (("placer.io/evictable", "false"), ("cluster-autoscaler.kubernetes.io/safe-to-evict", "false"))


@dataclass(frozen=True)
class Eligibility:
    pod: Pod
    evictable: bool
    movable: bool
    pdbs: tuple[int, ...]  # indices into Cluster.pdbs
    why_not: str = ""
    opted_out: bool = False  # never moved; preempted by a strictly higher priority only


def opted_out(pod: Pod) -> bool:
    """The pod's annotations ask placer not to evict it (which holds against moves, not against
    a strictly higher priority's preemption)."""
    return any(pod.annotations.get(k) == v for k, v in OPT_OUT)


def _never_evicted(pod: Pod) -> str:
    """Why no plan may evict the pod at all, even to preempt it ('' when one may)."""
    if pod.owner is not None and pod.owner.kind == "DaemonSet":
        return "DaemonSet pod"
    if pod.mirror:
        return "mirror/static pod"
    if pod.unevictable:
        return f"placer cannot read it: {pod.unevictable}"
    if pod.host_ports:
        return "uses host ports"
    return ""


def _pdbs_of(pod: Pod, pdbs: Sequence[PodDisruptionBudget]) -> tuple[int, ...]:
    return tuple(
        i for i, b in enumerate(pdbs) if b.namespace == pod.namespace and selector_matches(b.selector, pod.labels)
    )


def owning_job(cluster: Cluster, pod: Pod) -> Job | None:
    if pod.owner is None or pod.owner.kind != "Job":
        return None
    return next((j for j in cluster.jobs if j.namespace == pod.namespace and j.name == pod.owner.name), None)


def classify(cluster: Cluster, pod: Pod, scheduler_name: str, *, jobs: bool = False) -> Eligibility:
    pdbs = _pdbs_of(pod, cluster.pdbs)
    reason = _never_evicted(pod)
    if not reason and len(pdbs) > 1:
        reason = "covered by more than one PodDisruptionBudget"
    if reason:
        return Eligibility(pod=pod, evictable=False, movable=False, pdbs=pdbs, why_not=reason)
    if opted_out(pod):
        return Eligibility(pod=pod, evictable=True, movable=False, pdbs=pdbs, why_not="opted out", opted_out=True)
    movable = False
    if pod.owner is not None and pod.owner.kind == "ReplicaSet":
        movable = any(
            rs.namespace == pod.namespace and rs.name == pod.owner.name and rs.scheduler_name == scheduler_name
            for rs in cluster.replicasets
        )
    elif jobs:
        job = owning_job(cluster, pod)
        movable = job is not None and job.opted_in and job.scheduler_name == scheduler_name
    return Eligibility(pod=pod, evictable=True, movable=movable, pdbs=pdbs)


def could_evict(state: Snapshot) -> bool:
    """Whether any running pod could be evicted at all (a cheap test before keeping time for a
    global plan): something not a DaemonSet, mirror, unreadable or host-port pod runs somewhere."""
    return any(not _never_evicted(p) for pods in state.running for p in pods)


def calm(pending: Sequence[Pod], state: Snapshot) -> frozenset[str]:
    """Pending pods that may cause no eviction, as kube-scheduler's PodEligibleToPreemptOthers
    decides: ``preemptionPolicy: Never``, or a nomination to a node where a lower-priority pod is
    still terminating (the victims of an earlier preemption for it are not gone yet)."""
    index = {node.name: i for i, node in enumerate(state.nodes)}

    def waits(pod: Pod) -> bool:
        n = index.get(pod.nominated_node or "")
        return n is not None and any(p.terminating and p.priority < pod.priority for p in state.running[n])

    return frozenset(p.key for p in pending if p.preemption_policy == "Never" or waits(p))
