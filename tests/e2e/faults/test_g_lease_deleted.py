"""Scenario g: the Lease is deleted while a replica leads (issue 31).

Two replicas. Pods are being batched when an admin deletes the Lease. The standby creates a new
Lease at once; the old leader must stop writing as soon as it sees its Lease gone (or another's),
and the new one must not write before it has held the Lease for a full lease duration: the audit
log shows no write by a replica that was not the leader at that moment (``non_leader_writes``).
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


def test_g_a_lease_deleted_while_leading_never_gives_two_writers(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    workload: fh.Workload,
    sampler: fh.Sampler,
    lease: str,
    api_client: client.ApiClient,
) -> None:
    coord = client.CoordinationV1Api(api_client)
    first = replicas("placer-g1", lease)
    fh.wait_lease_holder(coord, lease)
    second = replicas("placer-g2", lease)
    workload.add("warm", 4)
    assert workload.wait_all_bound(60) is not None, first.output()
    workload.add("during", 6)
    time.sleep(0.5)  # the leader's watch has them; its batch window is open
    coord.delete_namespaced_lease(lease, fh.SA_NAMESPACE)
    deleted = time.monotonic()
    workload.add("after", 6)
    figs = fh.closing_checks(
        "g-lease-deleted",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=deleted,
        notes={**{f"g1_{k}": v for k, v in first.notes().items()}, **{f"g2_{k}": v for k, v in second.notes().items()}},
    )
    bad = fh.non_leader_writes(audit.read_writes(cluster.audit_log), [first.user, second.user], lease)
    figs.notes.update({f"g1_{k}": v for k, v in first.notes().items()})  # as they are now, after recovery
    figs.notes.update({f"g2_{k}": v for k, v in second.notes().items()})
    figs.notes["non_leader_writes"] = len(bad)
    figs.write()
    assert not figs.failures() and not bad, (figs, bad[:10], first.output(), second.output())
