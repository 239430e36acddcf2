"""Hostile annotation and label values on running pods, on the real control plane (issue 31, item 4).

Aspects: the API server accepts any annotation value (and any well-formed label value), so tenant
A can put on its running pods values placer cannot read: a ``placer.io/gang-size`` of 5,000 digits
(beyond Python's int() digit limit), a ``batch.kubernetes.io/job-completion-index`` of ``"²"``
(isdigit() true, int() fails) and the other values of ``tests/test_hostile_properties.py`` that
the API server takes. Those pods keep their node's room: tenant B's pods, which would all fit only
if that room were ignored, get exactly the free room (the node's summed requests never above its
allocatable), the rest stay Pending with PodScheduled=False, and the controller keeps scheduling
(a later ordinary pod is bound, /healthz answers 200). Everything is read back from the API server.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import kube_helpers as kh
import pytest
from controller_support import Controller
from kubernetes import client
from test_controller_e2e import NodeFactory, _group

from placer.models import parse_quantity
from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

QUIET = 6.0  # seconds (several 1 s batch windows) in which no further tenant-B pod may be bound
GANG_SIZE = "placer.io/gang-size"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

# Tenant A's running pods, one cpu each: (name, annotations, labels). Values from
# tests/test_hostile_properties.py's HOSTILE_VALUES that the API server accepts where they are put
# (a label value is at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric).
HOSTILE: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("gang-digits", {"placer.io/gang": "g", GANG_SIZE: "9" * 5000}, {}),
    ("index-superscript", {COMPLETION_INDEX: "²"}, {}),
    ("index-arabic", {COMPLETION_INDEX: "٣", GANG_SIZE: "-" + "9" * 5000, "placer.io/gang": "g"}, {}),
    (
        "assorted",
        {
            "placer.io/gang": "\uff11",
            GANG_SIZE: "1e" + "9" * 5000,
            "placer.io/moved-at": "9999-99-99T99:99:99Z",
            "placer.io/evictable": "NaN",
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "\x00\u202e",
            "placer.io/when-no-node-fits": "[" * 2000,
            "placer.io/when-no-node-matches": '{"a": [1, {"b": null}], "c": "&x *x"}',
            "placer.io/when-node-labels-change": "*alias",
            "scheduling.x-k8s.io/pod-group": "a" * 70_000,
            "placer.io/rebalance": "inf",
        },
        {},
    ),
    (
        "labels",
        {COMPLETION_INDEX: "0" * 5000 + "1", "placer.io/moved-at": " "},
        {GANG_SIZE: "0x10", "placer.io/gang": "1_000", COMPLETION_INDEX: "NaN", "zone": "0"},
    ),
]
FREE = 2  # cpus left on the node beside tenant A's pods
TENANT_B = 5  # one-cpu pods: FREE of them fit, the rest only if tenant A's room were ignored


def _pod(
    core: client.CoreV1Api,
    ns: str,
    name: str,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> None:
    body = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": name, **(labels or {})}, annotations=annotations),
        spec=kh.pod_spec(**spec),
    )
    core.create_namespaced_pod(ns, body)


def _node_of(core: client.CoreV1Api, ns: str, name: str) -> str | None:
    node: str | None = core.read_namespaced_pod(name, ns).spec.node_name
    return node


def _unschedulable(core: client.CoreV1Api, ns: str, name: str) -> bool:
    pod = core.read_namespaced_pod(name, ns)
    return pod.spec.node_name is None and any(
        c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions or []
    )


def _room_used(core: client.CoreV1Api, node: str) -> list[str]:
    """Each resource of the node whose bound pods' summed requests exceed its allocatable, as the
    API server shows them (what the kubelet would admit against), pod count included."""
    allocatable = core.read_node(node).status.allocatable
    pods = [
        p
        for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        if p.status.phase not in ("Succeeded", "Failed")
    ]
    used = {"pods": len(pods)}
    for p in pods:
        for c in p.spec.containers:
            for name, amount in (c.resources.requests or {}).items():
                used[name] = used.get(name, 0) + parse_quantity(amount)
    return [
        f"{node} {name}: {amount} requested of {allocatable.get(name, 0)}"
        for name, amount in used.items()
        if amount > parse_quantity(allocatable.get(name, "0"))
    ]


def _healthz(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
        status: int = resp.status
        return status


def test_hostile_values_on_running_pods_keep_their_room_and_change_no_other_tenants_placement(
    core: client.CoreV1Api,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    (node,) = make_nodes(1, cpu=str(len(HOSTILE) + FREE), memory="64Gi", pods=50)
    (spare,) = make_nodes(1, prefix="spare", cpu="1", memory="64Gi", pods=50)
    group, spare_group = _group(core, node), _group(core, spare)
    tenant_a, tenant_b = kh.create_namespace(core), kh.create_namespace(core)
    try:
        for name, annotations, labels in HOSTILE:
            _pod(core, tenant_a, name, annotations, labels, cpu="1", node_name=node)
        for name, annotations, _ in HOSTILE:  # stored as written: nothing was cut or refused
            stored = core.read_namespaced_pod(name, tenant_a).metadata.annotations
            assert {k: stored[k] for k in annotations} == annotations
        kh.wait_running(core, tenant_a, {}, len(HOSTILE), timeout=60)

        port = testenv.free_ports(1)[0]
        controller = controllers(metricsPort=port)
        b_pods = [f"b-{i}" for i in range(TENANT_B)]
        for name in b_pods:
            _pod(core, tenant_b, name, cpu="1", scheduler_name="placer", node_selector=group)

        def settled() -> tuple[list[str], list[str]] | None:
            bound = [n for n in b_pods if _node_of(core, tenant_b, n)]
            refused = [n for n in b_pods if _unschedulable(core, tenant_b, n)]
            return (bound, refused) if len(bound) + len(refused) == TENANT_B else None

        bound, refused = kh.wait_for("tenant B bound or refused", settled, 90)
        assert _room_used(core, node) == []
        assert len(bound) == FREE, (bound, controller.output())
        # Later cycles (the refused pods are retried every second or two) bind nothing more there.
        time.sleep(QUIET)
        assert [n for n in b_pods if _node_of(core, tenant_b, n)] == bound
        assert all(_unschedulable(core, tenant_b, n) for n in refused)
        assert _room_used(core, node) == []
        for name, _, _ in HOSTILE:  # tenant A's pods untouched: still there, on the same node
            assert _node_of(core, tenant_a, name) == node

        # The controller keeps scheduling: an ordinary pod is bound, /healthz is 200.
        _pod(core, tenant_b, "later", cpu="1", scheduler_name="placer", node_selector=spare_group)
        kh.wait_for("later bound to the spare node", lambda: _node_of(core, tenant_b, "later") == spare, 60)
        assert _room_used(core, spare) == []
        assert _healthz(port) == 200
        log = controller.log.read_text(errors="replace")
        # placer saw the values and read each as its own pod's problem (a warning), not the cycle's.
        assert f"metadata.annotations[{GANG_SIZE}]: must be a positive integer" in log
        assert f"metadata.annotations[{COMPLETION_INDEX}]: expected a non-negative integer, got '²'" in log
        assert "Traceback" not in log
        assert controller.proc is not None and controller.proc.poll() is None
    finally:
        kh.delete_namespace(core, tenant_a)
        kh.delete_namespace(core, tenant_b)
