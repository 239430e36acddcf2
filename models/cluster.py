"""The cluster as placer sees it: nodes, pods, disruption budgets and ReplicaSets.

These are normalised shapes, independent of the Kubernetes API objects they are read from
(`placer.inputs` does that). Resource amounts are integers in scheduler units: millicores for
``cpu``, base units (bytes, counts, Mbit/s) for everything else.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "POD_COUNT",
    "ClaimRef",
    "Cluster",
    "GroupDomain",
    "GroupQuorum",
    "HostPort",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "Owner",
    "Pod",
    "PodAffinityTerm",
    "PodDisruptionBudget",
    "PreferredTerm",
    "ReplicaSet",
    "SpreadConstraint",
    "Taint",
    "Toleration",
    "WeightedPodAffinityTerm",
]

POD_COUNT = "pods"

NodeOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
RestartPolicy = Literal["Always", "OnFailure", "Never"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeSelectorRequirement(_Frozen):
    key: str
    operator: NodeOperator
    values: tuple[str, ...] = ()


class NodeSelectorTerm(_Frozen):
    """Requirements ANDed together. A term with no requirement at all matches no node."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class PreferredTerm(_Frozen):
    weight: int = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class Taint(_Frozen):
    key: str
    value: str = ""
    effect: TaintEffect


class Toleration(_Frozen):
    key: str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = ""
    effect: TaintEffect | Literal[""] = ""


class HostPort(_Frozen):
    port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: str = "0.0.0.0"


class Owner(_Frozen):
    kind: str
    name: str
    uid: str = ""


class LabelSelectorRequirement(_Frozen):
    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()


class LabelSelector(_Frozen):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class PodAffinityTerm(_Frozen):
    """One inter-pod (anti-)affinity term, resolved when read.

    ``selector`` already includes the requirements of matchLabelKeys (key In [own value]) and
    mismatchLabelKeys (key NotIn [own value]); a null selector matches no pod. The namespaces a
    term looks at are ``namespaces`` plus those ``namespace_selector`` selects (an empty selector:
    all); when the object gave neither, ``namespaces`` holds the pod's own namespace.
    """

    selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    topology_key: str = Field(min_length=1)


class WeightedPodAffinityTerm(_Frozen):
    weight: int = Field(ge=1, le=100)
    term: PodAffinityTerm


class SpreadConstraint(_Frozen):
    """A topology spread constraint; ``selector`` already includes matchLabelKeys (key In [own value])."""

    max_skew: int = Field(ge=1)
    topology_key: str = Field(min_length=1)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = "DoNotSchedule"
    selector: LabelSelector | None = None
    min_domains: int | None = Field(default=None, ge=1)
    node_affinity_policy: Literal["Honor", "Ignore"] = "Honor"
    node_taints_policy: Literal["Honor", "Ignore"] = "Ignore"


class ClaimRef(_Frozen):
    """An unbound PersistentVolumeClaim of a pod whose StorageClass binds on first consumer: the
    scheduler chooses the node and records it on the claim (``volume.kubernetes.io/selected-node``)."""

    namespace: str = "default"
    name: str


class GroupDomain(_Frozen):
    """One level of a pod's workload group (Kubernetes 1.37) whose pods must all sit in one domain
    of a node label: ``group`` names the level (``PodGroup ns/name`` or ``CompositePodGroup
    ns/name``), ``key`` is its ``schedulingConstraints.topology[].key``."""

    group: str = Field(min_length=1)
    key: str = Field(min_length=1)


class GroupQuorum(_Frozen):
    """A CompositePodGroup above a pod (Kubernetes 1.37, ``schedulingPolicy.gang.minGroupCount``):
    at least ``min_groups`` of its child groups are placed together, or none of its pods is.
    ``group`` names the composite (``CompositePodGroup ns/name``), ``child`` the child group the
    pod belongs to below it (``PodGroup ns/name`` or ``CompositePodGroup ns/name``)."""

    group: str = Field(min_length=1)
    child: str = Field(min_length=1)
    min_groups: int = Field(ge=1)


class Node(_Frozen):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, int] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


class Pod(_Frozen):
    namespace: str = "default"
    name: str
    uid: str = ""
    node_name: str | None = None
    phase: str = "Pending"
    scheduler_name: str = "default-scheduler"
    creation: str = ""
    start_time: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    requests: dict[str, int] = Field(default_factory=dict)
    # kube-scheduler scores with 100m cpu / 200Mi memory for containers that request none.
    score_cpu: int = 0
    score_memory: int = 0
    node_selector: dict[str, str] = Field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    preferred_terms: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    priority: int = 0
    restart_policy: RestartPolicy = "Always"
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    owner: Owner | None = None
    scheduling_gates: tuple[str, ...] = ()
    mirror: bool = False
    # Gang (all-or-nothing group): namespace-scoped name and expected size (None: the members present).
    gang: str | None = None
    gang_size: int | None = None
    # Which PodGroup object declares the gang and its size: the Workload API's
    # (spec.schedulingGroup.podGroupName) or scheduler-plugins' (its pod-group label); None:
    # placer's own annotations.
    gang_object: Literal["workload", "plugins"] | None = None
    # Kubernetes 1.37 workloads (``placer.inputs.workloads``): the levels of the pod's group that
    # must each sit in one topology domain, innermost (its PodGroup) first, then composite parents.
    group_domains: tuple[GroupDomain, ...] = ()
    # The composite gangs above the pod's group (``minGroupCount``), innermost first.
    group_quorums: tuple[GroupQuorum, ...] = ()
    # The group this pod is disrupted with, whole or not at all (the outermost level with
    # ``disruptionMode: all``); None: the pod may be disrupted alone.
    disruption_unit: str | None = None
    # Inter-pod affinity and anti-affinity (required: hard; preferred: weighted) and spreading.
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    # Volumes: each entry is one bound PersistentVolume's node affinity (its terms ORed); every
    # entry must hold. Unlike node affinity, weak-binding annotations never drop these.
    volume_terms: tuple[tuple[NodeSelectorTerm, ...], ...] = ()
    # Unbound WaitForFirstConsumer claims the controller annotates with the chosen node before binding.
    wffc_claims: tuple[ClaimRef, ...] = ()
    # PersistentVolumeClaim names the pod mounts (spec.volumes, generic ephemeral volumes included).
    claims: tuple[str, ...] = ()
    # Those of ``claims`` that come from generic ephemeral volumes (upstream words their absence apart).
    ephemeral_claims: tuple[str, ...] = ()
    # Why no node can take the pod's volumes (kube-scheduler's VolumeBinding message), if so.
    volume_problem: str | None = None
    # Being deleted (metadata.deletionTimestamp): kube-scheduler does not count it for spreading.
    terminating: bool = False
    # status.nominatedNodeName: room a scheduler's preemption freed for this pending pod.
    nominated_node: str | None = None
    # Why the engine refuses to place this pod (a constraint kind it cannot honour, or with
    # ``invalid`` a field placer cannot read, named in the text).
    unsupported: str | None = None
    # The refusal is about a field placer cannot read (code Invalid), not a constraint it lacks.
    invalid: bool = False
    # ``placer.io/moved-at`` in seconds since the epoch (None: never moved by placer); an
    # unreadable stamp reads as infinitely recent, so the pod is not moved again until it is fixed.
    moved_at: float | None = None
    # Why the pod's requests could not be read (None: read). A running pod is kept with what could
    # be read and its node takes no new pod until it is fixed.
    unaccounted: str | None = None
    # Unreadable fields that were given their safe reading, one line each (for warnings).
    problems: tuple[str, ...] = ()
    # Why placer cannot tell what evicting this pod means (its requests, priority or owner are
    # unreadable): it is never evicted, not even by a higher priority's preemption (None: it may be).
    unevictable: str | None = None
    # An Indexed Job's completion index (label/annotation batch.kubernetes.io/job-completion-index);
    # a moved pod's replacement keeps it.
    completion_index: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def running(self) -> bool:
        """Bound and holding resources (Succeeded/Failed pods hold nothing)."""
        return self.node_name is not None and self.phase not in ("Succeeded", "Failed")

    @property
    def pending(self) -> bool:
        return self.node_name is None and self.phase == "Pending"

    @property
    def gang_key(self) -> str | None:
        """The gang the pod belongs to, namespace-qualified (None: not in a gang)."""
        return f"{self.namespace}/{self.gang}" if self.gang else None

    @property
    def batch_unit(self) -> str | None:
        """What a batch never splits: the outermost composite gang above the pod (its children
        are placed together or not at all), else its gang (None: neither)."""
        return self.group_quorums[-1].group if self.group_quorums else self.gang_key

    def awaits(self, scheduler_name: str) -> bool:
        """Pending for ``scheduler_name`` ('*': any) and schedulable now: not being deleted (a
        terminating pod is never placed) and not held by scheduling gates."""
        return (
            self.pending
            and scheduler_name in ("*", self.scheduler_name)
            and not self.terminating
            and not self.scheduling_gates
        )


class PodDisruptionBudget(_Frozen):
    namespace: str = "default"
    name: str
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0


class ReplicaSet(_Frozen):
    namespace: str = "default"
    name: str
    uid: str = ""
    scheduler_name: str = "default-scheduler"
    owner: Owner | None = None
    selector: LabelSelector | None = None
    ready_replicas: int = 0  # status.readyReplicas


class Job(_Frozen):
    """A batch/v1 Job, as far as moving its pods goes (rebalancing, issue 15)."""

    namespace: str = "default"
    name: str
    uid: str = ""
    scheduler_name: str = "default-scheduler"  # its pod template's
    indexed: bool = False  # spec.completionMode Indexed: a replacement keeps the completion index
    backoff_limit: int = 6
    failed: int = 0  # status.failed: the Job controller's backoff before a replacement grows with it
    # spec.podFailurePolicy has a rule ``action: Ignore`` on the DisruptionTarget condition: an
    # evicted pod does not count toward backoffLimit (its replacement appears once it is gone).
    ignores_disruption: bool = False
    # The Job's annotation ``placer.io/rebalance: restarts-work``: its owner accepts that a moved
    # pod starts its work again and that the eviction counts as a failure.
    accepts_restarts: bool = False

    @property
    def opted_in(self) -> bool:
        """Its pods may be moved: evictions do not count as failures, or the owner accepted it."""
        return self.ignores_disruption or self.accepts_restarts

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Cluster(_Frozen):
    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    replicasets: tuple[ReplicaSet, ...] = ()
    jobs: tuple[Job, ...] = ()
    # Namespace name -> its labels, for namespaceSelector. A namespace missing here has only the
    # label kubernetes.io/metadata.name, which the API server sets on every namespace.
    namespaces: dict[str, dict[str, str]] = Field(default_factory=dict)
    warnings: tuple[str, ...] = ()
