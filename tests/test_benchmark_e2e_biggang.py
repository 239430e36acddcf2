"""The e2e big-gang benchmark's pure parts (``benchmarks/e2e_biggang.py``), without a cluster.

Aspects: placer's batch answers are read back from its log (size, placed, solve seconds, budget)
and small batches are left out; stream pods are split by the window their creation falls in, with
latency figures of the bound ones only; the longest gap between binds and where it begins.
"""

from __future__ import annotations

import math
import sys
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks/` is not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import e2e_biggang as eb  # noqa: E402
from benchmarks import e2e_gangs as eg  # noqa: E402

CTL = "INFO placer.controller:"
LOG = f"""\
2026-11-28 10:00:01,250 {CTL} batch of 3: 3 placed (binding), 0 unplaced; decided in 0.05s of a 0.10s budget
2026-11-28 10:00:02,000 INFO placer.kube.binds: something else
2026-11-28 10:00:12,500 {CTL} batch of 5000: 5000 placed (binding), 0 unplaced; decided in 9.62s of a 10.00s budget
2026-11-28 10:00:13,000 {CTL} global plan: 2 evictions, 1 steps; decided in 0.30s of a 0.10s budget
"""


def test_batch_answers_are_read_from_placers_log_small_ones_left_out() -> None:
    (gang,) = eb.batch_solves(LOG, 100)
    assert (gang["pods"], gang["placed"], gang["unplaced"]) == (5000, 5000, 0)
    assert (gang["seconds"], gang["budget"]) == (9.62, 10.0)
    assert gang["at"] == datetime(2026, 11, 28, 10, 0, 12, 500000).timestamp()
    assert [s["pods"] for s in eb.batch_solves(LOG, 1)] == [3, 5000]


def test_stream_pods_are_split_by_the_window_of_their_creation() -> None:
    created = {"a": 0.0, "b": 5.0, "c": 6.0, "d": 12.0, "e": 20.0}
    bound = {"a": 0.5, "b": 11.0, "c": 11.5, "d": 13.0}  # e never bound
    stats = eb.latency_stats(created, bound, {"deciding": (4.0, 10.0), "binding": (10.0, 15.0)}, "other")
    assert stats["deciding"]["pods"] == 2 and stats["deciding"]["max"] == 6.0
    assert stats["deciding"]["p50"] == pytest.approx(5.75)
    assert stats["binding"] == {"pods": 1, "bound": 1, "p50": 1.0, "p99": 1.0, "max": 1.0}
    assert stats["other"]["pods"] == 2 and stats["other"]["bound"] == 1 and stats["other"]["max"] == 0.5
    empty = eb.latency_stats({"e": 20.0}, {}, {"deciding": (0.0, 1.0)}, "other")
    assert empty["deciding"]["pods"] == 0 and math.isnan(empty["other"]["p99"])


def test_the_longest_gap_between_binds_and_where_it_begins() -> None:
    assert eb.longest_gap([3.0, 1.0, 10.0, 11.0]) == (7.0, 3.0)
    gap, at = eb.longest_gap([4.0])
    assert gap == 0.0 and math.isnan(at)


def test_the_gang_has_no_topology_constraint_and_small_members() -> None:
    g = eg.Gang("big", 3, topology=None, cpu="100m", memory="128Mi")
    assert "schedulingConstraints" not in eg.pod_group(g)["spec"]
    assert eg.pod_group(g)["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    requests = {p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in eg.members(g)}
    assert requests == {"100m"}
    plain = eb.stream_pod(7, "100m", "128Mi")
    assert plain["metadata"]["name"] == "s-00007" and "schedulingGroup" not in plain["spec"]
