"""The controller's view of the cluster: the informer caches parsed (one index per kind the
registry watches, ``placer.inputs.kinds``), assembled into the ``Cluster`` the engine sees with
the binds issued but not yet observed applied, and the scope rules (which pods placer may bind,
move or evict).

The model is rebuilt only when an index or the assume cache changed since the last one.
"""

from __future__ import annotations

import time
from typing import Any

from placer.inputs.assemble import assemble_cluster
from placer.inputs.kinds import Kind
from placer.inputs.kubectl import KubeObjects
from placer.inputs.podgroups import PodGroup
from placer.kube.assume import AssumeCache
from placer.kube.index import ParsedIndex, PodIndex
from placer.kube.informers import WATCHED, Informer
from placer.models import Cluster, ControllerConfig, Pod

__all__ = ["ClusterView"]

Raw = dict[str, Any]


class ClusterView:
    def __init__(self, cfg: ControllerConfig, informers: dict[str, Informer], assumed: AssumeCache) -> None:
        self.cfg = cfg
        self.informers = informers  # by kind name; optional kinds join when discovered
        self.assumed = assumed
        # The informer caches parsed (each object once per resourceVersion), pods with the queue.
        self.pods = PodIndex(cfg.scheduler_name, self.in_scope)
        self.indexes: list[tuple[Kind, ParsedIndex[Any]]] = [
            (kind, self.pods if kind.name == "Pod" else ParsedIndex[Any](kind.name, _parser(kind))) for kind in WATCHED
        ]
        self._model: tuple[tuple[int, ...], Cluster] | None = None  # the last model, by what it was built of

    # -- the model ------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Take in what every informer changed since the last look (an optional kind the server
        does not serve has no informer: its index stays empty)."""
        for _, index in self.indexes:
            index.update(self.informers.get(index.kind))

    def objects(self) -> KubeObjects:
        """The informer caches parsed, with the binds issued but not yet observed applied."""
        self.refresh()
        objs = KubeObjects()
        for kind, index in self.indexes:
            values = index.values()
            kind.fill(objs, self.assumed.apply(values) if index is self.pods else values)
        return objs

    def cluster(self) -> Cluster:
        """The cluster the engine sees, assembled as ``placer solve`` assembles a file; the last
        one again while no informer and no assumption changed since it was built."""
        self.refresh()
        built_of = (*(index.generation for _, index in self.indexes), self.assumed.version)
        if self._model is not None and self._model[0] == built_of:
            return self._model[1]
        cluster = assemble_cluster(self.objects())
        self._model = ((*built_of[:-1], self.assumed.version), cluster)  # apply may release assumptions
        return cluster

    def pod_groups(self) -> dict[tuple[str, str, str], PodGroup]:
        """Every PodGroup (and CompositePodGroup) as parsed, by (api, namespace, name): the queue
        reads the pods unresolved, so it looks up here a gang's minCount and topology rules, as
        ``resolve_gangs`` gives them to the pods naming it."""
        self.refresh()
        return {g.key: g for kind, index in self.indexes if kind.field == "pod_groups" for g in index.values()}

    # -- raw objects ----------------------------------------------------------------------------
    def raw_pod(self, key: str) -> Raw | None:
        """A pod as the cache holds it (None: not there, or no pod informer)."""
        inf = self.informers.get("Pod")
        return inf.get(key) if inf is not None else None

    def unschedulable_now(self, key: str) -> str | None:
        """The message of the pod's PodScheduled=False/Unschedulable condition, as the cache has it."""
        conditions = ((self.raw_pod(key) or {}).get("status") or {}).get("conditions")
        for c in conditions if isinstance(conditions, list) else ():
            if isinstance(c, dict) and (c.get("type"), c.get("status"), c.get("reason")) == (
                "PodScheduled",
                "False",
                "Unschedulable",
            ):
                return str(c.get("message") or "")
        return None

    # -- scope ----------------------------------------------------------------------------------
    def in_scope(self, pod: Pod) -> bool:
        """``namespaces:`` (empty: all) bounds every write: placer binds, moves and evicts only there."""
        return not self.cfg.namespaces or pod.namespace in self.cfg.namespaces

    def frozen(self, cluster: Cluster) -> frozenset[str]:
        """Running pods rebalancing may not move: moved too recently, or outside placer's namespaces."""
        return self.out_of_scope(cluster) | self.recently_moved(cluster)

    def out_of_scope(self, cluster: Cluster) -> frozenset[str]:
        """Pods no plan may evict, not even to preempt them: outside placer's namespaces."""
        return frozenset(p.key for p in cluster.pods if not self.in_scope(p))

    def recently_moved(self, cluster: Cluster) -> frozenset[str]:
        """Pods moved less than the cooldown ago: never moved again meanwhile, but a strictly
        higher priority still preempts them (``plan_batch``'s ``held``)."""
        cooldown = self.cfg.evictions.move_cooldown
        now = time.time()
        # moved_at is parsed once with the pod; an unreadable stamp is infinitely recent.
        return frozenset(p.key for p in cluster.pods if p.moved_at is not None and now - p.moved_at < cooldown)


def _parser(kind: Kind) -> Any:
    assert kind.parse is not None, f"{kind.name} is watched, so it has an API parser"
    return kind.parse
