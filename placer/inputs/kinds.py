"""The one registry of the Kubernetes kinds placer reads, and of the API writes it makes.

Each ``Kind`` says where the objects are served (API group, version, plural), how an object is
read (``read``: an item of a List, a file's errors naming its path; ``parse``: an object as the
API returns it, for the controller's caches, whose problems stay with the object), which field
of ``KubeObjects`` it fills, who reads it (``sources``: a dump, ``placer solve`` against a cluster,
the controller's informers, the controller's periodic reads) and, from that, the RBAC rule the
controller's ServiceAccount needs. An ``optional`` kind is read only where discovery says the
server serves it; kinds of one ``family`` are the same objects in several versions, preferred
first, and only the first one served is read.

Everything that lists, watches, dumps or grants a kind goes through this table: the dump reader
(``placer.inputs.dump``), the live read (``placer.kube.live``), the informers and the cluster view
of the controller (``placer.kube.informers``, ``placer.kube.view``) and the test that the shipped
RBAC grants exactly what is needed (``tests/test_rbac.py``). It is pure: only ``placer.kube``
talks to the API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from placer.inputs.fields import Field
from placer.inputs.kubectl import (
    parse_job,
    parse_namespace,
    parse_namespace_item,
    parse_node,
    parse_pdb,
    parse_pod,
    parse_replicaset,
    read_job,
    read_node,
    read_pdb,
    read_pod,
    read_replicaset,
)
from placer.inputs.podgroups import (
    PLUGINS_API,
    parse_composite_pod_group,
    parse_plugins_pod_group,
    parse_workload_pod_group,
    read_pod_group,
)
from placer.inputs.volumes import (
    parse_claim,
    parse_persistent_volume,
    parse_storage_class,
    read_claim,
    read_persistent_volume,
    read_storage_class,
)
from placer.inputs.workloads import COMPOSITE_API, COMPOSITE_KIND, WORKLOAD_APIS

__all__ = [
    "BY_NAME",
    "KINDS",
    "WRITES",
    "Kind",
    "Need",
    "Source",
    "Write",
    "controller_needs",
    "dump_kinds",
    "for_item",
]

Source = Literal["dump", "live", "watch", "poll"]
Scope = Literal["cluster", "scheduled", "lease", "nodes"]
DUMP: Source = "dump"  # a file (``placer solve FILE``)
LIVE: Source = "live"  # ``placer solve --kubeconfig`` (the user's credentials)
WATCH: Source = "watch"  # the controller's informers
POLL: Source = "poll"  # the controller's periodic reads
EVERYWHERE: tuple[Source, ...] = (DUMP, LIVE, WATCH)


def _device_resource(item: Field) -> str:
    """A DeviceClass's extended resource (``spec.extendedResourceName``), '' when it backs none."""
    return item.get("spec").get("extendedResourceName").text()


@dataclass(frozen=True)
class Kind:
    name: str  # unique: the informer's and the parsed index's name
    kind: str
    group: str  # "" for the core API
    version: str
    plural: str
    field: str  # the KubeObjects attribute it fills ('' : none)
    read: Callable[[Field], Any] | None  # a List's item (dumps and live reads)
    parse: Callable[[Any], Any] | None  # an API object (the controller's caches)
    why: str
    sources: tuple[Source, ...] = EVERYWHERE
    verbs: tuple[str, ...] = ("list", "watch")  # what the controller does with it
    optional: bool = False  # read only where discovery says the server serves it
    family: str = ""  # the same objects in several versions: the first one served is read

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_path(self) -> str:
        """The group/version's discovery path."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def path(self) -> str:
        """The cluster-wide collection (list and watch across all namespaces)."""
        return f"{self.group_path}/{self.plural}"

    def fill(self, objs: Any, values: list[Any]) -> None:
        """Add ``values`` (what ``read`` or ``parse`` gave) to the field of ``objs`` it fills."""
        if not self.field:
            return
        target = getattr(objs, self.field)
        if isinstance(target, dict):
            target.update(values)
        elif isinstance(target, set):
            target.update(v for v in values if v)
        else:
            target.extend(values)


_WORKLOAD = "the Workload API's PodGroups: gangs (GangScheduling)"
KINDS: tuple[Kind, ...] = (
    Kind("Node", "Node", "", "v1", "nodes", "nodes", read_node, parse_node, "the nodes and their room"),
    Kind("Pod", "Pod", "", "v1", "pods", "pods", read_pod, parse_pod, "running and pending pods",
         verbs=("get", "list", "watch")),  # get: a bind's or an eviction's read-back (actions._read_pod)
    Kind("PodDisruptionBudget", "PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", "pdbs", read_pdb,
         parse_pdb, "disruption budgets of the plan's evictions"),
    Kind("ReplicaSet", "ReplicaSet", "apps", "v1", "replicasets", "replicasets", read_replicaset, parse_replicaset,
         "owners whose replacements a plan captures"),
    Kind("Job", "Job", "batch", "v1", "jobs", "jobs", read_job, parse_job,
         "whether rebalancing may move a Job's pods, and how their replacements come"),
    Kind("Namespace", "Namespace", "", "v1", "namespaces", "namespaces", parse_namespace_item, parse_namespace,
         "labels for namespaceSelector"),
    Kind("PersistentVolume", "PersistentVolume", "", "v1", "persistentvolumes", "volumes", read_persistent_volume,
         parse_persistent_volume, "a bound volume's node affinity"),
    Kind("PersistentVolumeClaim", "PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", "claims", read_claim,
         parse_claim, "a pod's claims: bound volumes, WaitForFirstConsumer"),
    Kind("StorageClass", "StorageClass", "storage.k8s.io", "v1", "storageclasses", "classes", read_storage_class,
         parse_storage_class, "binding modes and allowed topologies"),
    # Gangs declared by objects, where the server serves them (placer.inputs.podgroups, .workloads).
    *(
        Kind(name, "PodGroup", "scheduling.k8s.io", api.split("/")[1], "podgroups", "pod_groups", read_pod_group,
             parse_workload_pod_group, _WORKLOAD, optional=True, family="workload-podgroups")
        for name, api in zip(
            ("PodGroup.scheduling.k8s.io/v1beta1", "PodGroup.scheduling.k8s.io/v1alpha3", "PodGroup.scheduling.k8s.io"),
            WORKLOAD_APIS,
            strict=True,
        )
    ),
    Kind("PodGroup.scheduling.x-k8s.io", "PodGroup", PLUGINS_API.split("/")[0], PLUGINS_API.split("/")[1],
         "podgroups", "pod_groups", read_pod_group, parse_plugins_pod_group,
         "scheduler-plugins' PodGroups: gangs (Coscheduling)", optional=True),
    Kind("CompositePodGroup.scheduling.k8s.io", COMPOSITE_KIND, COMPOSITE_API.split("/")[0],
         COMPOSITE_API.split("/")[1], "compositepodgroups", "pod_groups", read_pod_group, parse_composite_pod_group,
         "1.37's CompositePodGroups: the parents of PodGroups", optional=True),
    # Extended resources a DeviceClass backs (DRA): such pods are left to kube-scheduler. Read from
    # dumps only: the controller never binds a DRA pod, whatever backs it.
    Kind("DeviceClass", "DeviceClass", "resource.k8s.io", "v1", "deviceclasses", "device_resources",
         _device_resource, None, "extended resources allocated by DRA", sources=(DUMP,)),
    # Measured usage for rebalancing by load (placer.kube.usage; files: placer.inputs.usage).
    Kind("PodMetrics", "PodMetrics", "metrics.k8s.io", "v1beta1", "pods", "", None, None,
         "measured usage (rebalance.load: usage)", sources=(POLL,), verbs=("list",)),
)  # fmt: skip
BY_NAME = {k.name: k for k in KINDS}
assert len(BY_NAME) == len(KINDS), "kind names are unique"


def dump_kinds() -> list[str]:
    """Every kind a dump may hold (``kubectl get`` their plurals)."""
    return list(dict.fromkeys(k.kind for k in KINDS if DUMP in k.sources))


def for_item(kind: str, api_version: str) -> Kind | None:
    """The kind a List's item is, None when placer does not read it. An optional kind is matched
    with its version (the gang APIs share a kind name); the others by kind alone."""
    for k in KINDS:
        if DUMP in k.sources and k.kind == kind and (not k.optional or k.api_version == api_version):
            return k
    return None


@dataclass(frozen=True)
class Write:
    """An API call the controller makes besides reading the kinds above."""

    group: str
    resource: str
    verb: str
    scope: Scope  # where: the namespaces it schedules, the Lease's, the nodes' events ("default")
    why: str


WRITES: tuple[Write, ...] = (
    Write("", "pods/binding", "create", "scheduled", "binds (actions.bind)"),
    Write("", "pods/eviction", "create", "scheduled", "a plan's evictions, labels policy reschedule"),
    Write("", "pods/status", "patch", "scheduled", "PodScheduled=False conditions, nominatedNodeName"),
    Write("", "pods", "patch", "scheduled", "placer.io/moved-at on a plan's replacements"),
    Write("", "pods", "delete", "scheduled", "labels policy kill"),
    Write("", "persistentvolumeclaims", "patch", "scheduled", "selected-node before a WaitForFirstConsumer bind"),
    Write("scheduling.k8s.io", "podgroups/status", "patch", "scheduled", "PodGroup conditions (kube.groupstatus)"),
    Write("events.k8s.io", "events", "create", "scheduled", "a pod's events (events.EventRecorder)"),
    Write("events.k8s.io", "events", "patch", "scheduled", "a repeated event's series"),
    Write("events.k8s.io", "events", "create", "nodes", "a node's events: rebalancing, usage unavailable"),
    Write("events.k8s.io", "events", "patch", "nodes", "a repeated node event's series"),
    Write("coordination.k8s.io", "leases", "get", "lease", "leader election"),
    Write("coordination.k8s.io", "leases", "create", "lease", "leader election"),
    Write("coordination.k8s.io", "leases", "update", "lease", "leader election"),
)


@dataclass(frozen=True, order=True)
class Need:
    """One grant the controller's ServiceAccount needs; ``where`` is "*" (cluster-wide) or a
    namespace."""

    group: str
    resource: str
    verb: str
    where: str


def controller_needs(*, scheduled: list[str], lease: str, nodes: str = "default") -> set[Need]:
    """Every grant ``placer run`` needs: the controller's reads of every kind it watches or polls
    (cluster-wide: a scheduler that cannot see other tenants' pods overcommits their nodes) and
    its writes, in the namespaces it schedules (``scheduled``; empty: all of them)."""
    out = {Need(k.group, k.plural, verb, "*") for k in KINDS if WATCH in k.sources or POLL in k.sources
           for verb in k.verbs}  # fmt: skip
    for w in WRITES:
        if w.scope == "lease":
            where = [lease]
        elif w.scope == "nodes":
            where = [nodes] if scheduled else ["*"]
        else:
            where = scheduled or ["*"]
        out |= {Need(w.group, w.resource, w.verb, ns) for ns in where}
    return out
