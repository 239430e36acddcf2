"""PodGroup status conditions written by placer's controller, read back from the 1.37.2 API server.

Aspects (issue 30 item 3), each asserted on the PodGroup objects as the API server returns them:
- a gang placer binds is ``PodGroupInitiallyScheduled=True`` (reason ``Scheduled``), written
  once: the object's resourceVersion does not move over several
  batch windows afterwards;
- a gang that cannot be placed whole is ``PodGroupInitiallyScheduled=False`` (reason
  ``Unschedulable``, placer's words for its pods);
- a ``disruptionMode: all`` group preempted for a higher-priority gang is ``DisruptionTarget=True``
  (reason ``PreemptionByScheduler``), and the preemptor is then initially scheduled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import kube_helpers as kh
import pytest
import workload_support as ws
from controller_support import Controller
from kubernetes import client

pytestmark = pytest.mark.e2e

NodeFactory = Callable[..., list[str]]
Controllers = Callable[..., Controller]


def _group(api_client: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    api = client.CustomObjectsApi(api_client)
    got: dict[str, Any] = api.get_namespaced_custom_object(ws.GROUP, "v1beta1", namespace, "podgroups", name)
    return got


def _condition(api_client: client.ApiClient, namespace: str, name: str, ctype: str) -> dict[str, Any] | None:
    conditions = (_group(api_client, namespace, name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == ctype), None)


def _wait_condition(
    api_client: client.ApiClient, namespace: str, name: str, ctype: str, status: str, timeout: float = 120
) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def check() -> bool:
        c = _condition(api_client, namespace, name, ctype)
        if c is not None and c.get("status") == status:
            found.append(c)
            return True
        return False

    kh.wait_for(f"PodGroup {name} {ctype}={status}", check, timeout)
    return found[-1]


def _gang(api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, name: str, size: int,
          mark: dict[str, str], priority_class: str | None = None, **group: Any) -> None:  # fmt: skip
    """PodGroup ``name``, a gang of ``size``, and its ``size`` members kept on nodes ``mark``."""
    ws.pod_group(api_client, namespace, name, size, priority_class=priority_class, **group)
    for i in range(size):
        ws.member(core, namespace, f"{name}-{i}", name, mark, priority_class=priority_class)


def test_a_bound_gang_is_initially_scheduled_once(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers,
) -> None:  # fmt: skip
    mark = {"gang-test": kh.unique("s")}
    make_nodes(2, cpu="2", labels=mark)
    _gang(api_client, core, namespace, "done", 3, mark)
    controllers()
    kh.wait_running(core, namespace, {"gang": "done"}, 3, timeout=120)
    cond = _wait_condition(api_client, namespace, "done", "PodGroupInitiallyScheduled", "True")
    group = _group(api_client, namespace, "done")
    assert cond["reason"] == "Scheduled" and cond.get("message", "") == ""
    # The 1.37.2 PodGroup strategy sets no generation (0, omitted), so neither is observed.
    assert cond.get("observedGeneration", 0) == group["metadata"].get("generation", 0)
    version = group["metadata"]["resourceVersion"]
    time.sleep(6)  # several batch windows and ticks: nothing to write again
    assert _group(api_client, namespace, "done")["metadata"]["resourceVersion"] == version


def test_a_gang_that_cannot_be_placed_whole_is_not_initially_scheduled(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers,
) -> None:  # fmt: skip
    mark = {"gang-test": kh.unique("s")}
    make_nodes(1, cpu="2", labels=mark)
    _gang(api_client, core, namespace, "big", 3, mark)
    controllers()
    cond = _wait_condition(api_client, namespace, "big", "PodGroupInitiallyScheduled", "False")
    assert cond["reason"] == "Unschedulable" and "cannot be placed whole" in cond["message"], cond
    assert ws.bound(core, namespace, "big") == {}


def test_a_preempted_group_is_a_disruption_target_and_its_preemptor_is_scheduled(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory,
    controllers: Controllers, priority_class: Callable[[int], str],
) -> None:  # fmt: skip
    mark = {"gang-test": kh.unique("s")}
    make_nodes(4, cpu="1", labels=mark)
    low, high = priority_class(100), priority_class(1000)
    _gang(api_client, core, namespace, "low", 4, mark, priority_class=low, disruption_all=True)
    controllers()
    kh.wait_running(core, namespace, {"gang": "low"}, 4, timeout=120)
    _wait_condition(api_client, namespace, "low", "PodGroupInitiallyScheduled", "True")
    _gang(api_client, core, namespace, "high", 2, mark, priority_class=high)
    kh.wait_running(core, namespace, {"gang": "high"}, 2, timeout=180)
    cond = _wait_condition(api_client, namespace, "low", "DisruptionTarget", "True")
    assert cond["reason"] == "PreemptionByScheduler", cond
    assert cond["message"] == "placer: preempting to accommodate a higher priority PodGroup", cond
    _wait_condition(api_client, namespace, "high", "PodGroupInitiallyScheduled", "True")
