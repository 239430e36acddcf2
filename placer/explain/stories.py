"""What an explanation holds, as data (rendered at the edge: ``placer.cli.render_explain``).

One ``Explanation`` per pod: the filters that turned nodes away before the batch, the candidate
nodes with what each costs alone, and for each cheaper-looking node the rules that kept the pod
off it in the answer (``Why``); the decision, the plan step it belongs to, and for a pending
member of a workload group held in one topology domain, what each domain lacked (``DomainTry``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from placer.models import (
    Eviction,
    GroupDomain,
    NodeSelectorTerm,
    PodAffinityTerm,
    Reason,
    SpreadConstraint,
    Step,
    Toleration,
)

__all__ = ["Candidate", "DomainTry", "Explanation", "PodSpec", "Rule", "Why"]


class Rule(StrEnum):
    """What kept the pod off a node in the answer: a hard rule on the answer's final state, or the
    first objective level (in the order they are solved) that ranks the node worse."""

    GANG_DOMAIN = "gang-domain"  # its workload group sits, whole, in another domain
    GANG = "gang"  # unplaced: the node has room for it alone, its gang cannot be placed whole
    ROOM = "room"  # the answer filled the node: too little left for the pod
    PORTS = "ports"  # a pod the answer put there holds one of its host ports
    TOPOLOGY = "topology"  # spreading or inter-pod (anti-)affinity on where the others landed
    MATCHING = "matching"  # placer.io/when-no-node-fits: ignore-affinity keeps it on matching nodes first
    PREFERENCE = "preference"  # preferred node/pod affinity, PreferNoSchedule taints
    STRATEGY = "strategy"  # the strategy's cost (balance, spread, pack; GPU fragmentation) there
    TIE = "tie"  # as good by every term: the solver kept another
    SOLVER = "solver"  # better by the terms: the solver stopped (status, gap) before finding it


@dataclass(frozen=True)
class Why:
    rule: Rule
    filter: str | None = None  # topology: the kube-scheduler filter that refuses the node
    short: dict[str, int] = field(default_factory=dict)  # room: per resource, how much is missing
    taken_by: list[str] = field(default_factory=list)  # room, ports: pods this answer put on the node
    group: str | None = None  # gang-domain: the group held in one domain
    key: str | None = None  # gang-domain: the node label of its domains
    domain: str | None = None  # gang-domain: the group's domain in the answer
    here: str | None = None  # gang-domain: this node's domain (None: it lacks the label)
    # preference: the pod's preference score for this node (higher is better); strategy, tie,
    # solver: the strategy's cost of the pod there on the final state (lower is better)
    cost: float | None = None
    chosen_cost: float | None = None  # ... the same on the node the answer chose
    term: str | None = None  # strategy, tie, solver: the strategy's name ("balance", "balance + GPU fragmentation")
    status: str | None = None  # solver: how the solve ended
    gap: float | None = None


@dataclass(frozen=True)
class Candidate:
    node: str
    cost: float  # the strategy's cost of placing the pod there alone (lower is better)
    free_after: dict[str, float]  # per resource, the share of the node left free after it, 0..1
    chosen: bool
    fits_before: bool = True  # False: the answer's plan made the room (a preemptor's landing node)
    why_not: list[Why] = field(default_factory=list)  # what kept the pod off it in the answer


@dataclass(frozen=True)
class DomainTry:
    """One domain of a workload group's topology key, tried for the group's pending members."""

    group: str  # "PodGroup ns/name" or "CompositePodGroup ns/name"
    key: str  # the node label
    domain: str  # its value
    nodes: int  # nodes with that value
    allowed: int  # of them, nodes passing every filter but room (taints, selectors, cordon, ports)
    members: int  # pending pods of the group, all to be placed there together
    room_for: int  # how many of them fit in the answer's final state (first fit, largest first)
    pinned_elsewhere: bool = False  # members already run in another domain: this one is not allowed
    needs: dict[str, int] = field(default_factory=dict)  # per resource short: the members' total
    free: dict[str, int] = field(default_factory=dict)  # ... and what the allowed nodes have free
    filters: Reason | None = None  # per node of the domain, the first filter that turns it away


@dataclass(frozen=True)
class PodSpec:
    """The pod's scheduling constraints, as read (rendered as kubectl describes a pod)."""

    requests: dict[str, int] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    priority: int = 0
    gang: str | None = None
    group_domains: tuple[GroupDomain, ...] = ()


@dataclass
class Explanation:
    pod: str
    in_batch: bool  # pending and addressed to the scheduler (else: why not, in ``note``)
    note: str
    spec: PodSpec | None = None
    filters: Reason | None = None  # what turned nodes away before the batch
    candidates: list[Candidate] = field(default_factory=list)
    feasible: int = 0  # nodes with room that every filter allows
    node: str | None = None  # where the solve put it
    unplaced_code: str | None = None
    unplaced_reason: str | None = None
    evictions: list[Eviction] = field(default_factory=list)  # made for it
    evicted: Eviction | None = None  # a running pod the answer moves or preempts: where to, for whom
    plan: list[Step] = field(default_factory=list)  # when the answer is a plan: its steps (or its replacement's)
    waits_for: list[Step] = field(default_factory=list)  # the other steps those wait for
    domains: list[DomainTry] = field(default_factory=list)  # pending group member: each domain tried
