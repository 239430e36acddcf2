"""Never fewer workload groups, nor pods per key, than one group at a time (``groupfloor``).

Aspects: a rack where the most pods means one large group while kube-scheduler 1.37, one group at
a time in queue order, places two small ones (the rule keeps the two, pods-first alone takes the
large one); the same without kube-scheduler's answer (the engine's queue-order start sets the
floor); a higher key's pods are never given up for a lower key's groups; group swaps put a large
group left out in place of a smaller one (``groupswaps``); and a property over small random rack
and group instances: per priority from the highest down, placer places the 1.37 simulation's
groups and then at least its pods (with one priority: at least its groups and its pods). Every
answer goes through the independent validator (``support.solve``, ``validated``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from builders import property_settings
from hypothesis import given, note
from hypothesis import strategies as st
from support import solve, where
from workload_builders import RACK, dump, dump_json, pod, pod_group, racks

from placer.engine import (
    Scorer,
    batch_demand,
    build_batch,
    build_snapshot,
    counts_of,
    greedy,
    groupfloor,
    groupswaps,
)
from placer.inputs import parse_cluster
from placer.models import Cluster, Config
from placer.service import Outcome
from placer.validate import validate_placements

PROPERTY = property_settings("PLACER_GROUP_FLOOR_EXAMPLES", 12)
Json = dict[str, Any]


def _gang(name: str, size: int, created: str, priority: int = 0) -> list[Json]:
    return [
        pod_group(name, size, priority=priority),
        *(pod(f"{name}-{i}", name, created=created, priority=priority) for i in range(size)),
    ]


def _competing() -> Cluster:
    """One rack of 7 slots; groups b (3), c (3) arrive before a (7): one at a time places b and c
    (6 pods), the most pods is a alone (7)."""
    return dump(
        *racks({"r0": 7}),
        *_gang("b", 3, "2026-01-01T00:00:01Z"),
        *_gang("c", 3, "2026-01-01T00:00:02Z"),
        *_gang("a", 7, "2026-01-01T00:00:03Z"),
    )


def _groups(c: Cluster, out: Outcome) -> set[str]:
    placed = where(out)
    return {p.gang or "" for p in c.pods if p.name in placed}


def test_the_rule_keeps_the_groups_one_at_a_time_places_where_pods_first_takes_one() -> None:
    c = _competing()
    default = solve(c, policy="default")
    assert _groups(c, default) == {"b", "c"}  # kube-scheduler 1.37: b, then c; a fits no more
    out = solve(c)
    assert _groups(c, out) == {"b", "c"} and len(where(out)) == 6


def test_without_the_rule_the_most_pods_is_the_one_large_group(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _competing()
    monkeypatch.setattr(groupfloor, "floors", lambda batch, reference: {})
    monkeypatch.setattr(groupfloor, "held_to", lambda batch, counts, reference: (dict(counts), False))
    out = solve(c)
    assert _groups(c, out) == {"a"} and len(where(out)) == 7


def test_without_kube_schedulers_answer_the_queue_order_start_sets_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    # No kube-scheduler answer, as for a batch whose simulation would cost too much of the limit.
    monkeypatch.setattr("placer.service.ALTERNATIVE_WORK", 0)
    monkeypatch.setattr("placer.service.NO_WORSE_SHARE", 0.0)
    c = _competing()
    out = solve(c)
    assert _groups(c, out) == {"b", "c"}


def test_a_higher_keys_pods_are_never_given_up_for_lower_keys_groups() -> None:
    # Racks of 5 and 3. kube-scheduler, highest priority first in arrival order: h1 (2) in r1,
    # h2 (3) in r0, h3 (3) nowhere; then the priority-0 groups l1 and l2 (1 each) in what is left:
    # 4 groups, 5 high pods. placer places h1 and h2 in r0 and h3 in r1 (8 high pods, 3 groups):
    # the two low groups would cost high pods, so it places fewer groups in all, by the key order.
    c = dump(
        *racks({"r0": 5, "r1": 3}),
        *_gang("h1", 2, "2026-01-01T00:00:01Z", priority=1),
        *_gang("h2", 3, "2026-01-01T00:00:02Z", priority=1),
        *_gang("h3", 3, "2026-01-01T00:00:03Z", priority=1),
        *_gang("l1", 1, "2026-01-01T00:00:04Z"),
        *_gang("l2", 1, "2026-01-01T00:00:05Z"),
    )
    assert _groups(c, solve(c, policy="default")) == {"h1", "h2", "l1", "l2"}
    assert _groups(c, solve(c)) == {"h1", "h2", "h3"}


def test_a_swap_puts_the_large_group_left_out_in_place_of_a_smaller_one() -> None:
    # r0 holds 6 and r1 holds 2. In queue order b (2) takes r1, c (2) r0, then a (5) fits nowhere;
    # swapping c for a places a in r0 (then c fits nowhere): as many groups, 3 more pods.
    c = dump(
        *racks({"r0": 6, "r1": 2}),
        *_gang("b", 2, "2026-01-01T00:00:01Z"),
        *_gang("c", 2, "2026-01-01T00:00:02Z"),
        *_gang("a", 5, "2026-01-01T00:00:03Z"),
    )
    pending = [p for p in c.pods if p.pending]
    config = Config()
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    batch = build_batch(snap, pending, config)
    scorer = Scorer(snap, config, batch_demand(batch))
    queued = greedy(batch, scorer, queue=True)
    swapped = groupswaps.improve(batch, scorer, queued, spent=lambda: False)

    def answer(assignment: list[Any]) -> dict[str, str]:
        return {
            pod.key: snap.nodes[n].name
            for group, nodes in zip(batch.groups, assignment, strict=True)
            for pod, n in zip(group.pods, nodes.tolist(), strict=True)
            if n >= 0
        }

    before, after = answer(queued), answer(swapped)
    assert {k.split("/")[1][0] for k in before} == {"b", "c"}
    assert {k.split("/")[1][0] for k in after} == {"a", "b"} and len(after) == 7
    assert validate_placements(c, after) == []
    floor = groupfloor.floors(batch, counts_of(queued))
    assert groupfloor.order(batch, counts_of(swapped), floor) > groupfloor.order(batch, counts_of(queued), floor)


@st.composite
def instances(draw: st.DrawFn) -> str:
    """Racks of 1-6 one-cpu slots, 2-6 gangs of 1-5 pods each required in one rack, priorities
    0 or 1, random arrival order."""
    sizes = {f"r{r}": draw(st.integers(1, 6)) for r in range(draw(st.integers(1, 3)))}
    items: list[Json | list[Json]] = [*racks(sizes)]
    count = draw(st.integers(2, 6))
    arrival = draw(st.permutations(range(count)))
    for g in range(count):
        created = f"2026-01-01T00:00:{arrival[g]:02d}Z"
        items.append(_gang(f"g{g}", draw(st.integers(1, 5)), created, priority=draw(st.sampled_from([0, 0, 1]))))
    return dump_json(*items)


def _placed(c: Cluster, out: Outcome) -> tuple[Counter[int], Counter[int]]:
    """(gangs placed, pods placed) per priority."""
    placed = where(out)
    priority = {p.name: p.priority for p in c.pods}
    gangs = {p.gang: p.priority for p in c.pods if p.name in placed}
    return Counter(gangs.values()), Counter(priority[name] for name in placed)


def _order(keys: list[int], placed: tuple[Counter[int], Counter[int]], floor: Counter[int]) -> list[int]:
    """Per priority from the highest: the gangs placed up to ``floor``'s, then the pods placed."""
    gangs, pods = placed
    return [n for k in keys for n in (min(gangs[k], floor[k]), pods[k])]


@PROPERTY
@given(instances())
def test_placer_places_at_least_the_groups_and_pods_per_key_of_the_simulation(doc: str) -> None:
    note(doc)
    c = parse_cluster("random.json", doc)
    out, default = solve(c), solve(c, policy="default")
    mine, theirs = _placed(c, out), _placed(c, default)
    keys = sorted({p.priority for p in c.pods}, reverse=True)
    # Per priority from the highest down: the simulation's groups, then at least its pods.
    assert _order(keys, mine, theirs[0]) >= _order(keys, theirs, theirs[0]), (mine, theirs)
    if len(keys) == 1:  # one priority: at least its groups and at least its pods
        assert sum(mine[0].values()) >= sum(theirs[0].values()) and sum(mine[1].values()) >= sum(theirs[1].values())
    labels = {n.name: n.labels.get(RACK) for n in c.nodes}
    for gang in {p.gang for p in c.pods}:
        at = {labels[where(out)[p.name]] for p in c.pods if p.gang == gang and p.name in where(out)}
        assert len(at) <= 1, gang
