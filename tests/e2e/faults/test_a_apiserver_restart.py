"""Scenario a: kube-apiserver killed (SIGKILL) and restarted, etcd kept, in the middle of a batch.

Pods arrive, and one batch window later (placer is binding) kube-apiserver is killed; it stays down
for DOWN_FOR seconds and comes back on the same port, certificates and etcd. More pods arrive after
the restart. Every pod must be bound and the closing checks hold.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import faults_harness as fh
import pytest
from kubernetes import client

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

DOWN_FOR = 10.0


def test_a_apiserver_killed_mid_batch_and_restarted(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
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
    assert not figs.failures(), (figs, r.output())
