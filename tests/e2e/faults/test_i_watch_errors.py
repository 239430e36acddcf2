"""Scenario i: every watch answered 410 Gone, then 504 "Too large resource version" (issue 31).

placer reaches the API server through the TLS proxy, which answers every watch request itself
(lists pass). 410 once made each informer relist and watch again in a hot loop (19,382 lists a
second against a fake); a 504 too-large (the answer after an etcd restore) was resumed from the
same version for ever, so nothing new was seen. Each storm lasts ``STORM`` seconds; pods created
during it must be bound during it (informers relist, backing off), and each informer loop may
send at most a few watch requests a second.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import faults_harness as fh
import kube_helpers as kh
import pytest
from kubernetes import client

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

STORM = 25.0
PER_LOOP = 2.0  # watch requests a second per informer, at most
TOO_LARGE = "Too large resource version: 999999999, current: 1234"


def _storm(r: fh.Replica, workload: fh.Workload, status: int, name: str, message: str = "") -> dict[str, float]:
    assert r.tls is not None
    before = r.tls.injected_total()
    r.tls.inject(status=status, rate=1.0, methods={"GET"}, watches=True, message=message)
    t0 = time.monotonic()
    workload.add(name, 4)
    bound_in = None
    while time.monotonic() - t0 < STORM:
        if bound_in is None and len(workload.bound()) >= workload.expected:
            bound_in = round(time.monotonic() - t0, 1)
        time.sleep(0.5)
    r.tls.clear()
    answered = r.tls.injected_total() - before
    loops = len({path for (code, _, path) in r.tls.injected if code == status})
    return {"bound_during_storm_s": bound_in or -1, "watches_answered": answered, "loops": loops,
            "per_loop_per_s": round(answered / max(1, loops) / STORM, 2)}  # fmt: skip


def test_i_watches_answered_410_and_504_back_off_and_relist(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    workload: fh.Workload,
    sampler: fh.Sampler,
    lease: str,
    api_client: client.ApiClient,
) -> None:
    r = replicas("placer-i", lease, via="tls")
    fh.wait_lease_holder(client.CoordinationV1Api(api_client), lease)
    workload.add("warm", 2)
    assert workload.wait_all_bound(60) is not None, r.output()
    kh.wait_for("placer's pod watch open", lambda: any("/pods" in w for w in r.tls.open_watches()), 30)  # type: ignore[union-attr]
    gone = _storm(r, workload, 410, "during-410")
    # The informers back off up to 30 s: let their watches open again before the next storm.
    kh.wait_for("placer's pod watch open", lambda: any("/pods" in w for w in r.tls.open_watches()), 60)  # type: ignore[union-attr]
    large = _storm(r, workload, 504, "during-504", TOO_LARGE)
    healed = time.monotonic()
    figs = fh.closing_checks(
        "i-watch-410-504",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=healed,
        notes={**{f"410_{k}": v for k, v in gone.items()}, **{f"504_{k}": v for k, v in large.items()}, **r.notes()},
    )
    problems = figs.failures()
    for label, storm in (("410", gone), ("504", large)):
        if storm["per_loop_per_s"] > PER_LOOP:
            problems.append(f"{label}: {storm['per_loop_per_s']} watch requests a second per informer")
        if storm["bound_during_storm_s"] < 0:
            problems.append(f"{label}: pods created during the storm were not bound during it")
    assert not problems, (problems, figs, r.output())
