"""The closing checks can fail: a negative control for the fault suite's harness.

No placer runs here. The test itself binds more 1-cpu pods to a 4-cpu node than fit and leaves one
pod pending; the sampler must record the overcommit, the figures must report it, the pending pod
and the missing replicas, and the audit reader must see no write from placer's ServiceAccounts.
"""

from __future__ import annotations

import time

import faults_harness as fh
import kube_helpers as kh
import pytest
from kubernetes import client

from testenv import audit
from testenv import cluster as testenv

pytestmark = pytest.mark.e2e


def test_the_closing_checks_see_an_overcommit_a_pending_pod_and_a_lost_pod(
    cluster: testenv.Cluster,
    core: client.CoreV1Api,
    workload: fh.Workload,
    sampler: fh.Sampler,
    fault_nodes: tuple[list[str], dict[str, str]],
) -> None:
    node = fault_nodes[0][0]
    workload.add("crowd", 6)  # nobody schedules them (schedulerName placer, no placer running)
    pods = kh.wait_for("6 pods", lambda: p if len(p := fh.pods_of(core, workload.namespace)) == 6 else None, 30)
    for p in pods[:5]:  # 5 cpu onto a 4-cpu node
        assert kh.bind(core, workload.namespace, p.metadata.name, node) == 201
    time.sleep(2 * sampler.period + 0.5)
    workload.deployments["ghost"] = 2  # replicas that never existed count as lost
    figs = fh.closing_checks(
        "self-check", workload, sampler, cluster.audit_log, healed_at=time.monotonic(), timeout=3
    )  # fmt: skip
    assert figs.overcommitted_nodes == 1
    assert {o.node for o in sampler.overcommits} == {node}
    assert {o.resource for o in sampler.overcommits} == {"cpu"}
    assert max(o.used for o in sampler.overcommits) == 5.0
    assert (figs.bound, figs.pending, figs.lost, figs.recover_seconds) == (5, 3, 2, None)
    assert len(figs.failures()) == 3
    assert not [w for w in audit.read_writes(cluster.audit_log) if w.namespace == workload.namespace]
    (fh.FIGURES_DIR / "self-check.json").unlink()  # not a scenario: kept out of the report
