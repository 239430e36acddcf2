"""One cluster model from parsed objects: what a file holds or what the informers cache.

Both ``placer solve`` (a file) and ``placer run`` (informer caches) assemble the ``Cluster`` the
engine sees here: names unique per kind, pods bound to a node the cluster lacks left out (a dump is
not a consistent snapshot; an informer can see a pod before its node), and every pod's volumes
resolved against the claims, volumes and classes. A file with problems is refused (``InputError``
naming the file and the field); the controller's caches never are: problems become warnings.

Two rules protect the other pods from one pod placer cannot fully read: a running pod whose
requests cannot be read (``Pod.unaccounted``) makes its node take no new pod (it is cordoned in
the model, with a warning) until fixed, since nobody knows how much room is left there; a pod
asking for an extended resource that a DeviceClass backs is allocated by DRA and so is
``Unsupported``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from placer.errors import InputError
from placer.inputs.kubectl import DRA_CLASS_PREFIX, KubeObjects, dra_reason
from placer.inputs.volumes import Storage, resolve_volumes
from placer.models import Cluster, Node, Pod

__all__ = ["assemble_cluster"]

T = TypeVar("T")


def _duplicates(what: str, names: Sequence[str]) -> tuple[int, str] | None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            return i, name
        seen.add(name)
    return None


def _first_of_each(items: Sequence[T], key: Callable[[T], str]) -> list[T]:
    seen: set[str] = set()
    out = []
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return out


def assemble_cluster(objs: KubeObjects, *, source: str | None = None) -> Cluster:
    """The cluster of ``objs``. With ``source`` (a file name) problems are errors; without it
    (the controller's caches) a duplicate keeps its first object and an empty cluster is valid."""
    warnings = list(objs.warnings)
    if source is not None and not objs.nodes:
        raise InputError(source, "nodes", "the cluster has no nodes")
    kinds = (
        ("nodes", [n.name for n in objs.nodes]),
        ("pods", [p.key for p in objs.pods]),
        ("persistentVolumes", [v.name for v in objs.volumes]),
        ("persistentVolumeClaims", [c.key for c in objs.claims]),
        ("storageClasses", [c.name for c in objs.classes]),
    )
    for what, keys in kinds:
        duplicate = _duplicates(what, keys)
        if duplicate is not None:
            if source is not None:
                raise InputError(source, f"{what}[{duplicate[0]}]", f"duplicate name {duplicate[1]!r}")
            warnings.append(f"{what}: duplicate name {duplicate[1]!r}; the first one is used")
    nodes = _first_of_each(objs.nodes, lambda n: n.name)
    names = {n.name for n in nodes}
    kept = []
    for pod in _first_of_each(objs.pods, lambda p: p.key):
        if pod.node_name is not None and pod.node_name not in names:
            warnings.append(
                f"pod {pod.key} is bound to node {pod.node_name!r}, which is not in the cluster; it is ignored"
            )
            continue
        kept.append(pod)
    nodes = _cordon_unaccounted(nodes, kept, warnings)
    kept = [_refuse_dra(pod, objs.device_resources) for pod in kept]
    storage = Storage.of(objs.volumes, objs.claims, objs.classes)
    return Cluster(
        nodes=tuple(nodes),
        pods=tuple(resolve_volumes(kept, storage, len(nodes))),
        pdbs=tuple(objs.pdbs),
        replicasets=tuple(objs.replicasets),
        jobs=tuple(objs.jobs),
        namespaces=objs.namespaces,
        warnings=tuple(warnings),
    )


def _cordon_unaccounted(nodes: list[Node], pods: list[Pod], warnings: list[str]) -> list[Node]:
    blocked: dict[str, str] = {}
    for pod in pods:
        if pod.running and pod.unaccounted is not None and pod.node_name is not None:
            blocked.setdefault(pod.node_name, pod.key)
    for name, key in sorted(blocked.items()):
        warnings.append(f"node {name} takes no new pod: the requests of pod {key} on it cannot be read")
    return [n.model_copy(update={"unschedulable": True}) if n.name in blocked else n for n in nodes]


def _refuse_dra(pod: Pod, device_resources: set[str]) -> Pod:
    if pod.unsupported is not None:
        return pod
    backed = sorted(r for r in pod.requests if r in device_resources or r.startswith(DRA_CLASS_PREFIX))
    if not backed:
        return pod
    return pod.model_copy(update={"unsupported": dra_reason(f"{backed[0]}, backed by a DeviceClass")})
