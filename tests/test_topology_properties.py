"""Property tests of inter-pod affinity, anti-affinity and topology spread (docs/topology.md).

Small random clusters: 2-6 nodes in 1-3 zones (hostname labels; now and then a node without a
zone), running pods with app labels, some with required anti-affinity; batches of 1-8 pods of a
few apps, each app with one or two of: required zone/hostname anti-affinity to its own or another
app, required affinity (to a running app, to another app of the batch, to itself), DoNotSchedule
zone spread (maxSkew 1-2, with and without minDomains), ScheduleAnyway spread, preferred
anti-affinity. Replicas of an app now and then differ in their requests (another engine group
with the same rules). A third of the clusters are crowded with low-key jobs no rule looks at, so
that the global plan has pods it may preempt.

a. every answer of placer (global plan included) passes the independent validator, and without
   evictions an order exists in which kube-scheduler's filters admit each placed pod with the
   earlier ones counted as running (the definition docs/topology.md starts from, checked here by
   ``admission_order``, which shares only label matching with the validator);
b. placer places, per priority key from the highest down, at least what the kube-scheduler
   simulation (``policy="default"``) places, when the simulation's answer keeps every rule;
c. brute force (<= 4 pods, <= 4 nodes): over every assignment that ``hard_violations`` accepts and
   an admission order allows, placer places as many pods per key as the best.

Where these are no guarantee, the example is exempted and counted with ``event`` (see
``--hypothesis-show-statistics``); every exemption has a strict xfail test at the end, with the
exact input, that turns red once the cause is fixed:

- the provider restriction documented in docs/topology.md ("Required affinity": batch pods with
  required affinity of their own are no providers; the first pod of a self-affine group has only
  its group as providers): (a) skips the maximality of the pods it restricts, (b) does not
  compare, (c) checks <= only (``restricted_pods``);
- (c) counts only assignments an admission order allows as well (the validator's spread rule is
  stricter than an order needs where a counted pod lacks the constraint: docs/topology.md).

Examples are derandomised (docs/architecture.md, Determinism); ``PLACER_TOPOLOGY_EXAMPLES=N`` runs more,
``PLACER_PROPERTY_RANDOM=1`` explores new ones.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from builders import HOSTNAME, ZONE, inter_pod, node, one_in, pod, pod_term, property_settings, spread
from hypothesis import event, given, note
from hypothesis import strategies as st

from placer import validate
from placer.inputs import parse_cluster
from placer.models import Cluster, Config, Node, Pod, PodAffinityTerm
from placer.service import SolveOptions, solve_cluster
from placer.validate import label_selector_matches, term_matches_pod

Json = dict[str, Any]
Policy = Literal["placer", "default"]

PROPERTY = property_settings("PLACER_TOPOLOGY_EXAMPLES", 60)

ZONES = ["a", "b", "c"]
NODE_NAMES = [f"n{i}" for i in range(6)]
RUNNING_APPS = ["web", "db", "cache"]
BATCH_APPS = ["web", "api", "job"]  # "web" also runs: spread and anti-affinity see running pods
ALL_APPS = sorted({*RUNNING_APPS, *BATCH_APPS})
RULES = [
    "anti-own",
    "anti-other",
    "affinity-running",
    "affinity-batch",
    "affinity-self",
    "spread",
    "spread-soft",
    "anti-preferred",
]
REPLICA_SETS = [{"name": f"rs-{app}"} for app in ALL_APPS]


# --- the vocabulary of random clusters ---------------------------------------------------------


@st.composite
def node_docs(draw: st.DrawFn, index: int, zones: int) -> Json:
    name = NODE_NAMES[index]
    labels = {HOSTNAME: name}
    if not one_in(8, draw):
        labels[ZONE] = ZONES[draw(st.integers(0, zones - 1))]
    return node(name, cpu=draw(st.sampled_from([1, 2, 2, 3, 4])), labels=labels)


@st.composite
def running_docs(draw: st.DrawFn, index: int, nodes: int) -> Json:
    app = draw(st.sampled_from([*RUNNING_APPS, "web"]))
    affinity = None
    if one_in(3, draw):
        target = draw(st.sampled_from(ALL_APPS))
        affinity = inter_pod(anti=[pod_term({"app": target}, draw(st.sampled_from([ZONE, HOSTNAME])))])
    doc = pod(
        f"r{index}",
        node=NODE_NAMES[draw(st.integers(0, nodes - 1))],
        cpu=draw(st.sampled_from(["500m", "1"])),
        priority=draw(st.sampled_from([0, 0, 1])),
        labels={"app": app},
        affinity=affinity,
    )
    if one_in(2, draw):  # a ReplicaSet pod of placer: the global plan may move it
        doc["owner"] = {"kind": "ReplicaSet", "name": f"rs-{app}"}
    return doc


def _rule(draw: st.DrawFn, rule: str, app: str, apps: Sequence[str]) -> tuple[Json, list[Json]]:
    """(inter-pod affinity, spread constraints) of one rule of ``app``; ``apps``: the batch's apps."""
    key = draw(st.sampled_from([ZONE, ZONE, HOSTNAME]))
    if rule == "anti-own":
        return inter_pod(anti=[pod_term({"app": app}, key)]), []
    if rule == "anti-other":
        target = draw(st.sampled_from([a for a in ALL_APPS if a != app]))
        return inter_pod(anti=[pod_term({"app": target}, key)]), []
    if rule == "affinity-running":
        return inter_pod(affinity=[pod_term({"app": draw(st.sampled_from(RUNNING_APPS))}, key)]), []
    if rule == "affinity-batch":
        others = [a for a in apps if a != app] or [a for a in BATCH_APPS if a != app]
        return inter_pod(affinity=[pod_term({"app": draw(st.sampled_from(others))}, key)]), []
    if rule == "affinity-self":
        return inter_pod(affinity=[pod_term({"app": app}, key)]), []
    if rule == "anti-preferred":
        target = draw(st.sampled_from(ALL_APPS))
        return inter_pod(preferred_anti=[(draw(st.integers(1, 100)), pod_term({"app": target}, key))]), []
    key = HOSTNAME if one_in(4, draw) else ZONE
    if rule == "spread-soft":
        return {}, [spread({"app": app}, key, max_skew=draw(st.integers(1, 2)), when="ScheduleAnyway")]
    min_domains = draw(st.sampled_from([None, None, 2, 3, 4]))
    return {}, [spread({"app": app}, key, max_skew=draw(st.integers(1, 2)), min_domains=min_domains)]


def _merge(affinities: Iterable[Json]) -> Json:
    """Inter-pod affinity objects merged (their term lists concatenated)."""
    out: Json = {}
    for affinity in affinities:
        for kind, body in affinity.items():
            for when, terms in body.items():
                out.setdefault(kind, {}).setdefault(when, []).extend(terms)
    return out


@st.composite
def batch_docs(draw: st.DrawFn, max_pending: int) -> list[Json]:
    apps = draw(st.lists(st.sampled_from(BATCH_APPS), min_size=1, max_size=3, unique=True))
    out: list[Json] = []
    for app in apps:
        rules = draw(st.lists(st.sampled_from(RULES), min_size=0 if one_in(5, draw) else 1, max_size=2, unique=True))
        drawn = [_rule(draw, rule, app, apps) for rule in rules]
        affinity = _merge(a for a, _ in drawn)
        constraints = [c for _, s in drawn for c in s]
        cpu = draw(st.sampled_from(["500m", "1", "1", "2"]))
        priority = draw(st.sampled_from([0, 1, 1, 2]))
        for _ in range(draw(st.integers(1, 3))):
            i = len(out)
            if i == max_pending:
                break
            # Now and then a replica with other requests: another engine group with the same rules.
            variant = draw(st.sampled_from(["500m", "1", "1500m"])) if out and one_in(5, draw) else cpu
            out.append(
                pod(
                    f"{app}-{i}",
                    cpu=variant,
                    priority=priority,
                    labels={"app": app},
                    affinity=affinity,
                    topology_spread=constraints,
                    created=f"2024-01-01T00:00:{i:02d}Z",
                )
            )
    return out


@st.composite
def clusters(draw: st.DrawFn, max_nodes: int = 6, max_pending: int = 8) -> str:
    """A native-schema cluster document (JSON text)."""
    n = draw(st.integers(2, max_nodes))
    zones = draw(st.integers(1, 3))
    nodes = [draw(node_docs(i, zones)) for i in range(n)]
    running = _fitting(nodes, [draw(running_docs(i, n)) for i in range(draw(st.integers(0, 4)))])
    if one_in(3, draw):
        # A crowded cluster: low-key jobs no rule looks at fill some nodes; the global plan may preempt them.
        free = {doc["name"]: _milli(doc["allocatable"]["cpu"]) for doc in nodes}
        for doc in running:
            free[doc["node"]] -= _milli(doc["requests"]["cpu"])
        running += [
            pod(f"job{i}", node=name, cpu=f"{room}m", restart="Never", labels={"app": "job-run"})
            for i, (name, room) in enumerate(free.items())
            if room > 0 and draw(st.booleans())
        ]
    pending = draw(batch_docs(max_pending))
    return json.dumps({"nodes": nodes, "pods": running + pending, "replicaSets": REPLICA_SETS}, indent=1)


def _milli(cpu: str | int) -> int:
    text = str(cpu)
    return int(text[:-1]) if text.endswith("m") else int(text) * 1000


def _fitting(nodes: Sequence[Json], running: Sequence[Json]) -> list[Json]:
    """The running pods that fit their node's cpu in turn (the others are left out): a consistent dump."""
    free = {doc["name"]: _milli(doc["allocatable"]["cpu"]) for doc in nodes}
    out = []
    for doc in running:
        need = _milli(doc["requests"]["cpu"])
        if need <= free[doc["node"]]:
            free[doc["node"]] -= need
            out.append(doc)
    return out


# --- helpers -----------------------------------------------------------------------------------


def config(strategy: str = "balance") -> Config:
    """The engine, deterministic: one worker, fixed seed, deterministic time limit."""
    return Config.model_validate(
        {"strategy": strategy, "solver": {"workers": 1, "deterministic": True, "timeLimit": 5, "seed": 0}}
    )


def solve(cluster: Cluster, policy: Policy = "placer") -> dict[str, str]:
    """Placements of the batch by a policy, without a global plan (no running pod is evicted)."""
    result = solve_cluster(cluster, SolveOptions(policy=policy, config=config(), evict=False)).result
    assert not result.evictions
    return {p.pod: p.node for p in result.placements if p.pod is not None}


def per_key_vector(cluster: Cluster, placed: Iterable[str]) -> list[int]:
    """Placed pods per key of the batch, from the highest key down."""
    key_of = {p.key: validate.pod_key(p) for p in validate.batch_pods(cluster)}
    counts = Counter(key_of[k] for k in placed)
    return [counts[k] for k in sorted(set(key_of.values()), reverse=True)]


def _replicas(p: Pod, q: Pod) -> bool:
    """Identical but for name and creation: one group of the engine."""
    return p.model_copy(update={"name": q.name, "creation": q.creation, "uid": q.uid}) == q


def _matches_all(terms: Sequence[PodAffinityTerm], pod: Pod, cluster: Cluster) -> bool:
    return all(term_matches_pod(t, pod, cluster.namespaces) for t in terms)


def _seed_groups(cluster: Cluster) -> dict[str, list[Pod]]:
    """Batch pods that may be the first pod of a self-affine group (they match their own required
    affinity terms and no running pod on a node with one of the keys matches them all), by group:
    namespace and terms, as docs/topology.md defines it."""
    nodes = {n.name: n for n in cluster.nodes}
    running = [p for p in validate.running_pods(cluster) if p.node_name in nodes]
    out: dict[str, list[Pod]] = {}
    for p in validate.batch_pods(cluster):
        keys = {t.topology_key for t in p.pod_affinity}
        if not keys or not _matches_all(p.pod_affinity, p, cluster):
            continue
        if any(
            keys & nodes[r.node_name or ""].labels.keys() and _matches_all(p.pod_affinity, r, cluster) for r in running
        ):
            continue
        group = json.dumps([p.namespace, [t.model_dump(mode="json") for t in p.pod_affinity]], sort_keys=True)
        out.setdefault(group, []).append(p)
    return out


def restricted_pods(cluster: Cluster) -> dict[str, str]:
    """The batch pods the engine's provider restriction (docs/topology.md, "Required affinity") may
    cost, with why: a pod with required affinity whose terms another batch pod (no replica of it)
    matches that the engine may not take as provider: one with required affinity of its own that
    other batch pods could satisfy (the engine orders such groups and uses only earlier ones), or,
    for the first pod of a self-affine group with several terms, any pod outside that group."""
    batch = validate.batch_pods(cluster)
    group_of = {p.key: group for group, pods in _seed_groups(cluster).items() for p in pods}
    out: dict[str, str] = {}

    def ordered(q: Pod) -> bool:  # the engine gives q a rule of its own: batch pods may satisfy it
        return any(r.key != q.key and not _replicas(q, r) and _matches_all(q.pod_affinity, r, cluster) for r in batch)

    for p in batch:
        if not p.pod_affinity:
            continue
        others = [
            q for q in batch if q.key != p.key and not _replicas(p, q) and _matches_all(p.pod_affinity, q, cluster)
        ]
        outside = [q for q in others if p.key not in group_of or group_of.get(q.key) != group_of[p.key]]
        if p.key in group_of and outside and (len(p.pod_affinity) > 1 or any(q.pod_affinity for q in outside)):
            out[p.key] = f"first pod of self-affine {p.key}: {outside[0].key}, outside its group, matches its terms"
        elif ordered_ := [q for q in outside if q.pod_affinity and q.key not in group_of and ordered(q)]:
            out[p.key] = f"{p.key}: provider {ordered_[0].key} has required affinity batch pods could satisfy"
    return out


# --- the definition: admissible one pod at a time ------------------------------------------------


def _domain(node: Node, key: str) -> str | None:
    return node.labels.get(key)


def admits(cluster: Cluster, placed: Sequence[tuple[Pod, Node]], pod: Pod, node: Node) -> bool:
    """kube-scheduler's filters InterPodAffinity and PodTopologySpread (DoNotSchedule) for ``pod``
    on ``node`` with ``placed`` (running pods and earlier batch pods) on the cluster; written from
    the plugins' behaviour, sharing only term/selector matching with the validator."""
    ns = cluster.namespaces
    for term in pod.pod_anti_affinity:  # the incoming pod's anti-affinity
        value = _domain(node, term.topology_key)
        if value is not None and any(
            _domain(n, term.topology_key) == value and term_matches_pod(term, q, ns) for q, n in placed
        ):
            return False
    for q, n in placed:  # existing pods' anti-affinity
        for term in q.pod_anti_affinity:
            value = _domain(n, term.topology_key)
            if value is not None and _domain(node, term.topology_key) == value and term_matches_pod(term, pod, ns):
                return False
    terms = pod.pod_affinity
    if terms:
        if any(_domain(node, t.topology_key) is None for t in terms):
            return False
        matching = [(q, n) for q, n in placed if _matches_all(terms, q, cluster)]
        if not all(
            any(_domain(n, t.topology_key) == _domain(node, t.topology_key) for _, n in matching) for t in terms
        ):
            keyed = any(_domain(n, t.topology_key) is not None for _, n in matching for t in terms)
            if keyed or not _matches_all(terms, pod, cluster):
                return False  # not the first pod of a self-affine group
    hard = [c for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"]
    if any(_domain(node, c.topology_key) is None for c in hard):
        return False
    for c in hard:
        eligible = [n for n in cluster.nodes if validate.spread_node_eligible(pod, c, n)]
        counts = {v: 0 for n in eligible if (v := _domain(n, c.topology_key)) is not None}
        names = {n.name for n in eligible}
        for q, n in placed:
            if (
                n.name in names
                and not q.terminating
                and q.namespace == pod.namespace
                and label_selector_matches(c.selector, q.labels)
            ):
                counts[n.labels[c.topology_key]] += 1
        if not counts:
            continue
        low = 0 if c.min_domains is not None and len(counts) < c.min_domains else min(counts.values())
        self_match = 1 if label_selector_matches(c.selector, pod.labels) else 0
        if counts.get(node.labels[c.topology_key], 0) + self_match - low > c.max_skew:
            return False
    return True


def admission_order(cluster: Cluster, assignment: dict[str, str]) -> list[str] | None:
    """docs/topology.md's definition: an order of the placed batch pods in which each is admitted
    with the running pods and the earlier ones in place, or None (capacity is a final-state rule
    checked elsewhere). Depth-first over the sets of admitted pods, each failing set tried once."""
    nodes = {n.name: n for n in cluster.nodes}
    pods = {p.key: p for p in cluster.pods}
    running = [(p, nodes[p.node_name or ""]) for p in validate.running_pods(cluster) if p.node_name in nodes]
    batch = [(pods[k], nodes[n]) for k, n in sorted(assignment.items())]
    dead: set[frozenset[int]] = set()

    def search(done: frozenset[int], order: list[int]) -> list[int] | None:
        if len(done) == len(batch):
            return order
        if done in dead:
            return None
        placed = running + [batch[i] for i in order]
        for i, (p, n) in enumerate(batch):
            if i not in done and admits(cluster, placed, p, n):
                found = search(done | {i}, [*order, i])
                if found is not None:
                    return found
        dead.add(done)
        return None

    found = search(frozenset(), [])
    return None if found is None else [batch[i][0].key for i in found]


def brute_force(cluster: Cluster) -> tuple[list[int], dict[str, str], list[dict[str, str]]]:
    """Every assignment of the batch to nodes-or-unplaced that fits (the validator's capacity and
    eligibility functions) and that ``hard_violations`` accepts. Returns the best placed-per-key
    vector among those an admission order allows, a witness, and the accepted assignments that
    no order allows (which the validator should have refused)."""
    batch = sorted(validate.batch_pods(cluster), key=validate.pod_key, reverse=True)
    states = validate.final_states(cluster, [])
    options = [
        [
            s
            for s in states.values()
            if not validate.eligibility_problems(p, s.node, validate.affinity_binding(p, cluster.nodes))
        ]
        for p in batch
    ]
    best: list[int] = per_key_vector(cluster, [])
    witness: dict[str, str] = {}
    unordered: list[dict[str, str]] = []
    current: dict[str, str] = {}

    def leaf() -> None:
        nonlocal best, witness
        if validate.hard_violations(cluster, current):
            return
        if admission_order(cluster, current) is None:
            unordered.append(dict(current))
            return
        vector = per_key_vector(cluster, current)
        if vector > best:
            best, witness = vector, dict(current)

    def visit(i: int) -> None:
        if i == len(batch):
            leaf()
            return
        pod = batch[i]
        for state in options[i]:
            if state.room_problems(pod):
                continue
            state.add(pod, batch=True)
            current[pod.key] = state.node.name
            visit(i + 1)
            del current[pod.key]
            state.remove(pod)
        visit(i + 1)

    visit(0)
    return best, witness, unordered


# --- properties --------------------------------------------------------------------------------


@PROPERTY
@given(doc=clusters(), strategy=st.sampled_from(["balance", "balance", "spread", "pack"]))
def test_every_answer_passes_the_validator(doc: str, strategy: str) -> None:
    note(doc)
    cluster = parse_cluster("property", doc)
    result = solve_cluster(cluster, SolveOptions(config=config(strategy))).result  # the global plan included
    note(result.model_dump_json(by_alias=True, exclude={"metrics"}))
    event(f"global plan evicts: {bool(result.evictions)}")
    violations = validate.validate_plan(cluster, result)  # validate_placements when nothing is evicted
    restricted = restricted_pods(cluster)
    if restricted:
        note(str(restricted))
        missed = [v for v in violations if _maximality(v, restricted)]
        event(f"documented provider restriction: its pods' maximality not checked (missed: {bool(missed)})")
        violations = [v for v in violations if v not in missed]
    if not result.evictions:
        placements = {p.pod: p.node for p in result.placements if p.pod is not None}
        # The validator's "fits on node N" claims are backed by an admission order.
        assert not [v for v in violations if _refuted(cluster, placements, v)]
        # The definition itself, not only the validator's final-state reading of it.
        assert admission_order(cluster, placements) is not None
    assert violations == []


def _refuted(cluster: Cluster, placements: dict[str, str], violation: str) -> bool:
    """A "left unplaced although it fits on node N" claim that no admission order backs."""
    found = re.fullmatch(r"(\S+): left unplaced although it fits on node (\S+)", violation)
    if found is None:
        return False
    return admission_order(cluster, {**placements, found[1]: found[2]}) is None


def _maximality(violation: str, restricted: dict[str, str]) -> bool:
    """A maximality rule the restriction may break: a restricted pod left out although some
    answer could take it, or a plan not improving on an answer the engine cannot see."""
    left_out = any(violation.startswith(f"{key}: left unplaced although") for key in restricted)
    return left_out or violation.startswith("the plan does not strictly improve")


@PROPERTY
@given(doc=clusters())
def test_placer_places_at_least_what_the_simulation_places_per_key(doc: str) -> None:
    note(doc)
    cluster = parse_cluster("property", doc)
    default = solve(cluster, "default")
    note(f"simulation: {default}")
    if validate.hard_violations(cluster, default) or admission_order(cluster, default) is None:
        # The simulation ignored a rule here: not a kube-scheduler answer, so no bound for placer.
        event("simulation's answer breaks a rule: not compared")
        return
    restricted = restricted_pods(cluster)
    if restricted:
        event("documented provider restriction: not compared")
        note(str(restricted))
        return
    ours, theirs = per_key_vector(cluster, solve(cluster)), per_key_vector(cluster, default)
    note(f"placer {ours} vs simulation {theirs}")
    event("compared")
    assert ours >= theirs


@PROPERTY
@given(doc=clusters(max_nodes=4, max_pending=4))
def test_placer_places_as_many_as_the_best_valid_assignment(doc: str) -> None:
    note(doc)
    cluster = parse_cluster("property", doc)
    placements = solve(cluster)
    best, witness, unordered = brute_force(cluster)
    note(f"placer {placements} vs brute force {witness}")
    if unordered:
        # The validator's gap (test_validator_refuses_mutual_providers_without_an_anchor): no
        # admission order allows these, so they are no answers and do not count for the optimum.
        event("validator accepts assignments no order admits")
        note(f"accepted without an admission order: {unordered}")
    ours = per_key_vector(cluster, placements)
    assert admission_order(cluster, placements) is not None
    assert ours <= best  # placer's answer is valid and admissible, so the brute force met it
    restricted = restricted_pods(cluster)
    if restricted:
        event("documented provider restriction: <= only")
        note(str(restricted))
        return
    event("compared")
    assert ours == best


# --- counterexamples, as exact inputs --------------------------------------------------------------


def _zone_nodes(*zones_cpu: tuple[str, str, int]) -> list[Json]:
    return [node(name, cpu=cpu, labels={HOSTNAME: name, ZONE: zone}) for name, zone, cpu in zones_cpu]


def _affine(name: str, app: str, target: str, key: str = ZONE, cpu: str = "1", **extra: Any) -> Json:
    return pod(
        name, cpu=cpu, labels={"app": app}, affinity=inter_pod(affinity=[pod_term({"app": target}, key)]), **extra
    )


def _cluster(nodes: list[Json], pods: list[Json]) -> Cluster:
    return parse_cluster("counterexample", json.dumps({"nodes": nodes, "pods": pods}))


def test_self_affine_replicas_with_other_requests_start_one_domain() -> None:
    # Zones a and b, 2 cpu each; w1 (1500m) and w2 (1600m) both need a pod of app=w in their zone.
    # Whichever comes first starts a zone; the other must join it and does not fit: one placed.
    nodes = _zone_nodes(("a0", "a", 2), ("b0", "b", 2))
    c = _cluster(nodes, [_affine("w1", "w", "w", cpu="1500m"), _affine("w2", "w", "w", cpu="1600m")])
    placements = solve(c)
    assert admission_order(c, placements) is not None
    assert validate.validate_placements(c, placements) == []
    assert len(placements) == 1


def test_validator_refuses_mutual_providers_without_an_anchor() -> None:
    # r0 (app=web) runs on n0 with 500m free; web-0 and web-1 need a pod of app=web on their node.
    # Neither can go first to n1 (r0 matches, so neither is a first pod): only n0 takes one.
    nodes = [node(n, cpu=1, labels={HOSTNAME: n, ZONE: "a"}) for n in ("n0", "n1")]
    running = pod("r0", node="n0", cpu="500m", labels={"app": "web"})
    pods = [_affine(f"web-{i}", "web", "web", key=HOSTNAME, cpu="500m") for i in range(2)]
    c = _cluster(nodes, [running, *pods])
    both_on_n1 = {"default/web-0": "n1", "default/web-1": "n1"}
    assert admission_order(c, both_on_n1) is None  # the definition refuses it
    assert validate.hard_violations(c, both_on_n1) != []


def test_validator_finds_no_room_beside_two_unanchored_pods() -> None:
    # Three 2-cpu pods, each needing an app=web pod on its node: the first starts a node, the others
    # must join it. n2 (4 cpu) holds two; a third on n1 would need a web pod on n1, and none comes
    # first there. placer places two on n2, which is the optimum.
    nodes = [node("n1", cpu=2, labels={HOSTNAME: "n1"}), node("n2", cpu=4, labels={HOSTNAME: "n2"})]
    c = _cluster(nodes, [_affine(f"web-{i}", "web", "web", key=HOSTNAME, cpu="2") for i in (1, 2, 3)])
    two = {"default/web-1": "n2", "default/web-2": "n2"}
    three = {**two, "default/web-3": "n1"}
    assert admission_order(c, two) is not None
    assert admission_order(c, three) is None
    assert validate.validate_placements(c, two) == []


def test_affinity_on_a_key_no_node_carries_leaves_the_pod_pending() -> None:
    # No node has a zone: job's required zone affinity to app=web can hold nowhere, web runs.
    nodes = [node("n0", cpu=1, labels={HOSTNAME: "n0"})]
    c = _cluster(nodes, [pod("web", cpu="500m", labels={"app": "web"}), _affine("job", "job", "web", cpu="500m")])
    result = solve_cluster(c, SolveOptions(config=config())).result
    assert {p.pod: p.node for p in result.placements} == {"default/web": "n0"}
    assert [(u.pod, u.code) for u in result.unplaced] == [("default/job", "Unschedulable")]


def test_a_plan_preempts_for_a_pod_with_anti_affinity() -> None:
    # n0 (1 cpu) is full of a Never job (key (0, 1)); web (key (0, 3), 500m) has hostname
    # anti-affinity to its own app and nothing else blocks it: preempting the job places it.
    anti = inter_pod(anti=[pod_term({"app": "web"}, HOSTNAME)])
    pods = [pod("job", node="n0", cpu="1", restart="Never")]
    pods += [pod("web", cpu="500m", labels={"app": "web"}, affinity=anti)]
    c = _cluster([node("n0", cpu=1, labels={HOSTNAME: "n0"})], pods)
    result = solve_cluster(c, SolveOptions(config=config())).result
    assert [e.pod for e in result.evictions] == ["default/job"]
    assert {p.pod: p.node for p in result.placements} == {"default/web": "n0"}


def test_a_plan_gives_the_room_to_the_higher_key_pod_with_anti_affinity() -> None:
    # The same node; web (priority 1) and api (priority 0, no rule) both need the whole cpu. The
    # plan preempts the job and must give n0 to web, the higher key; today it gives it to api.
    anti = inter_pod(anti=[pod_term({"app": "web"}, HOSTNAME)])
    pods = [pod("job", node="n0", cpu="1", restart="Never")]
    pods += [pod("web", cpu="1", priority=1, labels={"app": "web"}, affinity=anti)]
    pods += [pod("api", cpu="1", labels={"app": "api"})]
    c = _cluster([node("n0", cpu=1, labels={HOSTNAME: "n0"})], pods)
    result = solve_cluster(c, SolveOptions(config=config())).result
    assert validate.validate_plan(c, result) == []
    assert {p.pod: p.node for p in result.placements} == {"default/web": "n0"}


def test_a_plan_places_every_pod_that_fits_after_it() -> None:
    # n1 (2 cpu) is full of a Never job; n2 and n3 have 1 cpu. api-1..3 (500m) want one per node,
    # big (1 cpu) has no rule. Without evictions two api pods take n2 and n3. Preempting the job
    # frees n1 for big and api-3 together: all four run.
    nodes = [node(n, cpu=cpu, labels={HOSTNAME: n}) for n, cpu in (("n1", 2), ("n2", 1), ("n3", 1))]
    anti = inter_pod(anti=[pod_term({"app": "api"}, HOSTNAME)])
    pods = [pod("job", node="n1", cpu="2", restart="Never"), pod("big", cpu="1", labels={"app": "big"})]
    pods += [pod(f"api-{i}", cpu="500m", labels={"app": "api"}, affinity=anti) for i in (1, 2, 3)]
    c = _cluster(nodes, pods)
    result = solve_cluster(c, SolveOptions(config=config())).result
    assert [e.pod for e in result.evictions] == ["default/job"]
    assert validate.validate_plan(c, result) == []
    assert len([p for p in result.placements if p.kind == "pending"]) == 4


def test_a_provider_with_its_own_affinity() -> None:
    # api-1 follows the running web pod r0 into zone a; web-0 follows api-1 there: an order admits
    # both (api-1 first), but the engine does not count api-1 as web-0's provider.
    nodes = [node(n, cpu=1, labels={HOSTNAME: n, ZONE: "a"}) for n in ("n0", "n1")]
    running = pod("r0", node="n0", cpu="500m", labels={"app": "web"})
    pods = [
        _affine("web-0", "web", "api", cpu="500m", created="2024-01-01T00:00:00Z"),
        _affine("api-1", "api", "web", cpu="500m", created="2024-01-01T00:00:01Z"),
    ]
    c = _cluster(nodes, [running, *pods])
    placements = solve(c)
    assert admission_order(c, placements) is not None
    assert len(placements) == 2


def test_a_self_affine_group_that_could_join_another_batch_pod() -> None:
    # x (app=w, no rule) and three w pods needing an app=w pod in their zone; 2 cpu per zone.
    # Order: w-1 starts zone b, w-2 joins it, x goes to a, w-0 joins x: all four run.
    nodes = _zone_nodes(("a0", "a", 2), ("b0", "b", 2))
    pods = [pod("x", cpu="1", labels={"app": "w"}), *(_affine(f"w-{i}", "w", "w") for i in range(3))]
    c = _cluster(nodes, pods)
    placements = solve(c)
    assert admission_order(c, placements) is not None
    assert len(placements) == 4


def test_the_restriction_counterexamples_have_better_answers() -> None:
    """The answers the two restriction tests above miss are valid and admissible (so those tests
    fail for the restriction, not for a wrong expectation)."""
    nodes = [node(n, cpu=1, labels={HOSTNAME: n, ZONE: "a"}) for n in ("n0", "n1")]
    running = pod("r0", node="n0", cpu="500m", labels={"app": "web"})
    chained = _cluster(
        nodes, [running, _affine("web-0", "web", "api", cpu="500m"), _affine("api-1", "api", "web", cpu="500m")]
    )
    both = {"default/web-0": "n1", "default/api-1": "n1"}
    assert admission_order(chained, both) == ["default/api-1", "default/web-0"]
    assert validate.validate_placements(chained, both) == []

    zones = _zone_nodes(("a0", "a", 2), ("b0", "b", 2))
    joined = _cluster(zones, [pod("x", cpu="1", labels={"app": "w"}), *(_affine(f"w-{i}", "w", "w") for i in range(3))])
    four = {"default/x": "a0", "default/w-0": "a0", "default/w-1": "b0", "default/w-2": "b0"}
    assert admission_order(joined, four) is not None
    assert validate.validate_placements(joined, four) == []
