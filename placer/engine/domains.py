"""Topology domains of workload groups (Kubernetes 1.37 ``schedulingConstraints.topology``).

A *level* is one PodGroup or CompositePodGroup whose pods must all sit in one domain of a node
label (``Pod.group_domains``): the batch groups holding its pods, and for every node the index of
its domain (-1: the node lacks the label, or the level's running pods already chose another
domain). A CompositePodGroup's level holds the pods of every group below it, so a child's domain
lies inside its parent's by construction (each of its pods is in both).

Compiled once per batch (``compile_levels``) and read by the CP-SAT constraint
(``constraints.domains``), the greedy start (``greedy``) and the domain-packing objective
(``objectives.domains``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine.snapshot import Snapshot

if TYPE_CHECKING:
    from placer.engine.batch import Group

__all__ = ["DomainLevel", "DomainVars", "compile_levels", "fresh_domains", "keeps_domains", "restrict"]


@dataclass(frozen=True)
class DomainLevel:
    name: str  # "PodGroup ns/name" or "CompositePodGroup ns/name"
    key: str  # the node label of its domains
    groups: tuple[int, ...]  # batch groups whose pods belong to it
    domain: npt.NDArray[np.int64]  # node -> domain index (-1: not allowed)
    values: tuple[str, ...]  # domain index -> label value


def _domains_of(snapshot: Snapshot, key: str) -> tuple[npt.NDArray[np.int64], tuple[str, ...]]:
    labels = [node.labels.get(key) for node in snapshot.nodes]
    values = tuple(sorted({v for v in labels if v is not None}))
    at = {v: i for i, v in enumerate(values)}
    return np.array([at[v] if v is not None else -1 for v in labels], dtype=np.int64), values


def compile_levels(snapshot: Snapshot, groups: Sequence[Group]) -> tuple[DomainLevel, ...]:
    """The levels the batch's pods belong to, in order of name. Running pods of a level (a group
    partly running) pin it to their domain; if they already span several, only those domains
    remain and the level's pending pods can still go to only one of them."""
    members: dict[str, tuple[str, list[int]]] = {}
    for gi, group in enumerate(groups):
        for d in group.pods[0].group_domains:
            members.setdefault(d.group, (d.key, []))[1].append(gi)
    if not members:
        return ()
    running: dict[str, set[int]] = {}
    for n, pods in enumerate(snapshot.running):
        for pod in pods:
            for d in pod.group_domains:
                if d.group in members:
                    running.setdefault(d.group, set()).add(n)
    out = []
    by_key = {key: _domains_of(snapshot, key) for key in {key for key, _ in members.values()}}  # once per key
    for name in sorted(members):
        key, gis = members[name]
        domain, values = by_key[key]
        nodes = running.get(name)
        if nodes:
            taken = {int(domain[n]) for n in nodes} - {-1}
            domain = np.where(np.isin(domain, sorted(taken)), domain, -1)
        out.append(DomainLevel(name=name, key=key, groups=tuple(gis), domain=domain, values=values))
    return tuple(out)


def restrict(levels: Sequence[DomainLevel], groups: Sequence[Group]) -> None:
    """Nodes outside every allowed domain of a group's levels are not feasible for it."""
    for level in levels:
        ok = level.domain >= 0
        for gi in level.groups:
            group = groups[gi]
            group.masks = replace(group.masks, allowed=group.masks.allowed & ok)
            group.feasible = group.feasible[ok[group.feasible]]
            group.candidates = group.candidates[ok[group.candidates]]


def fresh_domains(snapshot: Snapshot, key: str) -> npt.NDArray[np.bool_]:
    """Per domain of ``key``: whether no pod runs in it yet (a whole domain, which the
    domain-packing objective keeps for groups to come)."""
    domain, values = _domains_of(snapshot, key)
    busy = np.zeros(len(values), dtype=np.bool_)
    for n, pods in enumerate(snapshot.running):
        if domain[n] >= 0 and any(p.running for p in pods):
            busy[domain[n]] = True
    return ~busy


@dataclass
class DomainVars:
    """What ``constraints.domains`` added to a model, for the domain-packing objective: each
    level's choice of a domain (with the placement variables that imply it), and per whole
    domain a flag set when some level takes it."""

    picks: list[tuple[cp_model.IntVar, list[cp_model.IntVar]]] = field(default_factory=list)
    opened: list[tuple[cp_model.IntVar, list[cp_model.IntVar]]] = field(default_factory=list)


def keeps_domains(levels: Sequence[DomainLevel], assignment: Sequence[npt.NDArray[np.int64]]) -> bool:
    """Whether an answer (per batch group, each pod's node or -1) holds each level's placed pods
    in one allowed domain: another answer (kube-scheduler's) is a start only then."""
    for level in levels:
        nodes = np.concatenate([assignment[gi][assignment[gi] >= 0] for gi in level.groups])
        domains = set(level.domain[nodes].tolist())
        if len(domains) > 1 or -1 in domains:
            return False
    return True
