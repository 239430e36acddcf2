"""Scenario a: kube-apiserver killed (SIGKILL) and restarted, etcd kept, mid-batch and mid-plan.

Mid-batch: pods arrive, and one batch window later (placer is binding) kube-apiserver is killed;
it stays down for DOWN_FOR seconds and comes back on the same port, certificates and etcd. More
pods arrive after the restart. Mid-plan: killed right after the plan's eviction, before the
replacement is bound. Every pod must be bound and the closing checks hold.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import faults_harness as fh
import kube_helpers as kh
import pytest
from kubernetes import client

from testenv import audit
from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

DOWN_FOR = 10.0


def test_a_apiserver_killed_mid_batch_and_restarted(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    core: client.CoreV1Api,
    workload: fh.Workload,
    sampler: fh.Sampler,
    lease: str,
    api_client: client.ApiClient,
) -> None:
    r = replicas("placer-a", lease)
    fh.wait_lease_holder(client.CoordinationV1Api(api_client), lease)
    workload.add("warm", 2)
    assert workload.wait_all_bound(60) is not None, r.output()

    workload.add("mid-batch", 7)
    time.sleep(1.2)  # one batch window: the batch is being solved or bound
    bound_at_kill = len(workload.bound())
    cluster.kill_apiserver()
    killed = time.monotonic()
    time.sleep(DOWN_FOR)
    ready_in = cluster.start_apiserver()
    healed = time.monotonic()
    workload.add("after-restart", 7)
    figs = fh.closing_checks(
        "a-apiserver-restart",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=healed,
        notes={
            "bound_at_kill": bound_at_kill,
            "down_seconds": round(healed - killed, 1),
            "apiserver_ready_seconds": round(ready_in, 1),
            **r.notes(),
        },
    )
    figs.notes["controller_manager_back_seconds"] = round(fh.wait_controllers_back(core), 1)
    figs.write()
    assert not figs.failures(), (figs, r.output())


def test_a_apiserver_killed_mid_plan_and_restarted(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    make_nodes: Callable[..., list[str]],
    lease: str,
) -> None:
    """The plan of faults_harness.plan_workload; kube-apiserver is killed as soon as the audit log
    shows the plan's eviction, i.e. between the eviction and the replacement's bind."""
    workload, nodes, victim = fh.plan_workload(core, apps, namespace, make_nodes)
    sampler = fh.Sampler(core, nodes).start()
    r = replicas("placer-a-plan", lease)

    def evicted() -> bool:
        return any(
            w.user == r.user and w.resource == "pods/eviction" and w.ok and w.namespace == namespace
            for w in audit.read_writes(cluster.audit_log)
        )

    kh.wait_for("the plan's eviction", evicted, 90, interval=0.05)
    bound_at_kill = len(workload.bound())
    cluster.kill_apiserver()
    killed = time.monotonic()
    time.sleep(DOWN_FOR / 2)
    ready_in = cluster.start_apiserver()
    healed = time.monotonic()
    figs = fh.closing_checks(
        "a-apiserver-restart-mid-plan",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=healed,
        notes={
            "bound_at_kill": bound_at_kill,
            "victim": victim,
            "down_seconds": round(healed - killed, 1),
            "apiserver_ready_seconds": round(ready_in, 1),
            **r.notes(),
        },
    )
    figs.notes["controller_manager_back_seconds"] = round(fh.wait_controllers_back(core), 1)
    figs.write()
    assert not figs.failures(), (figs, r.output())
