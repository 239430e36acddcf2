"""The last step of every answer: no pod left out where it fits as the answer stands.

Aspects: pods left out that fit are placed first-fit, highest key first, and the answer then
passes the validator's maximality rule; room, feasible nodes and host ports are respected; gangs
and batches with inter-pod rules are left as they are.
"""

from __future__ import annotations

from typing import Any

from support import cluster, node, pod

from placer.engine import build_batch, build_snapshot, top_up
from placer.models import Cluster, Config
from placer.validate import validate_placements

CONFIG = Config.model_validate({})


def _batch(c: Cluster) -> tuple[Any, Any]:
    pending = [p for p in c.pods if p.pending]
    snapshot = build_snapshot(c.nodes, [], pending, c.namespaces)
    return snapshot, build_batch(snapshot, pending, CONFIG)


def _names(snapshot: Any, batch: Any, counts: dict[tuple[int, int], int]) -> dict[str, str]:
    out: dict[str, str] = {}
    for (gi, n), c in sorted(counts.items()):
        taken = [p for p in batch.groups[gi].pods if p.key not in out][:c]
        out.update({p.key: snapshot.nodes[n].name for p in taken})
    return out


def test_a_pod_left_out_that_fits_is_placed_and_the_answer_becomes_maximal() -> None:
    c = cluster([node("a", cpu="2"), node("b", cpu="2")], [pod("big", cpu="2"), pod("s1"), pod("s2")])
    snapshot, batch = _batch(c)
    big = next(gi for gi, g in enumerate(batch.groups) if g.pods[0].name == "big")
    small = 1 - big
    left_out = {(big, 0): 1}  # the small pods are left out although node b has room for both
    assert any("although it fits" in v for v in validate_placements(c, _names(snapshot, batch, left_out)))
    counts, changed = top_up(batch, left_out)
    assert changed and counts == {(big, 0): 1, (small, 1): 2}
    assert validate_placements(c, _names(snapshot, batch, counts)) == []


def test_no_room_and_a_host_port_clash_are_respected() -> None:
    web = {"hostPorts": [{"port": 80}]}
    c = cluster([node("a", cpu="4")], [pod("w1", cpu="1", **web), pod("w2", cpu="2", **web), pod("x", cpu="2")])
    snapshot, batch = _batch(c)
    by = {g.pods[0].name: gi for gi, g in enumerate(batch.groups)}
    counts, changed = top_up(batch, {(by["w2"], 0): 1})
    assert changed and counts == {(by["w2"], 0): 1, (by["x"], 0): 1}  # w1 clashes on port 80, then no room
    assert validate_placements(c, _names(snapshot, batch, counts)) == []


def test_an_answer_with_nothing_that_fits_is_unchanged() -> None:
    c = cluster([node("a", cpu="2")], [pod("p1", cpu="2"), pod("p2", cpu="2")])
    _, batch = _batch(c)
    assert top_up(batch, {(0, 0): 1}) == ({(0, 0): 1}, False)


def test_gangs_are_left_as_they_are() -> None:
    gang = {"labels": {"placer.io/gang": "g", "placer.io/gang-size": "2"}}
    c = cluster([node("a", cpu="4")], [pod("g1", **gang), pod("g2", **gang)])
    _, batch = _batch(c)
    assert top_up(batch, {}) == ({}, False)
