"""``placer.io/when-node-labels-change``: a running pod in placer's namespaces whose node no longer
matches its selector or required affinity is evicted (``reschedule``) or deleted (``kill``),
with a NodeLabelsChanged event. Checked every ``labelCheckPeriodSeconds``."""

from __future__ import annotations

from placer.engine import NodeLabels
from placer.inputs.annotations import LABEL_POLICY
from placer.kube.actions import result_label
from placer.kube.context import Context
from placer.kube.view import ClusterView
from placer.models import Cluster

__all__ = ["check_labels"]


def check_labels(ctx: Context, view: ClusterView, cluster: Cluster) -> None:
    actions = ctx.actions
    nodes = {n.name: n for n in cluster.nodes}
    for pod in cluster.pods:
        policy = pod.annotations.get(LABEL_POLICY)
        if policy not in ("reschedule", "kill") or not pod.running or pod.node_name not in nodes:
            continue
        if not view.in_scope(pod):
            continue
        node = nodes[pod.node_name]
        if NodeLabels([node]).selector(pod.node_selector, pod.required_terms)[0]:
            continue
        note = f"node {node.name} no longer matches the pod's selector/affinity ({LABEL_POLICY}: {policy})"
        act = actions.evict if policy == "reschedule" else actions.delete
        out = act(pod.key, pod.uid or None)
        ctx.metrics.evictions.labels(kind=f"labels-{policy}", result=result_label(out)).inc()
        if out.ok:
            actions.event(pod.key, pod.uid, reason="NodeLabelsChanged", note=note, kind="Warning")
