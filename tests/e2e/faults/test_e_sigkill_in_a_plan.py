"""Scenario e: the leader SIGKILLed at three points of a global plan; the next leader recovers.

The plan of faults_harness.plan_workload evicts one backend and binds the second proxy where it
was. The leader (through the TLS proxy) is killed with SIGKILL:

* ``after-evict``: as soon as the audit log shows its eviction answered 201;
* ``after-gone``: once the evicted pod is gone from the API (kwok deletes at once);
* ``before-bind``: the plan's bind (the second proxy onto node 0) is held by the proxy; it is
  killed with that bind in flight (the held request is dropped with its connection, never lands).

A second replica (another ServiceAccount) then acquires the lease once the dead one's expires and
must finish or abandon the plan with nothing lost, nothing evicted twice and no overcommit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import faults_harness as fh
import kube_helpers as kh
import pytest
from kubernetes import client

from testenv import audit
from testenv import cluster as testenv

pytestmark = pytest.mark.e2e


def _evicted(log_path: Path, user: str, namespace: str) -> bool:
    return any(
        w.user == user and w.resource == "pods/eviction" and w.ok and w.namespace == namespace
        for w in audit.read_writes(log_path)
    )


@pytest.mark.parametrize("point", ["after-evict", "after-gone", "before-bind"])
def test_e_sigkill_at_a_plan_point_next_leader_recovers(
    point: str,
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    make_nodes: Callable[..., list[str]],
    lease: str,
    api_client: client.ApiClient,
) -> None:
    workload, nodes, victim = fh.plan_workload(core, apps, namespace, make_nodes)
    sampler = fh.Sampler(core, nodes).start()
    # The plan's own bind: the second proxy, onto the room the eviction frees on node 0. Other
    # binds (backends onto the empty node 1) flow.
    (new_proxy,) = kh.wait_for(
        "the second proxy pod",
        lambda: [p for p in kh.list_pods(core, namespace, {"app": "proxy"}) if not p.spec.node_name],
        30,
    )
    first = replicas(f"placer-e-{point}", lease, via="tls")
    assert first.tls is not None
    if point == "before-bind":
        first.tls.hold(methods={"POST"}, path=rf"/pods/{new_proxy.metadata.name}/binding$")

    def at_point() -> bool:
        if point == "after-evict":
            return _evicted(cluster.audit_log, first.user, namespace)
        if point == "after-gone":
            return victim not in {p.metadata.name for p in fh.pods_of(core, namespace)}
        assert first.tls is not None
        return first.tls.held_count() > 0 and _evicted(cluster.audit_log, first.user, namespace)

    kh.wait_for(f"the plan to reach {point}", at_point, 90, interval=0.05)
    first.kill()
    killed = time.monotonic()
    bound_at_kill = len(workload.bound())
    nxt = replicas(f"placer-e-{point}-next", lease)
    figs = fh.closing_checks(
        f"e-sigkill-{point}",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=killed,
        notes={
            "bound_at_kill": bound_at_kill,
            "binds_held_at_kill": first.tls.held_count(),
            "victim_gone": victim not in {p.metadata.name for p in fh.pods_of(core, namespace)},
            **{f"next_leader_{k}": v for k, v in nxt.notes().items()},
        },
    )
    on: dict[str, set[str]] = {}
    for p in workload.bound():
        on.setdefault(p.metadata.labels["app"], set())
        on[p.metadata.labels["app"]].add(p.spec.node_name)  # where each app ended, for the message
    assert not figs.failures(), (figs, on, first.output(), nxt.output())
