"""Scenario b: placer's connections to the API server reset every few seconds, then blackholed.

One replica behind its TCP fault proxy. Pods arrive in waves while every connection is reset
every 2 s for 20 s, then while the path is blackholed for 30 s (connections accepted, nothing
forwarded). After the heal, every pod is bound within the recovery timeout, and the closing
checks hold.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import faults_harness as fh
import pytest
from kubernetes import client

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

RESET_PERIOD = 2.0
RESET_FOR = 20.0
BLACKHOLE_FOR = 30.0


def test_b_resets_then_a_30s_blackhole(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    workload: fh.Workload,
    sampler: fh.Sampler,
    lease: str,
    api_client: client.ApiClient,
) -> None:
    r = replicas("placer-b", lease)
    fh.wait_lease_holder(client.CoordinationV1Api(api_client), lease)
    assert r.proxy is not None
    t0 = time.monotonic()
    events: list[tuple[float, str]] = []

    workload.add("warm", 2)
    assert workload.wait_all_bound(60) is not None, r.output()

    r.proxy.set_reset(RESET_PERIOD)
    events.append((time.monotonic(), f"reset every {RESET_PERIOD}s"))
    workload.add("during-resets-1", 4)
    time.sleep(RESET_FOR / 2)
    workload.add("during-resets-2", 4)
    time.sleep(RESET_FOR / 2)
    bound_after_resets = len(workload.bound())

    r.proxy.set_blackhole()
    events.append((time.monotonic(), "blackhole"))
    time.sleep(2)
    workload.add("during-blackhole", 6)
    time.sleep(BLACKHOLE_FOR - 2)
    bound_in_blackhole = len(workload.bound()) - bound_after_resets
    r.proxy.set_pass()
    healed = time.monotonic()
    events.append((healed, "healed"))

    figs = fh.closing_checks(
        "b-resets-then-blackhole",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=healed,
        notes={
            "resets": r.proxy.stats.resets,
            "bound_after_resets": bound_after_resets,
            "bound_during_blackhole": bound_in_blackhole,
            **r.notes(),
            "timeline": fh.timeline(events, t0),
        },
    )
    assert not figs.failures(), (figs, r.output())
