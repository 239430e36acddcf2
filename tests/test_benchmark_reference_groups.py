"""The plain CP-SAT model of competing groups (``benchmarks/reference_groups.py``), on a small case.

Aspects: it places groups whole, each in one rack, more groups before more pods, and its answer
passes the independent validator; pods outside a gang held in a domain are refused.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from workload_builders import dump, gang, pod, racks

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks/` is not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks.reference_groups import cpsat_groups  # noqa: E402
from placer.validate import validate_placements  # noqa: E402


def test_the_model_places_more_groups_before_more_pods() -> None:
    # Racks of 7 and 3 slots; groups a (7), b and c (3 each): at most two groups fit, and of the
    # two-group answers a in r0 with b or c in r1 places the most pods (10).
    c = dump(racks({"r0": 7, "r1": 3}), *gang("a", 7), *gang("b", 3), *gang("c", 3))
    answer = cpsat_groups(c, 5.0)
    assert answer.status == "OPTIMAL"
    assert validate_placements(c, answer.placements) == []
    assert {answer.placements[f"ml/a-{i}"].split("-")[0] for i in range(7)} == {"r0"}
    assert len(answer.placements) == 10


def test_three_small_groups_beat_one_large_one() -> None:
    c = dump(racks({"r0": 6}), *gang("a", 6), *gang("b", 2), *gang("c", 2), *gang("d", 2))
    answer = cpsat_groups(c, 5.0)
    assert validate_placements(c, answer.placements) == []
    assert {key.split("-")[0] for key in answer.placements} == {"ml/b", "ml/c", "ml/d"}


def test_a_pod_outside_a_gang_is_refused() -> None:
    with pytest.raises(ValueError, match="not a member"):
        cpsat_groups(dump(racks({"r0": 2}), pod("loose")), 1.0)
