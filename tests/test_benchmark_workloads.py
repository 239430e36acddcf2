"""The workloads benchmark's generator and counting (``benchmarks/workloads.py``), on a small run.

Aspects: instances are deterministic per seed and stay within the target share of the slots;
one quick instance through both policies and the plain CP-SAT model of the groups counts groups
placed whole and none split.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks/` is not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import workloads  # noqa: E402


def test_an_instance_is_the_same_for_a_seed_and_within_its_demand() -> None:
    a, b = workloads.instance(4, 0.9, seed=1), workloads.instance(4, 0.9, seed=1)
    assert a == b
    nodes = sum(1 for i in a["items"] if i["kind"] == "Node")
    pods = sum(1 for i in a["items"] if i["kind"] == "Pod")
    assert 0 < pods <= 0.9 * workloads.SLOTS * nodes


def test_a_small_run_places_whole_groups_and_splits_none() -> None:
    row = workloads.run_one(4, 0.9, seed=0, limit=1.0)  # every answer through the validator
    assert row.placer_broken == 0 and row.default_broken == 0
    assert row.placer_groups >= row.default_groups and row.placer_pods >= row.default_pods
    assert 0 < row.cpsat_groups <= row.groups and row.cpsat_pods > 0
