"""Inter-pod anti-affinity and topology spread on the real control plane, under placer run.

Three zones of kwok nodes of unequal size: zone a has two 16-cpu nodes, zones b and c one 4-cpu
node each, so the balance objective alone would put most replicas in zone a. Aspects: a
3-replica Deployment with required zone anti-affinity lands one pod per zone (and a fourth
replica waits with kube-scheduler's message); a 6-replica Deployment with a zone
topologySpreadConstraint (maxSkew 1, DoNotSchedule) lands two pods per zone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import kube_helpers as kh
import pytest

# The controller fixtures (placer run with the ServiceAccount token of k8s/rbac.yaml) live with
# the controller's own e2e tests.
from controller_support import Controller
from kubernetes import client

pytestmark = pytest.mark.e2e

NodeFactory = Callable[..., list[str]]
ZONE = "topology.kubernetes.io/zone"
ZONES = {"zone-a": (2, "16"), "zone-b": (1, "4"), "zone-c": (1, "4")}  # zone -> (nodes, cpu per node)


def _zones(make_nodes: NodeFactory) -> tuple[dict[str, str], dict[str, str]]:
    """The three zones' kwok nodes: (node selector confining a workload to them, node -> zone)."""
    mark = {"topology-e2e": kh.unique("t")}
    zone_of: dict[str, str] = {}
    for zone, (count, cpu) in ZONES.items():
        for name in make_nodes(count, prefix=zone, cpu=cpu, labels={**mark, ZONE: zone}):
            zone_of[name] = zone
    return mark, zone_of


def _app(name: str) -> client.V1LabelSelector:
    return client.V1LabelSelector(match_labels={"app": name})


def test_three_replicas_with_zone_anti_affinity_land_one_per_zone(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    selector, zone_of = _zones(make_nodes)
    controllers()
    anti = client.V1Affinity(
        pod_anti_affinity=client.V1PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=[
                client.V1PodAffinityTerm(label_selector=_app("web"), topology_key=ZONE)
            ]
        )
    )
    kh.create_deployment(
        apps, namespace, "web", 3, cpu="1", scheduler_name="placer", node_selector=selector, affinity=anti
    )
    pods = kh.wait_running(core, namespace, {"app": "web"}, 3, timeout=90)
    assert Counter(zone_of[p.spec.node_name] for p in pods) == dict.fromkeys(ZONES, 1)

    # A fourth replica has no zone left: it waits, with kube-scheduler's reason.
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 4}})

    def waiting() -> client.V1PodCondition | None:
        pending = [p for p in kh.list_pods(core, namespace, {"app": "web"}) if not p.spec.node_name]
        conds = [c for p in pending for c in (p.status.conditions or []) if c.type == "PodScheduled"]
        return conds[0] if len(pending) == 1 and conds else None

    cond = kh.wait_for("the fourth replica reported unschedulable", waiting, 60)
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert "didn't match pod anti-affinity rules" in (cond.message or "")
    running = [p for p in kh.list_pods(core, namespace, {"app": "web"}) if kh.is_running(p)]
    assert Counter(zone_of[p.spec.node_name] for p in running) == dict.fromkeys(ZONES, 1)


def test_six_replicas_with_zone_spread_max_skew_1_land_two_per_zone(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    selector, zone_of = _zones(make_nodes)
    controllers()
    spread = client.V1TopologySpreadConstraint(
        max_skew=1, topology_key=ZONE, when_unsatisfiable="DoNotSchedule", label_selector=_app("spread")
    )
    kh.create_deployment(
        apps,
        namespace,
        "spread",
        6,
        cpu="1",
        scheduler_name="placer",
        node_selector=selector,
        topology_spread_constraints=[spread],
    )
    pods = kh.wait_running(core, namespace, {"app": "spread"}, 6, timeout=90)
    assert Counter(zone_of[p.spec.node_name] for p in pods) == dict.fromkeys(ZONES, 2)
