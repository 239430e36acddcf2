"""Where a batch ends (``placer.engine.cut_batch``), shared by the batcher and ``--batch-size``.

Aspects: plain pods cut at the size, gangs kept whole past it, a gang larger than the size taken
alone when first and otherwise left for the next batch while smaller units go ahead.
"""

from __future__ import annotations

import pytest
from support import cluster, node, pod, solve, where

from placer.engine import cut_batch

GANG = {"g1": "G", "g2": "G", "g3": "G"}

CASES = [
    ("plain pods are cut at the size", ["a", "b", "c"], 2, {}, ["a", "b"]),
    ("a gang that starts inside the batch joins it whole", ["a", "g1", "g2", "g3"], 3, GANG, ["a", "g1", "g2", "g3"]),
    ("a gang larger than the size comes first: it is the batch alone", ["g1", "g2", "g3", "a"], 2, GANG, GANG.keys()),
    (
        "a gang larger than the size waits while pods behind it go ahead",
        ["a", "g1", "g2", "g3", "b"],
        2,
        GANG,
        ["a", "b"],
    ),
]


@pytest.mark.parametrize(("case", "keys", "size", "together", "want"), CASES, ids=[c[0] for c in CASES])
def test_cut(case: str, keys: list[str], size: int, together: dict[str, str], want: list[str]) -> None:
    assert cut_batch(keys, size, together) == list(want)


def test_batch_size_places_a_gang_larger_than_the_batch_whole_in_a_decision_of_its_own() -> None:
    gang = [pod(f"g{i}", labels={"placer.io/gang": "train", "placer.io/gang-size": "3"}) for i in range(3)]
    loose = [pod("a", creationTimestamp="2024-01-01T00:00:00Z"), pod("b", creationTimestamp="2024-01-01T00:02:00Z")]
    for g in gang:
        g["creationTimestamp"] = "2024-01-01T00:01:00Z"
    out = solve(cluster([node("n1", cpu="3"), node("n2", cpu="2")], [*loose, *gang]), batch_size=2)
    assert set(where(out)) == {"a", "b", "g0", "g1", "g2"}
