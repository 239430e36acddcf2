"""Independent checker of inter-pod affinity, anti-affinity and topology spread (docs/topology.md).

Part of the validator: it shares no code with ``placer.engine`` (import-linter enforces it). The
rules are the final-state rules of docs/topology.md, re-implemented from the documentation:

- matching: a term matches pod ``q`` when ``q``'s namespace is among the term's ``namespaces`` or
  its labels match ``namespace_selector`` (an empty selector selects every namespace; a namespace
  missing from ``Cluster.namespaces`` has only the label ``kubernetes.io/metadata.name``), and the
  term's ``selector`` matches ``q``'s labels (a null selector matches nothing);
- required anti-affinity: no two distinct placed pods, not both running, where a required
  anti-affinity term of one matches the other and both nodes carry the term's key with equal
  values (so a running pod's term repels the batch pods it matches);
- required affinity: a batch pod's node carries every term's key, and the batch pods with the
  same terms and namespace (a group) are admissible in some order: each, when it comes, has in
  every term's domain a *provider* (a pod matching all the terms) outside the group or among the
  group's pods admitted before it; one pod matching its own terms may come first anywhere (the
  *seed*) when no running pod on a node with any of the keys matches all the terms;
- topology spread (DoNotSchedule only): a batch pod's node carries every key of its
  DoNotSchedule constraints; counting the non-terminating placed pods of its namespace that match
  the selector on the eligible nodes (``SpreadNodes``), its domain holds at most ``max_skew`` more
  than the emptiest domain (0 when there are fewer domains than ``min_domains``).

Which nodes a spread constraint counts is a node-level rule (``spread_node_eligible``): nodes with
every key of the pod's DoNotSchedule constraints, matching its nodeSelector and required node
affinity when ``node_affinity_policy`` is Honor, and whose NoSchedule/NoExecute taints it tolerates
when ``node_taints_policy`` is Honor. ``TopologyRules`` takes it as ``SpreadNodes``.

``TopologyRules`` holds what the running pods fix; ``TopologyState`` is one set of batch
placements on top, and answers the maximality rules' question "would this pod fit on that node
(maybe in place of these pods)": yes when the changed state has no violation the state lacks. It
first checks the pod's own rules on the node (most refusals end there), then the rules of the
pods the change touches (``TopologyRules.affected``): the others' violations cannot change.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from placer.models import Cluster, Node, Pod, PodAffinityTerm, SpreadConstraint
from placer.validate.semantics import first_untolerated, label_selector_matches, selector_matches
from placer.validate.violations import Violation, texts

METADATA_NAME = "kubernetes.io/metadata.name"
DO_NOT_SCHEDULE = "DoNotSchedule"

# Whether a node counts for a pod's DoNotSchedule spread constraint. It may depend only on the node,
# the pod's DoNotSchedule keys, nodeSelector, required node affinity and tolerations, and the
# constraint's policies (pods alike in these share one answer).
SpreadNodes = Callable[[Pod, SpreadConstraint, Node], bool]


# --- matching ---------------------------------------------------------------------------------


def namespace_labels(namespaces: Mapping[str, Mapping[str, str]], name: str) -> Mapping[str, str]:
    """A namespace's labels; one the cluster does not list has only ``kubernetes.io/metadata.name``."""
    found = namespaces.get(name)
    return found if found is not None else {METADATA_NAME: name}


def term_namespace_matches(term: PodAffinityTerm, namespace: str, namespaces: Mapping[str, Mapping[str, str]]) -> bool:
    """The namespace is listed by the term or selected by its namespace selector (empty: all)."""
    if namespace in term.namespaces:
        return True
    return term.namespace_selector is not None and label_selector_matches(
        term.namespace_selector, namespace_labels(namespaces, namespace)
    )


def term_matches_pod(term: PodAffinityTerm, pod: Pod, namespaces: Mapping[str, Mapping[str, str]]) -> bool:
    """An inter-pod (anti-)affinity term matches a pod: its namespace and its labels."""
    return term_namespace_matches(term, pod.namespace, namespaces) and label_selector_matches(term.selector, pod.labels)


# --- the placed pods ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Placed:
    pod: Pod
    node: Node
    batch: bool
    key: str  # the pod's

    @classmethod
    def of(cls, pod: Pod, node: Node, *, batch: bool) -> _Placed:
        return cls(pod, node, batch, pod.key)

    def where(self) -> str:
        return f"{self.key} on {self.node.name}"


Domains = dict[str, dict[str, list[_Placed]]]  # topology key -> value -> placed pods there


def _hard_spread(pod: Pod) -> list[tuple[int, SpreadConstraint]]:
    return [(i, c) for i, c in enumerate(pod.spread) if c.when_unsatisfiable == DO_NOT_SCHEDULE]


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def _index(entries: Iterable[_Placed], key: str) -> dict[str, list[_Placed]]:
    out: dict[str, list[_Placed]] = {}
    for e in entries:
        if key in e.node.labels:
            out.setdefault(e.node.labels[key], []).append(e)
    return out


class TopologyRules:
    """The topology rules of one cluster over a fixed set of running pods.

    ``running``: the pods that stay bound in the final state (running pods on nodes of the
    cluster; a plan leaves out the ones it evicts). ``violations`` judges one set of batch
    placements (pod, node name) on top of them; what depends on the running pods alone (their
    domains, their spread counts, term matches) is computed once.
    """

    def __init__(self, cluster: Cluster, running: Iterable[Pod], spread_nodes: SpreadNodes) -> None:
        self.nodes = {n.name: n for n in cluster.nodes}
        self.namespaces = cluster.namespaces
        self._pods = running if isinstance(running, list) else list(running)
        self._running: list[_Placed] | None = None
        self.repellers = _Repellers(
            _Placed.of(p, self.nodes[p.node_name], batch=False)
            for p in self._pods
            if p.pod_anti_affinity and p.node_name is not None and p.node_name in self.nodes
        )
        self._spread_nodes = spread_nodes
        self._domains: Domains = {}
        # (term, pod) by identity -> whether the term matches the pod; the value keeps both alive.
        self._matches: dict[tuple[int, int], tuple[PodAffinityTerm, Pod, bool]] = {}
        self._groups: dict[str, str] = {}
        self._seed_blocked: dict[str, bool] = {}
        self._eligible: dict[str, frozenset[str]] = {}
        self._signatures: dict[tuple[str, int], tuple[str, str]] = {}
        self._base_counts: dict[str, dict[str, int]] = {}
        self._countable: dict[tuple[str, tuple[tuple[str, str], ...]], list[Node]] | None = None
        self._by_node: dict[str, list[tuple[int, Pod]]] | None = None
        self._nodes_by_value: dict[str, dict[str, list[Node]]] = {}

    def countable(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], list[Node]]:
        """The nodes of the running pods a spread constraint may count (not terminating), by the
        pods' namespace and labels: a selector is then matched once per distinct label set."""
        if self._countable is None:
            self._countable = {}
            nodes = self.nodes
            for p in self._pods:
                if not p.terminating and p.node_name is not None and p.node_name in nodes:
                    alike = (p.namespace, tuple(sorted(p.labels.items())))
                    self._countable.setdefault(alike, []).append(nodes[p.node_name])
        return self._countable

    @property
    def running(self) -> list[_Placed]:
        """The running pods where they run (built on first use: most checks never need them)."""
        if self._running is None:
            nodes = self.nodes
            self._running = [
                _Placed.of(p, nodes[p.node_name], batch=False)
                for p in self._pods
                if p.node_name is not None and p.node_name in nodes
            ]
        return self._running

    @staticmethod
    def constrained(pod: Pod) -> bool:
        """Whether the pod carries a rule of its own: required (anti-)affinity or DoNotSchedule spread."""
        return bool(pod.pod_affinity or pod.pod_anti_affinity or _hard_spread(pod))

    def applies(self, batch: Iterable[Pod]) -> bool:
        """Whether any rule can fail with these batch pods: one of them carries a rule, or a running pod
        has required anti-affinity."""
        return bool(self.repellers.keys) or any(self.constrained(p) for p in batch)

    def violations(self, placed: Sequence[tuple[Pod, str]], subjects: Collection[str] | None = None) -> list[str]:
        """Every topology rule the final state breaks, one line per pod, node and rule.

        ``subjects`` (pod keys): only the rules of these batch pods and the anti-affinity pairs
        with one of them; the lines about them are the same as without ``subjects``."""
        return texts(self.lines(placed, subjects))

    def lines(self, placed: Sequence[tuple[Pod, str]], subjects: Collection[str] | None = None) -> list[Violation]:
        """``violations`` with what each one is."""
        if not self.applies(pod for pod, _ in placed):
            return []
        return _lines(self._build_world(placed, subjects))

    def _build_world(self, placed: Sequence[tuple[Pod, str]], subjects: Collection[str] | None = None) -> _World:
        return _World(self, [_Placed.of(pod, self.nodes[name], batch=True) for pod, name in placed], subjects)

    def affected(
        self, added: Sequence[tuple[Pod, str]], removed: Sequence[tuple[Pod, str]], placed: Iterable[tuple[Pod, str]]
    ) -> set[str]:
        """The batch pods of ``placed`` (the state after the change) whose lines can get worse when
        the ``added`` pods join and the ``removed`` ones leave: the added pods (their rules and
        every pair with them), the self-affine groups of the changed pods and of the pods they
        provide for, and the pods whose spread constraints count them (for an addition, only in
        its own domain: the minimum can only rise)."""
        changed = [(p, self.nodes[n], True) for p, n in added] + [(p, self.nodes[n], False) for p, n in removed]
        out = {p.key for p, _ in added}
        groups = {self.group(p) for p, _, _ in changed if p.pod_affinity}
        state = list(placed)
        for q, q_node in state:
            if q.pod_affinity and any(self.matches_all(q.pod_affinity, p) for p, _, _ in changed):
                groups.add(self.group(q))
            for index, c in _hard_spread(q):
                if any(self._worsens(q, self.nodes[q_node], index, c, *change) for change in changed):
                    out.add(q.key)
        out |= {q.key for q, _ in state if q.pod_affinity and self.group(q) in groups}
        return out

    def _worsens(
        self, owner: Pod, where: Node, index: int, c: SpreadConstraint, pod: Pod, node: Node, added: bool
    ) -> bool:
        """Whether adding or removing ``pod`` on ``node`` can raise the owner's skew at ``where``."""
        if node.name not in self.eligible(owner, index) or not _counts(c, owner, pod):
            return False
        return not added or node.labels.get(c.topology_key) == where.labels.get(c.topology_key)

    # --- cached facts ---

    def matches(self, term: PodAffinityTerm, pod: Pod) -> bool:
        cache_key = (id(term), id(pod))
        found = self._matches.get(cache_key)
        if found is None:
            found = (term, pod, term_matches_pod(term, pod, self.namespaces))
            self._matches[cache_key] = found
        return found[2]

    def matches_all(self, terms: Sequence[PodAffinityTerm], pod: Pod) -> bool:
        return all(self.matches(t, pod) for t in terms)

    def group(self, pod: Pod) -> str:
        """The pod's namespace and required affinity terms, equal for pods of one self-affine group."""
        if pod.key not in self._groups:
            terms = [t.model_dump(mode="json") for t in pod.pod_affinity]
            self._groups[pod.key] = _canonical([pod.namespace, terms])
        return self._groups[pod.key]

    def running_in_domain(self, key: str, value: str) -> list[_Placed]:
        """The running pods on nodes whose label ``key`` is ``value``, in the order of ``running``
        (built per domain on first use: most rules ask about a few domains)."""
        domains = self._domains.setdefault(key, {})
        found = domains.get(value)
        if found is None:
            if self._by_node is None:
                self._by_node = {}
                for position, p in enumerate(self._pods):
                    if p.node_name is not None:
                        self._by_node.setdefault(p.node_name, []).append((position, p))
            if key not in self._nodes_by_value:
                by_value: dict[str, list[Node]] = {}
                for node in self.nodes.values():
                    if key in node.labels:
                        by_value.setdefault(node.labels[key], []).append(node)
                self._nodes_by_value[key] = by_value
            entries = [
                (at, p, node)
                for node in self._nodes_by_value[key].get(value, [])
                for at, p in self._by_node.get(node.name, [])
            ]
            entries.sort(key=lambda entry: entry[0])
            found = domains[value] = [_Placed.of(p, node, batch=False) for _, p, node in entries]
        return found

    def seed_blocked(self, pod: Pod) -> bool:
        """A running pod on a node carrying any of the pod's affinity keys matches all its terms."""
        group = self.group(pod)
        if group not in self._seed_blocked:
            keys = {t.topology_key for t in pod.pod_affinity}
            self._seed_blocked[group] = any(
                keys & e.node.labels.keys() and self.matches_all(pod.pod_affinity, e.pod) for e in self.running
            )
        return self._seed_blocked[group]

    def _signature(self, pod: Pod, index: int) -> tuple[str, str]:
        """(which nodes, which pods where) the pod's spread constraint ``index`` counts, as strings
        equal for constraints that count alike. ``SpreadNodes`` depends on the pod's DoNotSchedule
        keys, nodeSelector, required node affinity and tolerations and the constraint's policies."""
        cache_key = (pod.key, index)
        if cache_key not in self._signatures:
            c = pod.spread[index]
            nodes = _canonical(
                [
                    sorted({k.topology_key for _, k in _hard_spread(pod)}),
                    pod.node_selector,
                    pod.required_terms and [t.model_dump(mode="json") for t in pod.required_terms],
                    [t.model_dump(mode="json") for t in pod.tolerations],
                    [c.node_affinity_policy, c.node_taints_policy],
                ]
            )
            selector = c.selector and c.selector.model_dump(mode="json")
            self._signatures[cache_key] = (nodes, _canonical([nodes, pod.namespace, c.topology_key, selector]))
        return self._signatures[cache_key]

    def eligible(self, pod: Pod, index: int) -> frozenset[str]:
        """The nodes the pod's spread constraint number ``index`` counts."""
        signature = self._signature(pod, index)[0]
        if signature not in self._eligible:
            constraint = pod.spread[index]
            self._eligible[signature] = frozenset(
                name for name, node in self.nodes.items() if self._spread_nodes(pod, constraint, node)
            )
        return self._eligible[signature]

    def spread_signature(self, pod: Pod, index: int) -> str:
        """Equal for constraints that count the same pods on the same nodes."""
        return self._signature(pod, index)[1]

    def base_counts(self, pod: Pod, index: int) -> dict[str, int]:
        """Every domain of the constraint among its eligible nodes, with the running pods it counts."""
        signature = self.spread_signature(pod, index)
        if signature not in self._base_counts:
            c = pod.spread[index]
            eligible = self.eligible(pod, index)
            key = c.topology_key
            counts = {self.nodes[n].labels[key]: 0 for n in eligible if key in self.nodes[n].labels}
            # ``_counts`` per label set of the running pods (not terminating, the pod's namespace).
            for (namespace, labels), where in self.countable().items():
                if namespace != pod.namespace or not label_selector_matches(c.selector, dict(labels)):
                    continue
                for node in where:
                    if node.name in eligible and key in node.labels:
                        counts[node.labels[key]] += 1
            self._base_counts[signature] = counts
        return self._base_counts[signature]


def _counts(constraint: SpreadConstraint, owner: Pod, pod: Pod) -> bool:
    """The owner's spread constraint counts the pod (wherever it is): not terminating, the owner's
    namespace, labels matching the selector."""
    return (
        not pod.terminating
        and pod.namespace == owner.namespace
        and label_selector_matches(constraint.selector, pod.labels)
    )


class TopologyState:
    """One final state (batch placements) under the rules: its violations, and whether placing
    one more pod there (or moving one, or taking some off) keeps every rule the state keeps;
    the maximality rules ask it whether an unplaced pod would fit."""

    def __init__(self, rules: TopologyRules, placed: Iterable[tuple[Pod, str]]) -> None:
        self.rules = rules
        self.placed = list(placed)
        self._world: _World | None = None
        self._now: set[tuple[object, ...]] | None = None
        self._applies: bool | None = None

    def violations(self) -> list[str]:
        return texts(self._lines())

    def lines(self) -> list[Violation]:
        """``violations`` with what each one is."""
        return self._lines()

    def _lines(self) -> list[Violation]:
        return _lines(self._current()) if self._applies_now() else []

    def add(self, pod: Pod, node_name: str) -> None:
        self.placed.append((pod, node_name))
        self._world, self._now, self._applies = None, None, None

    def allows(self, pod: Pod, node_name: str, *, without: Sequence[Pod] = ()) -> bool:
        """Whether the state with ``pod`` on ``node_name`` (moved there if placed elsewhere) and the
        batch pods ``without`` taken off has no violation the state itself lacks."""
        if not self._applies_now() and not self.rules.constrained(pod):
            return True
        gone = {p.key for p in without} | {pod.key}
        if _own_violation(self._current(), _Placed.of(pod, self.rules.nodes[node_name], batch=True), gone):
            return False  # a violation of the pod on that node: new (the pod was not there)
        if self._now is None:
            self._now = {line.what for line in self._lines()}
        removed = [(p, n) for p, n in self.placed if p.key in gone]
        changed = [(p, n) for p, n in self.placed if p.key not in gone]
        changed.append((pod, node_name))
        # Only the pods the change touches can get a new violation; the others' stay as they are.
        subjects = self.rules.affected([(pod, node_name)], removed, changed)
        return all(line.what in self._now for line in self.rules.lines(changed, subjects))

    def _applies_now(self) -> bool:
        if self._applies is None:
            self._applies = self.rules.applies(p for p, _ in self.placed)
        return self._applies

    def _current(self) -> _World:
        if self._world is None:
            self._world = self.rules._build_world(self.placed)
        return self._world


class _Repellers:
    """Placed pods with required anti-affinity, by the domains of their terms."""

    def __init__(self, holders: Iterable[_Placed]) -> None:
        self.index: dict[tuple[str, str], list[tuple[_Placed, int]]] = {}
        for holder in holders:
            for i, term in enumerate(holder.pod.pod_anti_affinity):
                value = holder.node.labels.get(term.topology_key)
                if value is not None:
                    self.index.setdefault((term.topology_key, value), []).append((holder, i))
        self.keys = sorted({key for key, _ in self.index})

    def near(self, p: _Placed) -> list[tuple[_Placed, int]]:
        """(holder, term index) whose term's domain holds ``p``'s node."""
        out: list[tuple[_Placed, int]] = []
        for key in self.keys:
            value = p.node.labels.get(key)
            if value is not None:
                out += self.index.get((key, value), [])
        return out


@dataclass
class _World:
    """The batch pods of one candidate final state on top of the rules' running pods."""

    rules: TopologyRules
    batch: list[_Placed]
    subjects: Collection[str] | None
    judged: list[_Placed] = field(init=False)  # the batch pods whose rules are judged
    repellers: _Repellers = field(init=False)  # batch pods with required anti-affinity
    by_key: dict[str, _Placed] = field(init=False)
    _domains: Domains = field(default_factory=dict)
    _counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.judged = [p for p in self.batch if self.subject(p)]
        self.repellers = _Repellers(p for p in self.batch if p.pod.pod_anti_affinity)
        self.by_key = {p.key: p for p in self.batch}

    def subject(self, p: _Placed) -> bool:
        return self.subjects is None or p.key in self.subjects

    def batch_in_domain(self, key: str, value: str) -> list[_Placed]:
        if key not in self._domains:
            self._domains[key] = _index(self.batch, key)
        return self._domains[key].get(value, [])

    def in_domain(self, key: str, value: str) -> list[_Placed]:
        """The placed pods on nodes whose label ``key`` is ``value``."""
        return self.rules.running_in_domain(key, value) + self.batch_in_domain(key, value)

    def spread_counts(self, p: _Placed, index: int) -> dict[str, int]:
        """The constraint's domains with the non-terminating placed pods of ``p``'s namespace that
        match its selector on its eligible nodes."""
        signature = self.rules.spread_signature(p.pod, index)
        if signature not in self._counts:
            counts = dict(self.rules.base_counts(p.pod, index))
            c = p.pod.spread[index]
            eligible = self.rules.eligible(p.pod, index)
            for e in self.batch:
                if e.node.name in eligible and c.topology_key in e.node.labels and _counts(c, p.pod, e.pod):
                    counts[e.node.labels[c.topology_key]] += 1
            self._counts[signature] = counts
        return self._counts[signature]


def _lines(world: _World) -> list[Violation]:
    return _anti_violations(world) + _affinity_violations(world) + _spread_violations(world)


def _own_violation(world: _World, p: _Placed, excluded: Collection[str]) -> bool:
    """Whether ``p``'s own rules fail with it on its node among the world's pods but ``excluded``
    (``p``'s key among them): a quick answer where the rules surely fail; the seed rule's count
    of lacking group members is left to the full check."""
    return _repelled(world, p, excluded) or _no_provider(world, p, excluded) or _skewed(world, p, excluded)


# --- required anti-affinity ---------------------------------------------------------------------


def _anti_violations(world: _World) -> list[Violation]:
    """Pairs of placed pods, not both running, in one domain of a required anti-affinity term of
    either that matches the other; with ``subjects``, the pairs with a subject."""
    out: list[Violation] = []
    for p in world.judged:
        for index, term in enumerate(p.pod.pod_anti_affinity):  # p's own terms against every placed pod
            value = p.node.labels.get(term.topology_key)
            if value is None:
                continue
            for other in world.in_domain(term.topology_key, value):
                if other.key != p.key and world.rules.matches(term, other.pod):
                    out.append(_anti_line(p, index, other))
        # the others' terms against p (a judged holder's pairs are all above)
        for holder, index in world.rules.repellers.near(p) + world.repellers.near(p):
            judged = holder.batch and world.subject(holder)
            if not judged and holder.key != p.key and world.rules.matches(holder.pod.pod_anti_affinity[index], p.pod):
                out.append(_anti_line(holder, index, p))
    return out


def _anti_line(holder: _Placed, index: int, other: _Placed) -> Violation:
    key = holder.pod.pod_anti_affinity[index].topology_key
    about = (holder.node.name, index, other.key, other.node.name)
    return Violation(
        "anti-affinity", holder.key, _anti_message(holder, other, f"{key}={holder.node.labels[key]}"), about
    )


def _anti_message(holder: _Placed, other: _Placed, domain: str) -> str:
    if holder.batch:
        kind = "batch" if other.batch else "running"
        return (
            f"{holder.where()}: required pod anti-affinity term matches {kind} pod {other.where()} "
            f"in the same domain {domain}"
        )
    return (
        f"{other.where()}: the required pod anti-affinity of running pod {holder.where()} matches it "
        f"in the same domain {domain}"
    )


def _repelled(world: _World, p: _Placed, excluded: Collection[str]) -> bool:
    """``p``'s terms match a pod in its domain, or another pod's term matches ``p``."""
    for term in p.pod.pod_anti_affinity:
        value = p.node.labels.get(term.topology_key)
        if value is not None and any(
            o.key not in excluded and world.rules.matches(term, o.pod)
            for o in world.in_domain(term.topology_key, value)
        ):
            return True
    return any(
        holder.key not in excluded and world.rules.matches(holder.pod.pod_anti_affinity[index], p.pod)
        for holder, index in world.rules.repellers.near(p) + world.repellers.near(p)
    )


# --- required affinity --------------------------------------------------------------------------


def _affinity_violations(world: _World) -> list[Violation]:
    """Batch pods with required pod affinity: keys on the node, and an admission order in which
    each has a provider in every domain when it comes, or is its group's one seed."""
    rules = world.rules
    groups = {rules.group(p.pod) for p in world.judged if p.pod.pod_affinity}
    out: list[Violation] = []
    members: dict[str, list[_Placed]] = {}
    for p in world.batch:
        if not p.pod.pod_affinity or rules.group(p.pod) not in groups:
            continue
        missing = sorted({t.topology_key for t in p.pod.pod_affinity} - p.node.labels.keys())
        if missing:
            if world.subject(p):
                text = f"{p.where()}: node has no label {missing[0]} (topologyKey of its required pod affinity)"
                out.append(Violation("affinity key", p.key, text, (p.node.name,)))
            continue
        members.setdefault(rules.group(p.pod), []).append(p)
    for group in members.values():
        for p, domain, problem in _unreached(world, group):
            if world.subject(p):
                text = f"{p.where()}: required pod affinity: no matching pod in its domain {domain} ({problem})"
                out.append(Violation("affinity", p.key, text, (p.node.name,)))
    return out


def _domains(p: _Placed) -> list[tuple[str, str]]:
    return [(t.topology_key, p.node.labels[t.topology_key]) for t in p.pod.pod_affinity]


def _has_outside_provider(world: _World, p: _Placed, key: str, value: str, group: Collection[str]) -> bool:
    """A placed pod outside ``p``'s group that matches all of ``p``'s terms is in that domain."""
    terms = p.pod.pod_affinity
    return any(q.key not in group and world.rules.matches_all(terms, q.pod) for q in world.in_domain(key, value))


def _reach(world: _World, group: Sequence[_Placed], seed: _Placed | None) -> set[str]:
    """The group's pods admitted in some order, starting from ``seed`` (None: no seed): a pod comes
    once each of its domains holds a pod outside the group matching its terms or one of the
    group's pods already admitted (the group's pods match each other's terms exactly when they
    match their own)."""
    keys = {p.key for p in group}
    terms = group[0].pod.pod_affinity
    reached: set[str] = set()
    at: dict[tuple[str, str], int] = {}  # admitted group pods that match the terms, per domain

    def admit(p: _Placed) -> None:
        reached.add(p.key)
        if world.rules.matches_all(terms, p.pod):
            for d in _domains(p):
                at[d] = at.get(d, 0) + 1

    if seed is not None:
        admit(seed)
    changed = True
    while changed:
        changed = False
        for p in group:
            if p.key not in reached and all(
                at.get(d, 0) > 0 or _has_outside_provider(world, p, *d, keys) for d in _domains(p)
            ):
                admit(p)
                changed = True
    return reached


def _unreached(world: _World, group: Sequence[_Placed]) -> list[tuple[_Placed, str, str]]:
    """The group's pods no admission order admits, with a domain lacking a provider and why."""
    rules = world.rules
    head = group[0].pod
    best = _reach(world, group, None)
    if not rules.seed_blocked(head) and len(best) < len(group):
        seen: set[tuple[tuple[str, str], ...]] = set()
        for s in group:  # a seed matches its own terms; seeds in the same domains are alike
            signature = tuple(_domains(s))
            if s.key in best or signature in seen or not rules.matches_all(head.pod_affinity, s.pod):
                continue
            seen.add(signature)
            reached = _reach(world, group, s)
            if len(reached) > len(best):
                best = reached
            if len(best) == len(group):
                break
    out = []
    for p in group:
        if p.key in best:
            continue
        key, value = next(
            ((k, v) for k, v in _domains(p) if not _has_outside_provider(world, p, k, v, set())), _domains(p)[0]
        )
        if rules.seed_blocked(p.pod):
            why = "a running pod matches its terms, so it is not the first pod of its group"
        elif not rules.matches_all(p.pod.pod_affinity, p.pod):
            why = "it does not match its own terms, so it cannot be the first pod of its group"
        else:
            why = "only one pod of its self-affine group may start a domain, and no order reaches it from there"
        out.append((p, f"{key}={value}", why))
    return out


def _no_provider(world: _World, p: _Placed, excluded: Collection[str]) -> bool:
    """``p`` lacks an affinity key on its node, or a provider in a domain while it may not seed one."""
    terms = p.pod.pod_affinity
    if not terms:
        return False
    if any(t.topology_key not in p.node.labels for t in terms):
        return True
    lacking = any(
        not any(
            q.key not in excluded and world.rules.matches_all(terms, q.pod)
            for q in world.in_domain(t.topology_key, p.node.labels[t.topology_key])
        )
        for t in terms
    )
    return lacking and (world.rules.seed_blocked(p.pod) or not world.rules.matches_all(terms, p.pod))


# --- topology spread ----------------------------------------------------------------------------


def _spread_violations(world: _World) -> list[Violation]:
    """Batch pods' DoNotSchedule constraints: keys on the node, skew of the pod's domain."""
    out: list[Violation] = []
    for p in world.judged:
        hard = _hard_spread(p.pod)
        if not hard:
            continue
        missing = sorted({c.topology_key for _, c in hard} - p.node.labels.keys())
        if missing:
            text = f"{p.where()}: node has no label {missing[0]} (topologyKey of its topology spread constraint)"
            out.append(Violation("spread key", p.key, text, (p.node.name,)))
            continue
        for index, _ in hard:
            problem = _skew_problem(world, p, index)
            if problem:
                out.append(Violation("topology-spread", p.key, f"{p.where()}: {problem}", (p.node.name, index)))
    return out


def _skewed(world: _World, p: _Placed, excluded: Collection[str]) -> bool:
    """``p`` lacks a spread key on its node, or its domain's skew exceeds a constraint's."""
    hard = _hard_spread(p.pod)
    if any(c.topology_key not in p.node.labels for _, c in hard):
        return True
    for index, c in hard:
        counts = dict(world.spread_counts(p, index))
        eligible = world.rules.eligible(p.pod, index)
        moved = [(e, -1) for k in excluded if (e := world.by_key.get(k)) is not None] + [(p, 1)]
        for e, step in moved:
            value = e.node.labels.get(c.topology_key)
            if value is not None and e.node.name in eligible and _counts(c, p.pod, e.pod):
                counts[value] += step
        if _skew_problem(world, p, index, counts):
            return True
    return False


def _skew_problem(world: _World, p: _Placed, index: int, counts: Mapping[str, int] | None = None) -> str | None:
    """``count(domain of p) - min > max_skew``, as a reason (None: within the skew); ``counts``:
    the constraint's counts when not the world's."""
    constraint = p.pod.spread[index]
    counts = world.spread_counts(p, index) if counts is None else counts
    if not counts:
        return None  # no eligible node: no domain to compare with
    key = constraint.topology_key
    value = p.node.labels[key]
    count = counts.get(value, 0)
    if p.node.name not in world.rules.eligible(p.pod, index) and _counts(constraint, p.pod, p.pod):
        count += 1  # the pod counts itself even on a node the constraint does not count
    few = constraint.min_domains is not None and len(counts) < constraint.min_domains
    low = 0 if few else min(counts.values())
    if count - low <= constraint.max_skew:
        return None
    floor = f"minimum 0 (fewer than minDomains {constraint.min_domains})" if few else f"minimum {low}"
    return (
        f"topology spread on {key} (maxSkew {constraint.max_skew}) violated: {count} matching pods in "
        f"{key}={value}, {floor} over {len(counts)} domain(s)"
    )


# --- which nodes a spread constraint counts, and the state of one answer ---------------------


def spread_node_eligible(pod: Pod, constraint: SpreadConstraint, node: Node) -> bool:
    """Whether a DoNotSchedule spread constraint of the pod counts the node (docs/topology.md).

    The node carries every key of the pod's DoNotSchedule constraints; with
    ``node_affinity_policy`` Honor it matches the pod's nodeSelector and required node affinity;
    with ``node_taints_policy`` Honor the pod tolerates its NoSchedule/NoExecute taints (the node's
    own taints: cordon is not one).
    """
    keys = {c.topology_key for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"}
    if not keys <= node.labels.keys():
        return False
    if constraint.node_affinity_policy == "Honor" and not selector_matches(pod.node_selector, pod.required_terms, node):
        return False
    return constraint.node_taints_policy != "Honor" or first_untolerated(node.taints, pod.tolerations) is None


def topology_state(cluster: Cluster, running: Iterable[Pod], placed: Iterable[tuple[Pod, str]]) -> TopologyState:
    """The final state of the batch placements under the topology rules."""
    return TopologyState(TopologyRules(cluster, running, spread_node_eligible), placed)
