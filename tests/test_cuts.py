"""Where a batch ends (``placer.engine.cut_batch``), shared by the batcher and ``--batch-size``.

Aspects: plain pods cut at the size, gangs kept whole past it, a gang larger than the size taken
alone when first and otherwise left for the next batch while smaller units go ahead; gangs held to
a topology domain (rivals) decided together up to the group batch size.
"""

from __future__ import annotations

import pytest
from support import DETERMINISTIC, cluster, node, pod, solve, validated, where
from workload_builders import RACK, dump, gang, racks

from placer.engine import cut_batch
from placer.models import Config
from placer.service import SolveOptions, solve_cluster

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
    # Without a domain gang in the batch, the group batch size changes nothing.
    assert cut_batch(keys, size, together, rivals={"R"}, rival_size=100) == list(want)


# Pods a, b, c alone; gangs A (2 pods), B (3) and C (2) held to a domain (rivals), D (2) not.
UNITS = {"a1": "A", "a2": "A", "b1": "B", "b2": "B", "b3": "B", "c1": "C", "c2": "C", "d1": "D", "d2": "D"}
RIVALS = {"A", "B", "C"}
RIVAL_CASES = [
    (
        "domain gangs queued behind one in the batch join it; plain pods and other gangs wait",
        ["a1", "a2", "x", "d1", "d2", "b1", "b2", "b3", "y", "c1", "c2"], 2, 9,
        ["a1", "a2", "b1", "b2", "b3", "c1", "c2"],
    ),
    (
        "each joins only while it fits within the group batch size; a smaller one behind may",
        ["a1", "a2", "b1", "b2", "b3", "c1", "c2"], 2, 4,
        ["a1", "a2", "c1", "c2"],
    ),
    (
        "a domain gang larger than the batch size joins too, within the group batch size",
        ["c1", "c2", "b1", "b2", "b3"], 2, 5,
        ["c1", "c2", "b1", "b2", "b3"],
    ),
    (
        "a domain gang larger than the batch size that comes first takes the others along",
        ["b1", "b2", "b3", "x", "a1", "a2"], 2, 5,
        ["b1", "b2", "b3", "a1", "a2"],
    ),
    (
        "a batch without a domain gang takes none",
        ["x", "y", "a1", "a2"], 2, 10,
        ["x", "y"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("case", "keys", "size", "rival_size", "want"), RIVAL_CASES, ids=[c[0] for c in RIVAL_CASES])
def test_domain_gangs_are_cut_together(case: str, keys: list[str], size: int, rival_size: int, want: list[str]) -> None:
    assert cut_batch(keys, size, UNITS, rivals=RIVALS, rival_size=rival_size) == want


def test_domain_gangs_queued_in_batches_of_their_own_are_decided_jointly() -> None:
    """The issue's example (racks of 10 and 6 slots, gangs of 4, 6 and 6 each held to one rack):
    at --batch-size 4 every gang would be a decision of its own; the group batch size puts the
    three in one, which fits them all, each whole in one rack (the validator checks the rules)."""
    g4 = gang("g4", 4)
    for item in g4[1:]:
        item["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    c = dump(racks({"a": 10, "b": 6}), g4, gang("g6a", 6), gang("g6b", 6))
    keys, units = [p.key for p in c.pods], {p.key: p.batch_unit for p in c.pods if p.batch_unit}
    rivals = set(units.values())
    assert len(cut_batch(keys, 4, units, rivals=rivals, rival_size=4)) == 4  # the gang of 4 alone
    assert len(cut_batch(keys, 4, units, rivals=rivals, rival_size=16)) == 16  # all three
    cfg = Config.model_validate(DETERMINISTIC)
    labels = {n.name: n.labels for n in c.nodes}

    def racks_of(group_batch_size: int) -> dict[str, set[str]]:
        options = SolveOptions(batch_size=4, group_batch_size=group_batch_size, config=cfg)
        got: dict[str, set[str]] = {}
        for name, n in where(validated(c, solve_cluster(c, options), cfg, "placer")).items():
            got.setdefault(name.rsplit("-", 1)[0], set()).add(labels[n][RACK])
        return got

    jointly = racks_of(16)
    assert sorted(jointly) == ["g4", "g6a", "g6b"] and all(len(r) == 1 for r in jointly.values())
    assert len(racks_of(4)) == 2  # one gang per decision: the gang of 4 takes room a gang of 6 needed


def test_batch_size_places_a_gang_larger_than_the_batch_whole_in_a_decision_of_its_own() -> None:
    gang = [pod(f"g{i}", labels={"placer.io/gang": "train", "placer.io/gang-size": "3"}) for i in range(3)]
    loose = [pod("a", creationTimestamp="2024-01-01T00:00:00Z"), pod("b", creationTimestamp="2024-01-01T00:02:00Z")]
    for g in gang:
        g["creationTimestamp"] = "2024-01-01T00:01:00Z"
    out = solve(cluster([node("n1", cpu="3"), node("n2", cpu="2")], [*loose, *gang]), batch_size=2)
    assert set(where(out)) == {"a", "b", "g0", "g1", "g2"}
