"""Who a global plan may evict, how (move or preemption) and for whom; PodDisruptionBudgets.

- never DaemonSet pods, mirror pods, pods placer cannot fully read (``Pod.unevictable``), pods
  covered by more than one PodDisruptionBudget or using host ports;
- a move only for a pod owned by a ReplicaSet whose template names the scheduler (with ``jobs``,
  rebalancing: a Job's pod whose Job opts in) and not opted out by annotation
  (``placer.io/evictable`` or ``cluster-autoscaler.kubernetes.io/safe-to-evict`` ``"false"``);
- a preemption only by a pending pod of strictly higher key and not ``preemptionPolicy: Never``,
  and of strictly higher ``spec.priority`` when the victim opted out (an opt-out holds against
  moves, never against a higher priority, as in kube-scheduler);
- every budget's evictions at most its ``disruptionsAllowed``, all evictions at most
  ``max_evictions``.
"""

from __future__ import annotations

from collections.abc import Sequence

from placer.models import (
    Cluster,
    Eviction,
    Pod,
    PodDisruptionBudget,
    ReplicaSet,
)
from placer.validate.index import ClusterIndex, addressed
from placer.validate.priorities import Tiers, outranks
from placer.validate.semantics import label_selector_matches

EVICTION_OPT_OUT = ("placer.io/evictable", "cluster-autoscaler.kubernetes.io/safe-to-evict")


def pdbs_covering(cluster: Cluster, pod: Pod) -> list[PodDisruptionBudget]:
    """The PodDisruptionBudgets of the pod's namespace whose selector matches its labels."""
    return [b for b in cluster.pdbs if covers(b, pod)]


def covers(budget: PodDisruptionBudget, pod: Pod) -> bool:
    """The budget is of the pod's namespace and its selector matches the pod's labels."""
    return budget.namespace == pod.namespace and label_selector_matches(budget.selector, pod.labels)


def eviction_refusal(cluster: Cluster, pod: Pod) -> str | None:
    """Why a global plan may never evict this running pod (None: it may, by move or preemption)."""
    if pod.owner is not None and pod.owner.kind == "DaemonSet":
        return "it is a DaemonSet pod"
    if pod.mirror:
        return "it is a mirror (static) pod"
    if pod.unevictable is not None:
        return f"placer cannot read what evicting it means ({pod.unevictable})"
    covering = pdbs_covering(cluster, pod)
    if len(covering) > 1:
        return f"it is covered by {len(covering)} PodDisruptionBudgets ({', '.join(b.name for b in covering)})"
    if pod.host_ports:
        return "it uses host ports"
    return None


def move_refusal(cluster: Cluster, pod: Pod, scheduler_name: str = "placer", *, jobs: bool = False) -> str | None:
    """Why a plan may not move this pod, on top of ``eviction_refusal`` (None: it may).

    A move evicts the pod and binds its ReplicaSet's replacement: only a ReplicaSet whose
    template names this scheduler (``"*"``: any) sends the replacement back to it. With ``jobs``
    (rebalancing) a Job's pod may move too when its Job names this scheduler and opts in: its
    podFailurePolicy ignores DisruptionTarget, or it accepts restarts (``placer.io/rebalance``).
    """
    opted = opt_out(pod)
    if opted:
        return opted
    if pod.owner is None:
        return "it is a bare pod (no owner creates a replacement)"
    if jobs and pod.owner.kind == "Job":
        job = next((j for j in cluster.jobs if j.namespace == pod.namespace and j.name == pod.owner.name), None)
        if job is None:
            return f"its Job {pod.namespace}/{pod.owner.name} is not in the cluster"
        if not addressed(job.scheduler_name, scheduler_name):
            return f"its Job is scheduled by {job.scheduler_name!r}, not {scheduler_name!r}"
        if not (job.ignores_disruption or job.accepts_restarts):
            return "its Job does not opt in to moves"
        return None
    if pod.owner.kind != "ReplicaSet":
        return f"it is owned by a {pod.owner.kind}, not a ReplicaSet"
    owners = replicasets_named(cluster, pod)
    if not owners:
        return f"its ReplicaSet {pod.namespace}/{pod.owner.name} is not in the cluster"
    if not any(addressed(r.scheduler_name, scheduler_name) for r in owners):
        return (
            f"its ReplicaSet {pod.namespace}/{pod.owner.name} is scheduled by {owners[0].scheduler_name!r}, "
            f"not {scheduler_name!r}"
        )
    return None


def replicasets_named(cluster: Cluster, pod: Pod) -> list[ReplicaSet]:
    """The ReplicaSets of the pod's namespace named as the pod's owner (whatever the owner's kind)."""
    if pod.owner is None:
        return []
    return [r for r in cluster.replicasets if r.namespace == pod.namespace and r.name == pod.owner.name]


def opt_out(pod: Pod) -> str | None:
    """The annotation by which the pod asks not to be evicted (None: it does not)."""
    for annotation in EVICTION_OPT_OUT:
        if pod.annotations.get(annotation) == "false":
            return f'it is annotated {annotation}: "false"'
    return None


def may_preempt(preemptor: Pod, victim: Pod, *, restart_tiers: Tiers = True) -> bool:
    """A pending pod may preempt a running one: it outranks it and is not ``preemptionPolicy:
    Never``; a victim opted out by annotation only by a strictly higher ``spec.priority``."""
    if preemptor.preemption_policy == "Never":
        return False
    if opt_out(victim) and preemptor.priority <= victim.priority:
        return False
    return outranks(preemptor, victim, restart_tiers=restart_tiers)


def cap_violations(index: ClusterIndex, evictions: Sequence[Eviction], max_evictions: int | None) -> list[str]:
    """Every budget's evictions at most its disruptionsAllowed; all of them at most max_evictions."""
    out: list[str] = []
    cluster, pods = index.cluster, index.pods
    evicted = [pods[e.pod] for e in evictions if e.pod in pods]
    for budget in cluster.pdbs:
        hit = sorted(p.key for p in evicted if covers(budget, p))
        if len(hit) > budget.disruptions_allowed:
            out.append(
                f"PodDisruptionBudget {budget.namespace}/{budget.name} allows {budget.disruptions_allowed} "
                f"disruption(s), the plan evicts {len(hit)}: {', '.join(hit)}"
            )
    if max_evictions is not None and len(evictions) > max_evictions:
        out.append(f"{len(evictions)} evictions exceed max_evictions {max_evictions}")
    return out
