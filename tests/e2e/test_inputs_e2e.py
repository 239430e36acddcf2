"""One tenant's unreadable annotation on the real control plane (issue 14, item 1).

Aspects: the API server accepts any annotation value, so a pod with a malformed
``placer.io/gang-size`` gets PodScheduled=False and a Warning FailedScheduling event naming the
field, while the pods around it are bound in the same cycles; a running pod with a malformed
``placer.io/moved-at`` neither stops the controller's solves nor loses its room.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kube_helpers as kh
import pytest
from controller_support import Controller
from kubernetes import client
from test_controller_e2e import NodeFactory, _group, _no_overcommit

pytestmark = pytest.mark.e2e


def _pod(core: client.CoreV1Api, ns: str, name: str, annotations: dict[str, str], **spec: Any) -> None:
    body = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": name}, annotations=annotations),
        spec=kh.pod_spec(**spec),
    )
    core.create_namespaced_pod(ns, body)


def _bound(core: client.CoreV1Api, ns: str, name: str) -> str | None:
    node: str | None = core.read_namespaced_pod(name, ns).spec.node_name
    return node


def _refusal(core: client.CoreV1Api, ns: str, name: str) -> str | None:
    pod = core.read_namespaced_pod(name, ns)
    for c in pod.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False" and c.message:
            message: str = c.message
            return message
    return None


def _placer_event(core: client.CoreV1Api, ns: str, name: str, reason: str) -> str | None:
    """The note of placer's event of this reason on the pod, if there is one yet."""
    for e in core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items:
        if e.reason == reason and (e.reporting_component or "").startswith("placer"):
            note: str = e.message or ""
            return note or reason
    return None


def test_a_malformed_placer_annotation_stops_only_its_own_pod(
    core: client.CoreV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    (node,) = make_nodes(1, cpu="2")
    group = _group(core, node)
    _pod(core, namespace, "moved", {"placer.io/moved-at": "last tuesday"}, cpu="1", node_name=node)
    kh.wait_for("moved running", lambda: _bound(core, namespace, "moved") == node, 30)
    controllers()
    _pod(
        core,
        namespace,
        "bad",
        {"placer.io/gang-size": "lots"},
        cpu="100m",
        scheduler_name="placer",
        node_selector=group,
    )
    for i in range(3):
        _pod(core, namespace, f"good-{i}", {}, cpu="300m", scheduler_name="placer", node_selector=group)
    for i in range(3):
        kh.wait_for(f"good-{i} bound", lambda i=i: _bound(core, namespace, f"good-{i}") == node, 60)
    message = kh.wait_for("bad refused with a reason", lambda: _refusal(core, namespace, "bad"), 60)
    assert "placer.io/gang-size" in message and "'lots'" in message
    assert _bound(core, namespace, "bad") is None
    warning = kh.wait_for(
        "bad's FailedScheduling event", lambda: _placer_event(core, namespace, "bad", "FailedScheduling")
    )
    assert "placer.io/gang-size" in warning
    assert kh.wait_for("good-0's Scheduled event", lambda: _placer_event(core, namespace, "good-0", "Scheduled"))
    # The running pod with the unreadable stamp keeps its room: 1 + 3 x 0.3 cpu on a 2-cpu node.
    _pod(core, namespace, "big", {}, cpu="500m", scheduler_name="placer", node_selector=group)
    kh.wait_for("big refused for room", lambda: _refusal(core, namespace, "big"), 60)
    assert _bound(core, namespace, "moved") == node and _bound(core, namespace, "big") is None
    _no_overcommit(core, [node])
