"""The validator's rules for Kubernetes 1.37 workload groups, in its own words (no engine code).

- One domain: all pods of a level (``Pod.group_domains``: a PodGroup, or a CompositePodGroup
  and every group below it) that run or are placed sit on nodes carrying the level's topology
  label, all with the same value. A composite level holds its children's pods, so a child placed
  outside its parent's domain breaks the parent's rule: that is the nesting rule.
- Composite gangs: where a CompositePodGroup asks for ``minGroupCount`` (``Pod.group_quorums``)
  and an answer places any pod below it, at least that many of its child groups have a pod that
  runs (not ``gone``) or is placed (checked with the domains, by ``domain_violations``).
- Disruption: where a group is disrupted only as a whole (``Pod.disruption_unit``,
  ``disruptionMode: all``), a plan evicts every running pod of it or none.
- Gangs (pods sharing ``gang`` in a namespace: a PodGroup's ``minCount``): placed whole or not
  at all, and never while fewer than ``gang_size`` pods are pending or already running.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

from placer.models import Cluster, Pod
from placer.validate.index import ClusterIndex, batch_pods
from placer.validate.violations import Violation, texts


def domain_violations(cluster: Cluster, placements: Mapping[str, str], gone: Collection[str] = ()) -> list[Violation]:
    """Levels whose pods (running and not ``gone``, or pending and placed at ``placements``)
    do not share one domain of the level's key, and composite gangs placed short."""
    labels = {n.name: n.labels for n in cluster.nodes}
    where = {pod.key: node for pod, node in _positions(cluster, placements, gone)}
    levels: dict[str, tuple[str, list[Pod]]] = {}
    for pod in cluster.pods:
        if pod.key in where:
            for d in pod.group_domains:
                levels.setdefault(d.group, (d.key, []))[1].append(pod)
    out = []
    for name, (key, pods) in sorted(levels.items()):
        values: dict[str, list[str]] = {}
        for pod in pods:
            node = where[pod.key]
            value = labels.get(node, {}).get(key)
            if value is None:
                out.append(Violation("group-domain", name, f"{name}: {pod.key} on {node}, which has no label {key}"))
                continue
            values.setdefault(value, []).append(pod.key)
        if len(values) > 1:
            spread = ", ".join(f"{v} ({len(keys)})" for v, keys in sorted(values.items()))
            out.append(Violation("group-domain", name, f"{name}: pods in {len(values)} domains of {key}: {spread}"))
    return out + _quorum_violations(cluster, where, placements)


def _quorum_violations(cluster: Cluster, where: Mapping[str, str], placements: Mapping[str, str]) -> list[Violation]:
    """Composite gangs an answer places pods of with fewer child groups than ``minGroupCount``."""
    wanted: dict[str, int] = {}
    present: dict[str, set[str]] = {}
    touched: set[str] = set()
    for pod in cluster.pods:
        for q in pod.group_quorums:
            wanted[q.group] = q.min_groups
            if pod.key in where:
                present.setdefault(q.group, set()).add(q.child)
                if pod.key in placements:
                    touched.add(q.group)
    out = []
    for name in sorted(touched):
        children = present.get(name, set())
        if len(children) < wanted[name]:
            text = f"{name}: minGroupCount {wanted[name]}, but only {len(children)} child groups run or are placed"
            out.append(Violation("gang", name, text))  # a composite gang: all-or-nothing, as a gang
    return out


def _positions(cluster: Cluster, placed: Mapping[str, str], gone: Collection[str]) -> Iterator[tuple[Pod, str]]:
    """Every pod with its node, in the cluster's order: a pod at ``placed`` (pod key -> node) there,
    a running pod not ``gone`` where it runs."""
    for pod in cluster.pods:
        if pod.key in placed:
            yield pod, placed[pod.key]
        elif pod.running and pod.node_name is not None and pod.key not in gone:
            yield pod, pod.node_name


def disruption_violations(cluster: Cluster, evicted: Collection[str]) -> list[Violation]:
    """Groups with ``disruptionMode: all`` that a plan disrupts in part."""
    units: dict[str, list[str]] = {}
    for pod in cluster.pods:
        if pod.running and pod.disruption_unit is not None:
            units.setdefault(pod.disruption_unit, []).append(pod.key)
    out = []
    for unit, keys in sorted(units.items()):
        hit = [k for k in keys if k in evicted]
        if hit and len(hit) < len(keys):
            text = f"{unit}: disruptionMode all, but {len(hit)} of its {len(keys)} running pods evicted"
            out.append(Violation("group-disruption", unit, text))
    return out


class Domains:
    """Which domain each level has taken so far, for a first-fit answer built pod by pod: a pod
    may go to a node only if the node carries every one of its levels' labels, with the value
    the level's running or already placed pods hold."""

    def __init__(self, cluster: Cluster, placed: Mapping[str, str] | None = None, gone: Collection[str] = ()) -> None:
        """Running pods (but ``gone``) and pending pods at ``placed`` (pod key -> node) count."""
        self._labels = {n.name: n.labels for n in cluster.nodes}
        self._taken: dict[str, str] = {}
        for pod, node in _positions(cluster, placed or {}, gone):
            self.add(pod, node)

    def allows(self, pod: Pod, node: str) -> bool:
        labels = self._labels.get(node, {})
        return all(
            d.key in labels and self._taken.get(d.group, labels[d.key]) == labels[d.key] for d in pod.group_domains
        )

    def add(self, pod: Pod, node: str) -> None:
        labels = self._labels.get(node, {})
        for d in pod.group_domains:
            if d.key in labels:
                self._taken.setdefault(d.group, labels[d.key])


def gang_violations(cluster: Cluster, placements: Mapping[str, str], scheduler_name: str = "placer") -> list[str]:
    """``gang_rule_violations`` in words."""
    return texts(gang_rule_violations(cluster, placements, scheduler_name))


def gang_rule_violations(
    cluster: Cluster, placements: Mapping[str, str], scheduler_name: str = "placer", index: ClusterIndex | None = None
) -> list[Violation]:
    """A gang (pods sharing ``gang`` in a namespace) is placed whole or not at all, and never
    while fewer than its ``gang_size`` pods are pending or already running (a gang left partly
    bound is completed by placing the rest together)."""
    members: dict[str, list[Pod]] = {}
    for pod in batch_pods(cluster, scheduler_name) if index is None else index.batch(scheduler_name):
        if pod.gang:
            members.setdefault(f"{pod.namespace}/{pod.gang}", []).append(pod)
    running: dict[str, int] = {}
    if members:
        for pod in cluster.pods:
            gang = f"{pod.namespace}/{pod.gang}" if pod.gang else None
            if pod.running and gang in members:
                running[gang] = running.get(gang, 0) + 1
    out: list[Violation] = []
    for gang, pods in sorted(members.items()):
        placed = [p for p in pods if p.key in placements]
        want = max(p.gang_size or 0 for p in pods) - running.get(gang, 0)
        if placed and len(placed) < len(pods):
            out.append(
                Violation(
                    "gang", gang, f"gang {gang}: {len(placed)} of its {len(pods)} pending pods placed (all or nothing)"
                )
            )
        elif placed and want > len(pods):
            out.append(Violation("gang", gang, f"gang {gang}: placed with {len(pods)} of its {want} pods pending"))
    return out
