"""Randomized: one hostile value on one running pod changes nothing for anyone else.

Aspects: over random small clusters (``test_properties.clusters``), a value placer cannot read
(integers of 5,000 digits, Unicode digits, negative numbers, NaN, empty, nested garbage) under any
key placer reads, as an annotation or a label of any one running pod, (1) leaves every pending
pod's placement exactly as it is without it, and (2) never overcommits a node, checked twice: by
the independent validator and by this file's own sum of requests on the clean cluster (what
Kubernetes accounts for each pod, whatever its annotations say). Deterministic solves of tiny
instances keep 500 examples to about 20 s; ``PLACER_HOSTILE_EXAMPLES=N`` runs more.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from builders import property_settings
from hypothesis import assume, given, note
from hypothesis import strategies as st
from test_properties import clusters

from placer.inputs import parse_cluster
from placer.models import POD_COUNT, Cluster, Config, SolverConfig
from placer.service import SolveOptions, solve_cluster
from placer.validate import validate_placements

Json = dict[str, Any]

HOSTILE_VALUES = [
    "9" * 5000,
    "0" * 5000 + "1",
    "-" + "9" * 5000,
    "1e" + "9" * 5000,
    "²",
    "٣",
    "\uff11",  # FULLWIDTH DIGIT ONE
    "-1",
    "-0",
    "0",
    "NaN",
    "inf",
    "",
    " ",
    "0x10",
    "1_000",
    "[" * 2000,
    '{"a": [1, {"b": null}], "c": "&x *x"}',
    "*alias",
    "\x00\u202e",
    "9999-99-99T99:99:99Z",
    "a" * 70_000,
]
KEYS = [
    "placer.io/gang-size",
    "placer.io/gang",
    "batch.kubernetes.io/job-completion-index",
    "placer.io/moved-at",
    "placer.io/evictable",
    "cluster-autoscaler.kubernetes.io/safe-to-evict",
    "placer.io/when-no-node-fits",
    "placer.io/when-no-node-matches",
    "placer.io/when-node-labels-change",
    "scheduling.x-k8s.io/pod-group",
    "placer.io/rebalance",
    "zone",
]
DETERMINISTIC = Config(solver=SolverConfig(workers=1, deterministic=True, time_limit=2, seed=0))


def _placements(c: Cluster) -> dict[str, str]:
    result = solve_cluster(c, SolveOptions(config=DETERMINISTIC, evict=False)).result
    return {p.pod: p.node for p in result.placements if p.pod is not None}


def _overcommitted(c: Cluster, placements: dict[str, str]) -> list[str]:
    """Resources of a node that the placed pods request and that end above its allocatable: every
    running pod of ``c`` counted by its requests (a resource a node does not list has room 0)."""
    pods = {p.key: p for p in c.pods}
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    asked: dict[str, set[str]] = defaultdict(set)
    for p, node, placed in [(p, p.node_name, False) for p in c.pods if p.running] + [
        (pods[key], node, True) for key, node in placements.items()
    ]:
        for name, amount in {**p.requests, POD_COUNT: 1}.items():
            used[str(node)][name] += amount
            if placed and amount > 0:
                asked[str(node)].add(name)
    return [
        f"{n.name} {name}: {used[n.name][name]} > {n.allocatable.get(name, 0)}"
        for n in c.nodes
        for name in sorted(asked[n.name])
        if (name != POD_COUNT or POD_COUNT in n.allocatable) and used[n.name][name] > n.allocatable.get(name, 0)
    ]


@property_settings("PLACER_HOSTILE_EXAMPLES", 500)
@given(
    doc=clusters(max_nodes=3, max_pending=5),
    value=st.sampled_from(HOSTILE_VALUES),
    key=st.sampled_from(KEYS),
    where=st.sampled_from(["annotations", "labels"]),
    which=st.integers(0, 9),
)
def test_a_hostile_value_on_a_running_pod_changes_no_other_placement_and_overcommits_no_node(
    doc: str, value: str, key: str, where: str, which: int
) -> None:
    clean_doc = json.loads(doc)
    running = [i for i, p in enumerate(clean_doc["pods"]) if "node" in p]
    assume(running)
    dirty_doc = json.loads(doc)
    target = dirty_doc["pods"][running[which % len(running)]]
    target[where] = {**target.get(where, {}), key: value}
    note(f"{where}[{key}] = {value[:40]!r} on {target['name']}")
    clean = parse_cluster("clean", json.dumps(clean_doc))
    dirty = parse_cluster("dirty", json.dumps(dirty_doc))
    got = _placements(dirty)
    assert got == _placements(clean)
    assert validate_placements(clean, got) == []
    assert _overcommitted(clean, got) == []
