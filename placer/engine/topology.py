"""Inter-pod affinity, anti-affinity and topology spread of one batch, compiled once.

The semantics are docs/topology.md's. Whatever depends on running pods only becomes a static
node mask per group (and a static preference for the soft forms); whatever depends on where
other pods of the batch go becomes a rule that the CP-SAT model (``constraints.topology``) and
the greedy pass (``TopologyState``) both enforce:

- ``Conflict(g, h, key)``: no domain of ``key`` holds pods of both groups (``g == h``: at most one
  pod of the group per domain) — required anti-affinity, either direction;
- ``AffinityRule``: each pod of ``g`` sits in a domain, per term, that holds a provider — running
  (constant domains) or a pod of a provider group (a batch group without required affinity of its
  own that matches all terms); in *seed* mode (no running provider, the pods match their own
  terms) all of ``g`` shares one domain per term, the first pod being kube-scheduler's seed;
- ``SpreadRule``: per domain of the owner's eligible nodes, count = running matches + pods of the
  counted groups; every domain that receives an owner pod stays within ``min + max_skew``.

Running pods that any of this depends on are reported as ``sensitive``: the global plan must not
evict or move them (that would change the masks computed here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from placer.engine.labels import BoolArray
from placer.engine.selectors import selector_matches
from placer.engine.snapshot import Snapshot, looks_at_incoming
from placer.models import Filter, LabelSelector, PlainFilter, Pod, PodAffinityTerm, SpreadConstraint

__all__ = [
    "AffinityRule",
    "Conflict",
    "SpreadRule",
    "StaticMasks",
    "Topology",
    "TopologyState",
    "affinity_signature",
    "compile_topology",
    "running_anti_terms",
    "running_inter_pod_terms",
    "term_matches",
    "topology_signature",
    "uses_topology",
]

IntArray = npt.NDArray[np.int64]
NS_NAME = "kubernetes.io/metadata.name"


def namespace_labels(namespaces: dict[str, dict[str, str]], ns: str) -> dict[str, str]:
    return namespaces.get(ns) or {NS_NAME: ns}


def term_matches(
    term: PodAffinityTerm, pod_ns: str, labels: dict[str, str], namespaces: dict[str, dict[str, str]]
) -> bool:
    if pod_ns not in term.namespaces and not (
        term.namespace_selector is not None
        and selector_matches(term.namespace_selector, namespace_labels(namespaces, pod_ns))
    ):
        return False
    return selector_matches(term.selector, labels)


def _matches_all(
    terms: Sequence[PodAffinityTerm], ns: str, labels: dict[str, str], namespaces: dict[str, dict[str, str]]
) -> bool:
    return all(term_matches(t, ns, labels, namespaces) for t in terms)


def _selector_key(selector: LabelSelector | None) -> object:
    if selector is None:
        return None
    return (tuple(sorted(selector.match_labels.items())), selector.match_expressions)


def _term_key(term: PodAffinityTerm) -> tuple[object, ...]:
    return (term.topology_key, term.namespaces, _selector_key(term.selector), _selector_key(term.namespace_selector))


def _spread_key(c: SpreadConstraint) -> tuple[object, ...]:
    policies = (c.node_affinity_policy, c.node_taints_policy)
    return (c.max_skew, c.topology_key, c.when_unsatisfiable, _selector_key(c.selector), c.min_domains, *policies)


def affinity_signature(pod: Pod) -> tuple[object, ...]:
    """The pod's namespace and required pod-affinity terms (hashable): pods alike in these that
    match their own terms share one domain per term."""
    return pod.namespace, tuple(_term_key(t) for t in pod.pod_affinity)


def topology_signature(pod: Pod) -> tuple[object, ...]:
    """What makes two pods interchangeable for these rules (hashable)."""
    return (
        pod.namespace,
        tuple(sorted(pod.labels.items())),
        tuple(_term_key(t) for t in pod.pod_affinity),
        tuple(_term_key(t) for t in pod.pod_anti_affinity),
        tuple((w.weight, _term_key(w.term)) for w in pod.pod_affinity_preferred),
        tuple((w.weight, _term_key(w.term)) for w in pod.pod_anti_affinity_preferred),
        tuple(_spread_key(c) for c in pod.spread),
    )


def uses_topology(pod: Pod) -> bool:
    return bool(
        pod.pod_affinity
        or pod.pod_anti_affinity
        or pod.spread
        or pod.pod_affinity_preferred
        or pod.pod_anti_affinity_preferred
    )


def running_inter_pod_terms(snapshot: Snapshot) -> bool:
    """Some running pod has terms that look at incoming pods (then the batch's topology is compiled)."""
    return snapshot.watchers > 0


def running_anti_terms(snapshot: Snapshot) -> list[PodAffinityTerm]:
    """The distinct required anti-affinity terms of the running pods."""
    terms: dict[tuple[object, ...], PodAffinityTerm] = {}
    for pods in snapshot.running:
        for pod in pods:
            for term in pod.pod_anti_affinity:
                terms.setdefault(_term_key(term), term)
    return list(terms.values())


Predicate = Callable[[str, dict[str, str], bool], bool]


def _spread_matches(c: SpreadConstraint, owner_ns: str, pod_ns: str, labels: dict[str, str]) -> bool:
    return pod_ns == owner_ns and selector_matches(c.selector, labels)


@dataclass
class Domains:
    """Domain index of every node for one topology key (-1: the node lacks the key)."""

    of_node: IntArray
    size: int


@dataclass
class Conflict:
    g: int
    h: int
    key: str
    weight: int = 0  # 0: required anti-affinity; else the preferred term's weight (soft)


@dataclass
class AffinityTerm:
    key: str
    constant: BoolArray  # per domain: a running provider is there
    providers: list[int]  # batch groups whose pods provide (seed mode: besides the seed domain)


@dataclass
class AffinityRule:
    g: int
    terms: list[AffinityTerm]
    seed: bool
    # Seed mode: the groups sharing these terms (same namespace); they all use one domain per term.
    family: list[int] = field(default_factory=list)
    matchers: list[int] = field(default_factory=list)  # groups whose pods match all the terms
    order: tuple[int, int] = (0, 0)  # admission order among groups with rules (see _more_providers)


@dataclass
class SpreadRule:
    owner: int
    key: str
    eligible: BoolArray  # per node: counted (owner's eligible nodes)
    domain: IntArray  # per node: domain index among eligible nodes, -1 outside
    size: int  # number of domains
    base: IntArray  # per domain: running matches
    counted: list[int]  # batch groups whose pods count (the owner too when it matches itself)
    max_skew: int
    min_domains: int | None
    hard: bool

    def floor_is_zero(self) -> bool:
        return self.min_domains is not None and self.size < self.min_domains


@dataclass
class StaticMasks:
    """Per group, what running pods alone rule out (True: allowed), in kube-scheduler's filter
    order for messages: spread keys, affinity, anti-affinity, existing pods' anti-affinity."""

    spread: BoolArray
    affinity: BoolArray
    anti: BoolArray
    existing_anti: BoolArray

    @property
    def allowed(self) -> BoolArray:
        return self.spread & self.affinity & self.anti & self.existing_anti


@dataclass
class Topology:
    domains: dict[str, Domains] = field(default_factory=dict)
    static: dict[int, StaticMasks] = field(default_factory=dict)
    preference: dict[int, IntArray] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)
    affinity: list[AffinityRule] = field(default_factory=list)
    spread: list[SpreadRule] = field(default_factory=list)
    sensitive: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)
    _index: RuleIndex | None = field(default=None, repr=False, compare=False)

    @property
    def involved(self) -> set[int]:
        """Groups whose placement interacts with other batch pods (kept out of descent and LNS)."""
        out: set[int] = set()
        for c in self.conflicts:
            out.update((c.g, c.h))
        for a in self.affinity:
            out.add(a.g)
            for t in a.terms:
                out.update(t.providers)
        for s in self.spread:
            out.add(s.owner)
            out.update(s.counted)
        return out

    @property
    def empty(self) -> bool:
        return not (self.static or self.preference or self.conflicts or self.affinity or self.spread)

    def rule_index(self, groups: int) -> RuleIndex:
        """The rules per group (built once: every ``TopologyState`` of the batch shares it)."""
        if self._index is None or self._index.groups != groups:
            self._index = RuleIndex.of(self, groups)
        return self._index


@dataclass
class RuleIndex:
    """The batch's rules by group, so that a question about one group costs its own rules only
    (500 groups with pairwise anti-affinity have 25,000 conflicts)."""

    groups: int
    # group -> (key, soft) -> the groups whose pods a pod of this group repels there
    repels: dict[int, dict[tuple[str, bool], IntArray]]
    # group -> the (key, soft) under which other groups' pods repel it
    repelled_under: dict[int, list[tuple[str, bool]]]
    conflict_kinds: set[tuple[str, bool]]
    affinity: dict[int, list[AffinityRule]]
    spread: dict[int, list[tuple[int, SpreadRule]]]

    @classmethod
    def of(cls, topo: Topology, groups: int) -> RuleIndex:
        repels: dict[int, dict[tuple[str, bool], list[int]]] = {}
        for c in topo.conflicts:
            kind = (c.key, bool(c.weight))
            repels.setdefault(c.g, {}).setdefault(kind, []).append(c.h)
            if c.h != c.g:
                repels.setdefault(c.h, {}).setdefault(kind, []).append(c.g)
        under: dict[int, set[tuple[str, bool]]] = {}
        for kinds in repels.values():
            for kind, partners in kinds.items():
                for h in partners:
                    under.setdefault(h, set()).add(kind)
        affinity: dict[int, list[AffinityRule]] = {}
        for a in topo.affinity:
            affinity.setdefault(a.g, []).append(a)
        spread: dict[int, list[tuple[int, SpreadRule]]] = {}
        for ri, r in enumerate(topo.spread):
            for gi in {r.owner, *r.counted}:
                spread.setdefault(gi, []).append((ri, r))
        return cls(
            groups=groups,
            repels={
                g: {kind: np.array(sorted(set(hs)), dtype=np.int64) for kind, hs in kinds.items()}
                for g, kinds in repels.items()
            },
            repelled_under={h: sorted(kinds) for h, kinds in under.items()},
            conflict_kinds={kind for kinds in repels.values() for kind in kinds},
            affinity=affinity,
            spread=spread,
        )


class _RunningIndex:
    """Running pods grouped by (namespace, labels, terminating), for selector matching per class."""

    def __init__(self, snapshot: Snapshot, anchors: dict[str, set[str] | None] | None) -> None:
        """``anchors``: label key -> values (None: any) one of which a pod needs to be matched by
        any selector of the batch; None: every pod may match (some selector has no anchor)."""
        classes: dict[tuple[object, ...], int] = {}
        self.ns: list[str] = []
        self.labels: list[dict[str, str]] = []
        self.terminating: list[bool] = []
        self.nodes: list[list[int]] = []
        self.keys: list[list[str]] = []
        self.anti: dict[tuple[object, ...], tuple[PodAffinityTerm, list[int], list[str]]] = {}
        # (term, signed weight) -> nodes of running pods with that preferred term
        self.preferred: dict[tuple[object, int], tuple[PodAffinityTerm, list[int]]] = {}
        # One anchor key (the usual case: every selector names app=...) is checked inline.
        single = next(iter(anchors.items())) if anchors is not None and len(anchors) == 1 else None
        for n, pods in enumerate(snapshot.running):
            for pod in pods:
                if looks_at_incoming(pod):
                    for term in pod.pod_anti_affinity:
                        entry = self.anti.setdefault(_term_key(term), (term, [], []))
                        entry[1].append(n)
                        entry[2].append(pod.key)
                    for sign, weighted in ((1, pod.pod_affinity_preferred), (-1, pod.pod_anti_affinity_preferred)):
                        for w in weighted:
                            self.preferred.setdefault((_term_key(w.term), sign * w.weight), (w.term, []))[1].append(n)
                if single is not None:
                    value = pod.labels.get(single[0])
                    if value is None or (single[1] is not None and value not in single[1]):
                        continue
                elif anchors is not None and not _anchored(pod.labels, anchors):
                    continue
                sig = (pod.namespace, tuple(sorted(pod.labels.items())), pod.terminating)
                ci = classes.get(sig)
                if ci is None:
                    ci = classes[sig] = len(self.ns)
                    self.ns.append(pod.namespace)
                    self.labels.append(pod.labels)
                    self.terminating.append(pod.terminating)
                    self.nodes.append([])
                    self.keys.append([])
                self.nodes[ci].append(n)
                self.keys[ci].append(pod.key)
        self._cache: dict[object, list[int]] = {}

    def matching(self, want: Predicate, key: object = None) -> list[int]:
        """Classes for which ``want(ns, labels, terminating)`` holds (cached under ``key``)."""
        if key is not None and key in self._cache:
            return self._cache[key]
        out = [ci for ci in range(len(self.ns)) if want(self.ns[ci], self.labels[ci], self.terminating[ci])]
        if key is not None:
            self._cache[key] = out
        return out


def _anchored(labels: dict[str, str], anchors: dict[str, set[str] | None]) -> bool:
    for key, values in anchors.items():
        value = labels.get(key)
        if value is not None and (values is None or value in values):
            return True
    return False


def _anchor(selector: LabelSelector | None) -> tuple[str, set[str] | None] | Literal[False] | None:
    """One label a pod must carry to match ``selector``: (key, values or None for any);
    False when the selector matches nothing, None when it has no such label."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        return key, {value}
    for req in selector.match_expressions:
        if req.operator == "In":
            return req.key, set(req.values)
        if req.operator == "Exists":
            return req.key, None
    return None


def _anchors(reps: Sequence[Pod]) -> dict[str, set[str] | None] | None:
    selectors = [s.selector for p in reps for s in p.spread]
    for p in reps:
        terms = [*p.pod_affinity, *p.pod_anti_affinity]
        terms += [w.term for w in (*p.pod_affinity_preferred, *p.pod_anti_affinity_preferred)]
        selectors.extend(t.selector for t in terms)
    out: dict[str, set[str] | None] = {}
    for selector in selectors:
        anchor = _anchor(selector)
        if anchor is False:
            continue
        if anchor is None:
            return None
        key, values = anchor
        if key in out:
            known = out[key]
            out[key] = None if known is None or values is None else known | values
        else:
            out[key] = values
    return out


class _Compiler:
    def __init__(
        self,
        snapshot: Snapshot,
        reps: Sequence[Pod],
        matching: Sequence[BoolArray],
        taints_ok: Sequence[BoolArray],
        namespaces: dict[str, dict[str, str]],
    ) -> None:
        self.snap = snapshot
        self.reps = reps
        self.matching = matching
        self.taints_ok = taints_ok
        self.namespaces = namespaces
        self.topo = Topology()
        self.n = len(snapshot.nodes)
        self._matches: dict[tuple[object, ...], list[int]] = {}

    def _reps_matching(self, terms: Sequence[PodAffinityTerm]) -> list[int]:
        """The groups whose pods match every one of ``terms``, once per distinct set of terms (a
        batch of 500 groups with ten distinct terms asks ten times, not 500 x 500)."""
        key = tuple(_term_key(t) for t in terms)
        found = self._matches.get(key)
        if found is None:
            found = self._matches[key] = [
                h for h, b in enumerate(self.reps) if _matches_all(terms, b.namespace, b.labels, self.namespaces)
            ]
        return found

    def domains(self, key: str) -> Domains:
        d = self.topo.domains.get(key)
        if d is None:
            values = [node.labels.get(key) for node in self.snap.nodes]
            vocab: dict[str, int] = {}
            of_node = np.array([-1 if v is None else vocab.setdefault(v, len(vocab)) for v in values], dtype=np.int64)
            d = self.topo.domains[key] = Domains(of_node=of_node, size=len(vocab))
            self.topo.keys.add(key)
        return d

    def _class_nodes(self, classes: list[int]) -> IntArray:
        nodes = [n for ci in classes for n in self.index.nodes[ci]]
        for ci in classes:
            self.topo.sensitive.update(self.index.keys[ci])
        return np.array(nodes, dtype=np.int64)

    def _domains_with(self, key: str, nodes: IntArray) -> BoolArray:
        d = self.domains(key)
        present = np.zeros(d.size, dtype=np.bool_)
        doms = d.of_node[nodes] if len(nodes) else np.zeros(0, dtype=np.int64)
        present[doms[doms >= 0]] = True
        return present

    def _nodes_in(self, key: str, present: BoolArray) -> BoolArray:
        d = self.domains(key)
        out = np.zeros(self.n, dtype=np.bool_)
        has = d.of_node >= 0
        out[has] = present[d.of_node[has]]
        return out

    def has_keys(self, keys: Sequence[str]) -> BoolArray:
        ok = np.ones(self.n, dtype=np.bool_)
        for key in keys:
            ok &= self.domains(key).of_node >= 0
        return ok

    def _term_classes(self, term: PodAffinityTerm) -> list[int]:
        return self.index.matching(
            lambda ns, labels, _terminating: term_matches(term, ns, labels, self.namespaces), _term_key(term)
        )

    def compile(self) -> Topology:
        if not any(uses_topology(p) for p in self.reps) and not running_inter_pod_terms(self.snap):
            return self.topo
        self.index = _RunningIndex(self.snap, _anchors(self.reps))
        for gi, pod in enumerate(self.reps):
            self._static(gi, pod)
            self._preference(gi, pod)
        self._conflicts()
        for gi, pod in enumerate(self.reps):
            if pod.pod_affinity:
                self._affinity(gi, pod)
            for c in pod.spread:
                self._spread(gi, pod, c)
        self._seed_families()
        return self.topo

    def _static(self, gi: int, pod: Pod) -> None:
        ones = np.ones(self.n, dtype=np.bool_)
        anti = ones.copy()
        for term in pod.pod_anti_affinity:
            classes = self._term_classes(term)
            nodes = self._class_nodes(classes)
            anti &= ~self._nodes_in(term.topology_key, self._domains_with(term.topology_key, nodes))
        existing = ones.copy()
        for term, at, keys in self.index.anti.values():
            if term_matches(term, pod.namespace, pod.labels, self.namespaces):
                self.topo.sensitive.update(keys)
                arr = np.array(at, dtype=np.int64)
                existing &= ~self._nodes_in(term.topology_key, self._domains_with(term.topology_key, arr))
        affinity = self.has_keys([t.topology_key for t in pod.pod_affinity])
        hard_keys = [c.topology_key for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"]
        spread = self.has_keys(hard_keys)
        masks = StaticMasks(spread=spread, affinity=affinity, anti=anti, existing_anti=existing)
        if not masks.allowed.all():
            self.topo.static[gi] = masks

    def _preference(self, gi: int, pod: Pod) -> None:
        """Preferred (anti-)affinity against running pods: +/- weight on nodes of domains holding a
        running pod its terms match, and of domains holding a running pod whose preferred terms
        match it (kube-scheduler's InterPodAffinity score counts both directions)."""
        pref = np.zeros(self.n, dtype=np.int64)
        for (_, signed), (term, at) in self.index.preferred.items():
            if term_matches(term, pod.namespace, pod.labels, self.namespaces):
                nodes = np.array(at, dtype=np.int64)
                pref += signed * self._nodes_in(term.topology_key, self._domains_with(term.topology_key, nodes))
        for sign, weighted in ((1, pod.pod_affinity_preferred), (-1, pod.pod_anti_affinity_preferred)):
            for w in weighted:
                term = w.term
                classes = self._term_classes(term)
                if not classes:
                    continue
                nodes = np.array([n for ci in classes for n in self.index.nodes[ci]], dtype=np.int64)
                hit = self._nodes_in(term.topology_key, self._domains_with(term.topology_key, nodes))
                pref += sign * w.weight * hit.astype(np.int64)
        if pref.any():
            self.topo.preference[gi] = pref

    def _conflicts(self) -> None:
        """Pairs of groups that anti-affinity keeps apart: required (hard) or preferred (soft,
        with the largest weight of the terms involved); a hard pair needs no soft one."""
        weights: dict[tuple[int, int, str], int] = {}
        for g, a in enumerate(self.reps):
            terms = [(0, t) for t in a.pod_anti_affinity] + [(w.weight, w.term) for w in a.pod_anti_affinity_preferred]
            for weight, term in terms:
                for h in self._reps_matching([term]):
                    pair = (min(g, h), max(g, h), term.topology_key)
                    known = weights.get(pair)
                    weights[pair] = weight if known is None else (0 if 0 in (known, weight) else max(known, weight))
        for (g, h, key), weight in weights.items():
            self.domains(key)
            self.topo.conflicts.append(Conflict(g=g, h=h, key=key, weight=weight))

    def _affinity(self, gi: int, pod: Pod) -> None:
        terms = pod.pod_affinity
        classes = self.index.matching(
            lambda ns, labels, _t: _matches_all(terms, ns, labels, self.namespaces), tuple(_term_key(t) for t in terms)
        )
        nodes = self._class_nodes(classes)
        keyed = np.zeros(len(nodes), dtype=np.bool_)
        for t in terms:
            keyed |= self.domains(t.topology_key).of_node[nodes] >= 0 if len(nodes) else keyed
        running = bool(keyed.any())
        matchers = self._reps_matching(terms)
        providers = [h for h in matchers if h != gi and not self.reps[h].pod_affinity]
        seed = not running and _matches_all(terms, pod.namespace, pod.labels, self.namespaces)
        compiled = [
            AffinityTerm(
                key=t.topology_key,
                constant=self._domains_with(t.topology_key, nodes),
                providers=[] if seed else providers,
            )
            for t in terms
        ]
        others = [h for h in matchers if h != gi]
        if not seed and not providers and not others:
            # No batch pod can provide: running providers only (or none), a static restriction.
            # Otherwise batch pods with affinity of their own may still provide (_more_providers).
            ok = np.ones(self.n, dtype=np.bool_)
            for c in compiled:
                ok &= self._nodes_in(c.key, c.constant)
            masks = self.topo.static.get(gi)
            if masks is None:
                ones = np.ones(self.n, dtype=np.bool_)
                masks = self.topo.static[gi] = StaticMasks(
                    spread=ones, affinity=ones.copy(), anti=ones, existing_anti=ones
                )
            masks.affinity = masks.affinity & ok
            return
        self.topo.affinity.append(AffinityRule(g=gi, terms=compiled, seed=seed, matchers=matchers))

    def _seed_families(self) -> None:
        """Seed-mode groups with the same terms form one family, which seeds one domain per term.
        A family whose terms an earlier seeding family's pods match cannot seed (that family's
        pods come first in the admission order): it takes them, and the groups without required
        affinity of their own, as providers instead."""
        families: dict[tuple[object, ...], list[AffinityRule]] = {}
        for rule in self.topo.affinity:
            if rule.seed:
                pod = self.reps[rule.g]
                key = (pod.namespace, tuple(_term_key(t) for t in pod.pod_affinity))
                families.setdefault(key, []).append(rule)
        seeding: list[int] = []
        for rules in families.values():
            groups = [r.g for r in rules]
            anchors = [h for h in seeding if h in rules[0].matchers]
            if anchors:
                free = [h for h in rules[0].matchers if h not in groups and not self.reps[h].pod_affinity]
                for rule in rules:
                    rule.seed = False
                    for term in rule.terms:
                        term.providers = sorted(set(anchors + free))
                continue
            for rule in rules:
                rule.family = groups
            seeding.extend(groups)
        self._more_providers(seeding)

    def _more_providers(self, seeding: list[int]) -> None:
        """Providers beyond the groups without required affinity, keeping an admission order:
        seeding families first, then the groups without a rule here (no affinity, or one only
        running pods can satisfy: admissible at any time), then the other groups, those running
        pods anchor first, each providing for later ones. A seeding family with a single term may also use the
        domains the groups without a rule provide, besides its seed domain."""
        dynamic = {r.g for r in self.topo.affinity}
        # Groups running pods can anchor (a running provider for every term) come first.
        rank = {r.g: (0 if all(t.constant.any() for t in r.terms) else 1, r.g) for r in self.topo.affinity}
        for rule in self.topo.affinity:
            rule.order = rank[rule.g]
            anytime = [h for h in rule.matchers if h != rule.g and h not in dynamic]
            if rule.seed:
                outside = [h for h in anytime if h not in rule.family]
                if len(rule.terms) == 1:
                    rule.terms[0].providers = outside
                continue
            # Other groups with rules provide in rank order (anchored first), which keeps it acyclic.
            earlier = [h for h in rule.matchers if h in dynamic and rank[h] < rank[rule.g] and h not in seeding]
            extra = anytime + [h for h in seeding if h in rule.matchers and h != rule.g] + earlier
            for term in rule.terms:
                term.providers = sorted(set(term.providers) | set(extra))

    def _spread(self, gi: int, pod: Pod, c: SpreadConstraint) -> None:
        hard_keys = [s.topology_key for s in pod.spread if s.when_unsatisfiable == "DoNotSchedule"]
        eligible = self.has_keys(hard_keys if c.when_unsatisfiable == "DoNotSchedule" else [c.topology_key])
        if c.node_affinity_policy == "Honor":
            eligible &= self.matching[gi]
        if c.node_taints_policy == "Honor":
            eligible &= self.taints_ok[gi]
        d = self.domains(c.topology_key)
        doms = np.where(eligible, d.of_node, -1)
        used = np.unique(doms[doms >= 0])
        remap = np.full(d.size + 1, -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        domain = np.where(doms >= 0, remap[doms], -1)
        size = len(used)
        classes = self.index.matching(
            lambda ns, labels, term: not term and _spread_matches(c, pod.namespace, ns, labels),
            ("topology-spread", pod.namespace, _selector_key(c.selector)),
        )
        base = np.zeros(size, dtype=np.int64)
        for ci in classes:
            self.topo.sensitive.update(self.index.keys[ci])
            at = domain[np.array(self.index.nodes[ci], dtype=np.int64)]
            np.add.at(base, at[at >= 0], 1)
        counted = [
            h for h, other in enumerate(self.reps) if _spread_matches(c, pod.namespace, other.namespace, other.labels)
        ]
        self.topo.spread.append(
            SpreadRule(
                owner=gi,
                key=c.topology_key,
                eligible=eligible,
                domain=domain,
                size=size,
                base=base,
                counted=counted,
                max_skew=c.max_skew,
                min_domains=c.min_domains,
                hard=c.when_unsatisfiable == "DoNotSchedule",
            )
        )


def compile_topology(
    snapshot: Snapshot,
    reps: Sequence[Pod],
    matching: Sequence[BoolArray],
    taints_ok: Sequence[BoolArray],
    namespaces: dict[str, dict[str, str]],
) -> Topology:
    """The batch's topology rules; ``reps`` holds one pod per group, with its node-affinity match
    (``matching``) and taint toleration (``taints_ok``) masks for nodeAffinityPolicy/nodeTaintsPolicy."""
    return _Compiler(snapshot, reps, matching, taints_ok, namespaces).compile()


class TopologyState:
    """Where the batch's pods are so far, per rule; answers "may group g take one more pod at n?".

    Each group's rules are indexed once, and its anti-affinity partners' pods are summed per
    domain as they are added (``_against``): a question costs the rules of that group only, not
    every rule of the batch (500 groups with pairwise terms have 25,000 of them)."""

    def __init__(self, topo: Topology, sizes: Sequence[int]) -> None:
        self.topo = topo
        self.by_key: dict[tuple[int, str], IntArray] = {}
        for gi in range(len(sizes)):
            for key, d in topo.domains.items():
                self.by_key[gi, key] = np.zeros(d.size + 1, dtype=np.int64)  # last slot: no key
        self.spread_count = [r.base.copy() for r in topo.spread]
        self.owner_in = [np.zeros(r.size, dtype=np.int64) for r in topo.spread]
        self.index = topo.rule_index(len(sizes))
        # (key, soft) -> [group, domain]: pods of the group's conflict partners placed in the domain
        # (soft: the preferred terms' conflicts; last domain slot: nodes without the key)
        self._against = {
            (key, soft): np.zeros((len(sizes), topo.domains[key].size + 1), dtype=np.int64)
            for key, soft in self.index.conflict_kinds
        }

    def rules(self, gi: int) -> int:
        """How many rules a question about ``gi`` looks at (its cost, in units of one node check)."""
        i = self.index
        return len(i.repelled_under.get(gi, ())) + len(i.affinity.get(gi, ())) + len(i.spread.get(gi, ()))

    def _repelled(self, gi: int, nodes: IntArray, *, soft: bool) -> BoolArray:
        """Nodes where a pod of a group in conflict with ``gi`` already is, in the conflict's domain
        (``soft``: the preferred terms' conflicts too)."""
        out = np.zeros(len(nodes), dtype=np.bool_)
        for key, weighted in self.index.repelled_under.get(gi, ()):
            if weighted and not soft:
                continue
            doms = self._dom(key, nodes)
            out |= (doms >= 0) & (self._against[key, weighted][gi, doms] > 0)
        return out

    def _dom(self, key: str, nodes: IntArray) -> IntArray:
        return self.topo.domains[key].of_node[nodes]

    def count(self, gi: int, key: str, doms: IntArray) -> IntArray:
        arr = self.by_key[gi, key]
        return np.where(doms >= 0, arr[doms], 0)

    def allowed(self, gi: int, nodes: IntArray, *, soft: bool = True) -> BoolArray:
        ok = np.ones(len(nodes), dtype=np.bool_)
        if len(nodes) == 0:
            return ok
        ok &= ~self._repelled(gi, nodes, soft=soft)
        for a in self.index.affinity.get(gi, ()):
            ok &= self._affinity_ok(a, nodes)
        for ri, r in self.index.spread.get(gi, ()):
            if r.hard or soft:
                ok &= self._spread_ok(ri, r, gi, nodes)
        return ok

    def checks(self, gi: int, nodes: IntArray) -> list[tuple[BoolArray, PlainFilter]]:
        """Per kind of hard rule, the nodes it allows for one more pod of ``gi``, with the filter
        that turns the others away (kube-scheduler's order: spreading, then inter-pod)."""
        out: list[tuple[BoolArray, PlainFilter]] = []
        static = self.topo.static.get(gi)
        if static is not None:
            out.append((static.spread[nodes], Filter.SPREAD_LABEL))
        spread = np.ones(len(nodes), dtype=np.bool_)
        for ri, r in self.index.spread.get(gi, ()):
            if r.hard:
                spread &= self._spread_ok(ri, r, gi, nodes)
        out.append((spread, Filter.SPREAD))
        affinity = static.affinity[nodes] if static is not None else np.ones(len(nodes), dtype=np.bool_)
        for a in self.index.affinity.get(gi, ()):
            affinity = affinity & self._affinity_ok(a, nodes)
        out.append((affinity, Filter.POD_AFFINITY))
        anti = static.anti[nodes] if static is not None else np.ones(len(nodes), dtype=np.bool_)
        anti = anti & ~self._repelled(gi, nodes, soft=False)
        out.append((anti, Filter.POD_ANTI_AFFINITY))
        if static is not None:
            out.append((static.existing_anti[nodes], Filter.EXISTING_ANTI_AFFINITY))
        return out

    def _affinity_ok(self, a: AffinityRule, nodes: IntArray) -> BoolArray:
        ok = np.ones(len(nodes), dtype=np.bool_)
        family = a.family or [a.g]
        placed_any = a.seed and any(self.by_key[h, t.key].sum() > 0 for h in family for t in a.terms)
        for t in a.terms:
            doms = self._dom(t.key, nodes)
            has = doms >= 0
            if a.seed:
                if placed_any:
                    seeded = np.zeros(len(nodes), dtype=np.bool_)
                    for h in [*family, *t.providers]:
                        seeded |= self.count(h, t.key, doms) > 0
                    has &= seeded
                ok &= has
                continue
            present = has.copy()
            if len(t.constant):
                present &= t.constant[np.maximum(doms, 0)]
            else:
                present[:] = False
            for h in t.providers:
                present |= has & (self.count(h, t.key, doms) > 0)
            ok &= present
        return ok

    def _spread_ok(self, ri: int, r: SpreadRule, gi: int, nodes: IntArray) -> BoolArray:
        doms = r.domain[nodes]
        inside = doms >= 0
        ok = inside.copy() if r.owner == gi and r.hard else np.ones(len(nodes), dtype=np.bool_)
        if r.size == 0:
            return ok if r.owner != gi else np.zeros(len(nodes), dtype=np.bool_) if r.hard else ok
        count = self.spread_count[ri]
        add = 1 if gi in r.counted else 0
        d = np.maximum(doms, 0)
        new = count[d] + add
        # the minimum after adding: only the receiving domain grows
        others_min = _min_excluding(count, d)
        floor = np.zeros(len(nodes), dtype=np.int64) if r.floor_is_zero() else np.minimum(others_min, new)
        owner_there = (self.owner_in[ri][d] > 0) | (r.owner == gi)
        bad = inside & owner_there & (new - floor > r.max_skew)
        return ok & ~bad

    def add(self, gi: int, n: int, delta: int = 1) -> None:
        for key, d in self.topo.domains.items():
            dom = int(d.of_node[n])
            self.by_key[gi, key][dom if dom >= 0 else d.size] += delta
        for (key, weighted), partners in self.index.repels.get(gi, {}).items():
            d = self.topo.domains[key]
            dom = int(d.of_node[n])
            self._against[key, weighted][partners, dom if dom >= 0 else d.size] += delta  # partners: distinct
        for ri, r in enumerate(self.topo.spread):
            dom = int(r.domain[n])
            if dom < 0:
                continue
            if gi in r.counted:
                self.spread_count[ri][dom] += delta
            if gi == r.owner:
                self.owner_in[ri][dom] += delta


def _min_excluding(count: IntArray, d: IntArray) -> IntArray:
    """For each index in ``d``, the minimum of ``count`` over the other positions (large if none)."""
    big = np.iinfo(np.int64).max // 4
    if len(count) == 1:
        return np.full(len(d), big, dtype=np.int64)
    order = np.argsort(count, kind="stable")
    first, second = count[order[0]], count[order[1]]
    out: IntArray = np.where(d == order[0], second, first).astype(np.int64)
    return out
