"""Readers of the public instance families in ``data/`` (sources and licences: ``data/README.md``).

Two kinds of family:

- packing (``panigrahy``, ``vectorpack-new``, ``triplets``): published multi-dimensional vector bin
  packing instances with a known optimal bin count. As a cluster: exactly ``optimum`` identical
  nodes whose allocatable is the bin capacity in each dimension, one pending pod per item. Placing
  every pod means packing into the optimal node count.
- trace (``azure-2017``, ``alibaba-2017``, ``google-2011``): request shapes (cpu, memory) with how
  often each occurs in a public cluster trace. As a cluster: a fixed set of identical nodes (the
  trace's machine shape where it has one) and pods drawn i.i.d. from the shape counts until the
  next pod would push demand above a fraction of the total capacity drawn in [0.85, 1.0] in some
  resource. Shapes that fit no node are left out.

Dimensions map to placer resources as ``benchmarks.packing`` does (cpu in m, memory and
ephemeral-storage in Mi, then ``placer.io/bandwidth`` and ``example.com/r5``..``r10``); a request of
0 is left out of the pod. Instances with a negative size are left out (``packing_instances``): 14 of
the 54 published triplets, all of class C (a triplet's last item is what the other two leave of
the bin, below 0 in these files): a pod cannot request less than nothing, and with the
negative size read as 0 their demand exceeds the optimal node count's room, so no method can pack
them. Nodes allow as many pods as the instance has (the pod count never binds).
Pods are listed in a shuffled order fixed by the instance, all ``schedulerName: placer``.
"""

from __future__ import annotations

import functools
import json
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from benchmarks.packing import RESOURCES, UNITS
from placer.inputs import parse_cluster
from placer.models import Cluster

__all__ = [
    "FAMILIES",
    "FILL",
    "PACKING_FAMILIES",
    "TRACE_FAMILIES",
    "Instance",
    "draw",
    "family_info",
    "named",
    "packing_instances",
    "trace_instance",
    "trace_shapes",
]

DATA = Path(__file__).resolve().parent / "data"
PACKING_FAMILIES = ("panigrahy", "vectorpack-new", "triplets")
TRACE_FAMILIES = ("azure-2017", "alibaba-2017", "google-2011")
FAMILIES = PACKING_FAMILIES + TRACE_FAMILIES
FILL = (0.85, 1.0)  # trace families: demand drawn up to this share of the capacity

Kind = Literal["packing", "trace"]
Vector = tuple[int, ...]


@dataclass(frozen=True)
class Instance:
    """One instance of a family, as identical nodes and groups of identical pods."""

    family: str
    name: str
    kind: Kind
    resources: tuple[str, ...]
    units: tuple[str, ...]
    capacity: Vector  # per node, in ``resources`` order
    nodes: int
    items: tuple[tuple[Vector, int], ...]  # (request per resource, how many pods)
    optimum: int | None = None  # packing: the optimal node count (== nodes)
    group: str = ""  # the instance's class (packing) or fill target (trace)

    @property
    def pods(self) -> int:
        return sum(n for _, n in self.items)

    def document(self) -> dict[str, Any]:
        """The cluster in placer's native schema (what ``placer solve`` reads)."""
        rng = np.random.default_rng(zlib.crc32(f"{self.family}/{self.name}".encode()))
        vectors = [v for v, n in self.items for _ in range(n)]
        order = rng.permutation(len(vectors)).tolist()

        def quantities(vector: Vector) -> dict[str, str]:
            return {r: f"{v}{u}" for r, u, v in zip(self.resources, self.units, vector, strict=True) if v > 0}

        return {
            "nodes": [
                {"name": f"n{i:03d}", "allocatable": {**quantities(self.capacity), "pods": max(self.pods, 1)}}
                for i in range(self.nodes)
            ],
            "pods": [
                {"name": f"p{k:04d}", "schedulerName": "placer", "requests": quantities(vectors[i])}
                for k, i in enumerate(order)
            ],
        }

    def cluster(self) -> Cluster:
        return parse_cluster(f"{self.family}-{self.name}.json", json.dumps(self.document()))


@functools.cache
def _load(family: str) -> dict[str, Any]:
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    data: dict[str, Any] = json.loads((DATA / f"{family}.json").read_text(encoding="utf-8"))
    return data


def family_info(family: str) -> dict[str, Any]:
    """Title, source, citation, licence (and for traces the node shape note) of a family."""
    return {k: v for k, v in _load(family).items() if k not in ("instances", "shapes", "machines")}


def packing_instances(family: str) -> list[Instance]:
    """Every stored instance of a packing family that a cluster can hold (no negative size), in
    file order."""
    data = _load(family)
    if data["kind"] != "packing":
        raise ValueError(f"{family} is not a packing family")
    out = []
    for raw in data["instances"]:
        d = int(raw["d"])
        if any(int(v) < 0 for row in raw["items"] for v in row[:d]):
            continue
        out.append(
            Instance(
                family=family,
                name=raw["name"],
                kind="packing",
                resources=RESOURCES[:d],
                units=tuple(UNITS.get(r, "") for r in RESOURCES[:d]),
                capacity=tuple(int(c) for c in raw["capacity"]),
                nodes=int(raw["optimum"]),
                items=tuple((tuple(int(v) for v in row[:d]), int(row[d])) for row in raw["items"]),
                optimum=int(raw["optimum"]),
                group=raw["class"],
            )
        )
    return out


def trace_shapes(family: str) -> tuple[Vector, list[tuple[Vector, int]]]:
    """A trace family's node capacity and its (request, count) shapes that fit that node."""
    data = _load(family)
    if data["kind"] != "trace":
        raise ValueError(f"{family} is not a trace family")
    width = len(data["resources"])
    if "node" in data:
        node = tuple(int(v) for v in data["node"])
    else:  # the trace's most common machine
        node = tuple(int(v) for v in max(data["machines"], key=lambda m: m[width])[:width])
    shapes = [(tuple(int(v) for v in s[:width]), int(s[width])) for s in data["shapes"]]
    return node, [(v, n) for v, n in shapes if all(a <= c for a, c in zip(v, node, strict=True))]


def trace_instance(family: str, seed: int, *, nodes: int | None = None) -> Instance:
    """Demand drawn from a trace family's shapes (module docstring) onto ``nodes`` nodes (the
    family's default when None), reproducible from ``seed``."""
    data = _load(family)
    node, shapes = trace_shapes(family)
    count = nodes or int(data["nodes"])
    rng = np.random.default_rng([seed, FAMILIES.index(family), count])
    target = float(rng.uniform(*FILL))
    room = np.array(node, dtype=np.float64) * count * target
    vectors = np.array([v for v, _ in shapes], dtype=np.int64)
    weights = np.array([n for _, n in shapes], dtype=np.float64)
    load = np.zeros(len(node), dtype=np.int64)
    drawn: Counter[int] = Counter()
    while True:
        k = int(rng.choice(len(shapes), p=weights / weights.sum()))
        if ((load + vectors[k]) > room).any():
            break
        load += vectors[k]
        drawn[k] += 1
    return Instance(
        family=family,
        name=f"seed{seed}-nodes{count}",
        kind="trace",
        resources=tuple(data["resources"]),
        units=tuple(data["units"][r] for r in data["resources"]),
        capacity=node,
        nodes=count,
        items=tuple((shapes[k][0], n) for k, n in sorted(drawn.items())),
        group=f"fill {target:.2f}",
    )


def draw(
    seed: int,
    *,
    per_family: int,
    traces: int,
    max_pods: int | None = None,
    families: tuple[str, ...] = FAMILIES,
    trace_nodes: int | None = None,
) -> list[Instance]:
    """Which instances a run uses, from ``seed``: up to ``per_family`` stored instances of each
    packing family (at most ``max_pods`` pods each) and ``traces`` drawn instances of each trace
    family (``trace_nodes`` nodes, or the family's default)."""
    rng = np.random.default_rng(seed)
    out: list[Instance] = []
    for family in families:
        if family in PACKING_FAMILIES:
            pool = [i for i in packing_instances(family) if max_pods is None or i.pods <= max_pods]
            picks = rng.permutation(len(pool))[:per_family]
            out += [pool[k] for k in sorted(picks.tolist())]
        else:
            out += [trace_instance(family, int(s), nodes=trace_nodes) for s in rng.integers(0, 2**31 - 1, size=traces)]
    return out


def named(names: list[tuple[str, str]]) -> list[Instance]:
    """The instances ``names`` lists as (family, name), in that order: a packing instance by its
    stored name, a trace instance by the name a run gave it (``seed<S>-nodes<N>``). A ValueError
    names the first that is not one."""
    out: list[Instance] = []
    for family, name in names:
        if family in PACKING_FAMILIES:
            found = [i for i in packing_instances(family) if i.name == name]
            if not found:
                raise ValueError(f"{family} has no instance {name}")
            out.append(found[0])
        elif family in TRACE_FAMILIES:
            seed, _, nodes = name.removeprefix("seed").partition("-nodes")
            if not (seed.isdigit() and nodes.isdigit()):
                raise ValueError(f"{family} instance {name}: a trace instance is named seed<S>-nodes<N>")
            out.append(trace_instance(family, int(seed), nodes=int(nodes)))
        else:
            raise ValueError(f"unknown family {family}; known: {', '.join(FAMILIES)}")
    return out
