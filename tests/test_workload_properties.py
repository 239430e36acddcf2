"""Property tests of workload groups on small random clusters (hypothesis).

a. every answer (placements, or a global plan) passes the independent validator, which checks
   one domain per group, nesting, all-or-nothing and whole-group disruption with its own code;
b. no plan evicts part of a ``disruptionMode: all`` group (checked here again, directly);
c. every gang is placed whole or not at all, each in one rack.

Clusters: racks of 1-4 nodes of 1-2 cpu (some nodes without a rack label), running groups with
``disruptionMode`` all or single at low priority, loose running pods, and pending gangs and basic
groups of mixed priorities, some under one composite group held in one zone. Derandomised unless
``PLACER_PROPERTY_RANDOM`` is set; ``PLACER_WORKLOAD_EXAMPLES=N`` runs more.
"""

from __future__ import annotations

from typing import Any

from builders import property_settings
from hypothesis import given, note
from hypothesis import strategies as st
from support import solve
from workload_builders import RACK, composite, dump_json, node, pod, pod_group

from placer.inputs import parse_cluster

PROPERTY = property_settings("PLACER_WORKLOAD_EXAMPLES", 25)
Json = dict[str, Any]


@st.composite
def clusters(draw: st.DrawFn) -> str:
    items: list[Json] = []
    nodes: list[str] = []
    for r in range(draw(st.integers(1, 3))):
        zone = "z1" if r < 2 else "z2"
        for i in range(draw(st.integers(1, 4))):
            name = f"r{r}-{i}"
            nodes.append(name)
            items.append(node(name, draw(st.integers(1, 2)), rack=f"r{r}", zone=zone))
    if draw(st.booleans()):
        items.append(node("bare", 2))
        nodes.append("bare")
    free = {n: 1 for n in nodes}  # one running pod at most per node keeps the dump valid
    for g in range(draw(st.integers(0, 2))):
        name = f"run{g}"
        homes = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=3, unique=True))
        homes = [h for h in homes if free[h]]
        if not homes:
            continue
        mode = draw(st.sampled_from(["all", "single"]))
        items.append(pod_group(name, len(homes), key=None, disruption=mode, priority=draw(st.integers(0, 2))))
        for i, h in enumerate(homes):
            free[h] = 0
            items.append(pod(f"{name}-{i}", name, node=h))
    for i, h in enumerate(n for n in nodes if free[n] and draw(st.booleans())):
        items.append(pod(f"loose-{i}", node=h, priority=draw(st.integers(0, 2))))
    with_job = draw(st.booleans())
    if with_job:
        items.append(composite("job"))
    for g in range(draw(st.integers(1, 3))):
        name = f"new{g}"
        size = draw(st.integers(1, 4))
        basic = draw(st.integers(0, 4)) == 0
        parent = "job" if with_job and draw(st.booleans()) else None
        items.append(pod_group(name, None if basic else size, parent=parent, priority=draw(st.integers(0, 5))))
        items += [pod(f"{name}-{i}", name) for i in range(size)]
    return dump_json(items)


@PROPERTY
@given(clusters())
def test_every_answer_keeps_groups_whole_in_one_domain_and_disrupts_whole_groups(doc: str) -> None:
    note(doc)
    c = parse_cluster("random.json", doc)
    out = solve(c)  # (a): the validator, placements or plan
    evicted = {e.pod for e in out.result.evictions}
    units: dict[str, list[str]] = {}
    for p in c.pods:
        if p.running and p.disruption_unit is not None:
            units.setdefault(p.disruption_unit, []).append(p.key)
    for unit, keys in units.items():  # (b)
        hit = [k for k in keys if k in evicted]
        assert not hit or len(hit) == len(keys), (unit, hit, keys)
    labels = {n.name: n.labels.get(RACK) for n in c.nodes}
    placed = {p.pod: p.node for p in out.result.placements if p.pod}
    by_gang: dict[str, list[str | None]] = {}
    for p in c.pods:
        if p.pending and p.gang_size is not None:
            by_gang.setdefault(p.gang or "", []).append(labels[placed[p.key]] if p.key in placed else None)
    for gang, racks_of in by_gang.items():  # (c)
        assert all(r is None for r in racks_of) or (None not in racks_of and len(set(racks_of)) == 1), gang
