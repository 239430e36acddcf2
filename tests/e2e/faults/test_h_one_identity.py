"""Scenario h: two replicas started with the same identity (issue 31).

Both are given ``--identity placer-h`` (as two replicas falling back to one hostname would be).
Each process must lead under a name of its own (placer suffixes it), so only one ever holds the
Lease: the audit log shows no write by a replica that was not the leader at that moment.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import faults_harness as fh
import pytest
from kubernetes import client

from testenv import audit
from testenv import cluster as testenv

pytestmark = pytest.mark.e2e


def test_h_two_replicas_with_one_identity_never_both_write(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    workload: fh.Workload,
    sampler: fh.Sampler,
    lease: str,
    api_client: client.ApiClient,
) -> None:
    coord = client.CoordinationV1Api(api_client)
    first = replicas("placer-h1", lease, name="placer-h")
    second = replicas("placer-h2", lease, name="placer-h")
    fh.wait_lease_holder(coord, lease)
    started = time.monotonic()
    for round_ in range(4):
        workload.add(f"round-{round_}", 4)
        time.sleep(2 * fh.RETRY + 1)  # renewals of both replicas interleave with the binds
    figs = fh.closing_checks("h-one-identity", workload, sampler, cluster.audit_log, healed_at=started)
    bad = fh.non_leader_writes(audit.read_writes(cluster.audit_log), [first.user, second.user], lease)
    holder = coord.read_namespaced_lease(lease, fh.SA_NAMESPACE).spec.holder_identity
    figs.notes.update({"non_leader_writes": len(bad), "holder": holder})
    figs.write()
    assert holder.startswith("placer-h_") and holder != "placer-h"
    assert not figs.failures() and not bad, (figs, bad[:10], first.output(), second.output())
