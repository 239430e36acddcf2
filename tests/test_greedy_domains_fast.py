"""The greedy start of workload groups held in topology domains (``greedy_domains``) weighs each
group's nodes in one call per block of pods and orders the domains with whole-array sums: its
answers are exactly those of the plain pass it replaced, which weighed every node again for
every pod, ordered the domains in Python and scanned every level for every group (its
``_order``, ``_first_fit`` and level scan kept below as the reference).

Random clusters of racks in zones, running pods, gangs of PodGroups of a few request shapes held
to a rack or a zone, some below a CompositePodGroup held to a zone, some with a host port; each
strategy; and every gang asking for one host port, which the pass keeps apart across gangs.
Every answer goes through the independent validator.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from support import greedy_answer
from workload_builders import RACK, ZONE, composite, dump, node, pod, pod_group

from placer.engine import Batch, Scorer, build_batch, build_snapshot
from placer.models import Cluster, Config

domains_module = importlib.import_module("placer.engine.greedy_domains")
IntArray = npt.NDArray[np.int64]
Fit = dict[int, list[int]]


# -- the reference: the pass as it was, one fresh evaluation per pod --------------------------------


def _order(batch: Batch, level: Any, gis: Sequence[int], used: IntArray) -> list[int]:
    fresh = batch.fresh(level.key)
    vec = batch.groups[gis[0]].vec
    nz = np.flatnonzero(vec)
    free = batch.snapshot.alloc - used
    per_node = np.min(free[:, nz] // vec[nz], axis=1) if len(nz) else np.zeros(len(free), dtype=np.int64)
    ok = level.domain >= 0
    room = np.bincount(level.domain[ok], weights=np.maximum(per_node[ok], 0), minlength=len(level.values))
    present = sorted({int(d) for d in level.domain.tolist() if d >= 0})
    if len(gis) == 1:
        present = [d for d in present if room[d] >= batch.groups[gis[0]].size]
    return sorted(present, key=lambda d: (bool(fresh[d]), float(room[d]), d))


def _levels_of(batch: Batch, gis: Sequence[int]) -> list[Any]:
    return [lv for lv in batch.levels if set(lv.groups) & set(gis)]


def _first_fit(
    batch: Batch, scorer: Scorer, gis: Sequence[int], mask: Any, used: IntArray, ports: Any
) -> tuple[Fit, IntArray] | None:
    alloc = batch.snapshot.alloc
    fit: Fit = {}
    for gi in gis:
        group = batch.groups[gi]
        nodes = group.feasible[mask[group.feasible]]
        nz = np.flatnonzero(group.vec)
        fit[gi] = []
        for _ in range(group.size):
            ok = np.all(alloc[np.ix_(nodes, nz)] - used[np.ix_(nodes, nz)] >= group.vec[nz], axis=1)
            if group.has_ports:
                ok &= ~np.isin(nodes, fit[gi])
            room = nodes[ok]
            if len(room) == 0:
                return None
            n = int(room[int(np.argmin(scorer.delta(group.vec, room, used)))])
            fit[gi].append(n)
            used[n] += group.vec
    return fit, used


# -- random workloads -------------------------------------------------------------------------------

SHAPES = (("1", "1Gi"), ("2", "4Gi"), ("3", "2Gi"), ("500m", "6Gi"))


def _cluster(seed: int, port: int | None = None) -> Cluster:
    """Two zones of three racks of 2-5 nodes (4-16 cpu), pods already running on some, and
    8-14 gangs of 1-7 pods: one request shape per gang, held to a rack (or a zone), a third of
    them below a composite held to a zone, a few asking for a host port (a port of their own, the
    reference keeping only a group's pods apart; with ``port``, every gang asks for that one)."""
    rng = np.random.default_rng(seed)
    items: list[Any] = []
    names: list[str] = []
    for z in range(2):
        for r in range(3):
            for i in range(int(rng.integers(2, 6))):
                name = f"z{z}-r{r}-{i}"
                items.append(node(name, int(rng.choice([4, 8, 16])), rack=f"z{z}-r{r}", zone=f"z{z}"))
                names.append(name)
    for k in range(int(rng.integers(0, 2 * len(names)))):
        cpu, _ = SHAPES[int(rng.integers(0, len(SHAPES)))]
        items.append(pod(f"run-{k}", node=str(rng.choice(names)), cpu=cpu))
    items.append(composite("job", key=ZONE))
    for g in range(int(rng.integers(8, 15))):
        cpu, memory = SHAPES[int(rng.integers(0, len(SHAPES)))]
        size = int(rng.integers(1, 8))
        key = RACK if rng.random() < 0.8 else ZONE
        parent = "job" if rng.random() < 0.3 else None
        items.append(pod_group(f"g{g}", size, key=key, parent=parent))
        ported = port is not None or rng.random() < 0.15
        for i in range(size):
            member = pod(f"g{g}-{i}", f"g{g}", cpu=cpu, created=f"2026-01-01T00:{g:02d}:{i:02d}Z")
            container = member["spec"]["containers"][0]
            container["resources"]["requests"]["memory"] = memory
            if ported:
                container["ports"] = [{"containerPort": 80, "hostPort": port or 8000 + g}]
            items.append(member)
    return dump(items)


def _answer(c: Cluster, config: Config) -> list[list[int]]:
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [p for p in c.pods if p.running], pending, c.namespaces)
    assert build_batch(snap, pending, config).levels
    return greedy_answer(c, snap, pending, config, scheduler_name="placer")


@pytest.mark.parametrize("strategy", ["balance", "spread", "pack"])
@pytest.mark.parametrize("seed", range(12))
def test_the_fast_pass_places_as_the_plain_one(strategy: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    c = _cluster(seed)
    config = Config.model_validate({"strategy": strategy})
    fast = _answer(c, config)
    with monkeypatch.context() as patch:
        patch.setattr(domains_module, "_order", _order)
        patch.setattr(domains_module, "_first_fit", _first_fit)
        patch.setattr(Batch, "levels_of", _levels_of)
        assert fast == _answer(c, config)
    assert any(n >= 0 for nodes in fast for n in nodes)


@pytest.mark.parametrize("seed", range(8))
def test_gangs_asking_for_one_host_port_never_share_a_node(seed: int) -> None:
    """Every gang asks for host port 8080: the pass keeps them on distinct nodes across gangs, not
    only within one (the validator refuses two pods with one host port on a node), and places some."""
    answer = _answer(_cluster(seed, port=8080), Config())
    placed = [n for nodes in answer for n in nodes if n >= 0]
    assert placed and len(placed) == len(set(placed))
