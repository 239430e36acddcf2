"""Scenario d: the leader is cut off beyond its lease while binds are queued; the standby takes over.

Two replicas, each as its own ServiceAccount through its own TCP fault proxy. Pods arrive and,
within the batch window (the leader has seen them and is about to bind), the leader's path is
blackholed: held, not refused, like a partition whose packets TCP retransmits later. The standby
must acquire the lease and bind everything; more pods arrive after the takeover. Then the old
leader's path heals, and the bytes it queued are delivered.

Fencing, from the apiserver audit log: the old leader's last successful lease renewal is at R; no
write attributed to its ServiceAccount may be received after R + renewDeadline, before or after
the heal (a write of a replica that may have lost its lease could land after another leader's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import faults_harness as fh
import kube_helpers as kh
import pytest
from kubernetes import client

from testenv import audit
from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

PARTITION_FOR = 3 * fh.LEASE + 2  # well beyond the lease
AFTER_HEAL = 10.0  # time for held writes to land


def test_d_leader_blackholed_beyond_its_lease_never_writes_after_its_renew_deadline(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    workload: fh.Workload,
    sampler: fh.Sampler,
    lease: str,
    api_client: client.ApiClient,
) -> None:
    coord = client.CoordinationV1Api(api_client)
    first = replicas("placer-d1", lease)
    holder = fh.wait_lease_holder(coord, lease)
    second = replicas("placer-d2", lease)
    leader, standby = (first, second) if holder == first.identity else (second, first)
    assert leader.proxy is not None
    workload.add("warm", 2)
    assert workload.wait_all_bound(60) is not None, leader.output()

    workload.add("queued", 8)
    time.sleep(0.6)  # the leader's watch has delivered them; its batch window is still open
    leader.proxy.set_blackhole()
    cut, cut_wall = time.monotonic(), datetime.now(UTC)
    kh.wait_for(
        "the standby to take the lease", lambda: fh.lease_holder(coord, lease) == standby.identity, 4 * fh.LEASE
    )
    takeover = time.monotonic() - cut
    workload.add("after-takeover", 6)
    all_bound_after_cut: float | None = None
    while time.monotonic() < cut + PARTITION_FOR:
        if all_bound_after_cut is None and len(workload.bound()) >= workload.expected:
            all_bound_after_cut = round(time.monotonic() - cut, 1)
        time.sleep(0.5)
    leader.proxy.set_pass()
    time.sleep(AFTER_HEAL)

    writes = audit.read_writes(cluster.audit_log)
    mine = [w for w in writes if w.user == leader.user]
    renewals = [w for w in mine if w.resource == "leases" and w.name == lease and w.ok]
    assert renewals, f"no successful lease write by {leader.user}: {audit.summary(mine)}"
    # The old term's last renewal is the last one received before the cut.
    before_cut = [w for w in renewals if w.received <= cut_wall]
    assert before_cut, f"no renewal before the cut: {audit.summary(mine)}"
    fence = before_cut[-1].received + timedelta(seconds=fh.RENEW)
    after_fence = [w for w in mine if w.received > fence]
    # A lease write refused with 409 (stale resourceVersion) changed nothing; it is reported
    # apart. Every other write after the fence is a violation.
    stale_lease = [w for w in after_fence if w.resource == "leases" and w.code == 409]
    late = [w for w in after_fence if w not in stale_lease]
    figs = fh.closing_checks(
        "d-leader-partition",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=cut,
        recovered=all_bound_after_cut,
        notes={
            "takeover_seconds": round(takeover, 1),
            "all_bound_seconds_after_cut": all_bound_after_cut,
            "old_leader_writes_after_renew_deadline": len(late),
            "late_writes": [f"{w.received.time()} {w.verb} {w.resource} {w.name} {w.code}" for w in late[:20]],
            "old_leader_stale_lease_writes_409": len(stale_lease),
            **{f"old_leader_{k}": v for k, v in leader.notes().items()},
        },
    )
    problems = figs.failures()
    if late:
        problems.append(f"{len(late)} writes by the old leader after its renew deadline {fence.time()}")
    assert not problems, (problems, figs, leader.output(), standby.output())
