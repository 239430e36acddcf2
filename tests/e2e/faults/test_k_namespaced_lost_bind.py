"""Scenario k: ``namespaces:`` mode (the namespaced-writes RBAC) and bind answers lost (issue 31).

placer schedules one namespace with k8s/components/namespaced-writes' RBAC (cluster-wide reads, a
writes Role in that namespace), through the TLS proxy. Two binds are carried out but their answers
dropped (the client's connection reset); then, for ``HOLD`` seconds, every bind is held unsent
until placer's own timeout gives up on it (its outcome unknown; it never lands). placer must read
each pod back to learn what happened: that RBAC once lacked ``get pods``, every read-back was
refused, and a pod whose bind never landed stayed assumed, its room booked, never batched again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import faults_harness as fh
import pytest
from kubernetes import client

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

HOLD = 25.0  # longer than a bind's read timeout (15 s)


def test_k_namespaced_mode_learns_the_outcome_of_binds_whose_answer_was_lost(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    namespaced_rbac: Callable[[str, str], str],
    workload: fh.Workload,
    sampler: fh.Sampler,
    lease: str,
    api_client: client.ApiClient,
) -> None:
    token = namespaced_rbac("placer-k", workload.namespace)
    r = replicas("placer-k", lease, via="tls", token=token, namespaces=[workload.namespace])
    assert r.tls is not None
    fh.wait_lease_holder(client.CoordinationV1Api(api_client), lease)
    workload.add("warm", 2)
    assert workload.wait_all_bound(60) is not None, r.output()
    r.tls.lose(methods={"POST"}, path=r"/binding$", count=2)
    workload.add("answers-lost", 4)
    time.sleep(5)
    r.tls.hold(methods={"POST"}, path=r"/binding$")
    workload.add("never-sent", 6)
    time.sleep(HOLD)
    held = r.tls.held_count()
    r.tls.release()
    healed = time.monotonic()
    workload.add("after", 4)
    figs = fh.closing_checks(
        "k-namespaced-lost-bind",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=healed,
        notes={"answers_lost": len(r.tls.lost), "binds_held": held, **r.notes()},
    )
    assert r.tls.lost, "no bind answer was lost: the scenario did not happen"
    assert not figs.failures(), (figs, r.output())
