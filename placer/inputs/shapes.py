"""Parsers for the Kubernetes sub-shapes shared by both input formats."""

from __future__ import annotations

import functools
from typing import Any

from placer.inputs.fields import Field
from placer.models import (
    HostPort,
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    PreferredTerm,
    SpreadConstraint,
    Taint,
    Toleration,
    WeightedPodAffinityTerm,
)
from placer.models.integers import parse_int, shown

__all__ = [
    "parse_host_ports",
    "parse_label_selector",
    "parse_node_affinity",
    "parse_node_selector_terms",
    "parse_pod_affinity",
    "parse_spread",
    "parse_taints",
    "parse_tolerations",
]

NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _is_int64(text: str) -> bool:
    """What the API server accepts for Gt/Lt: a base-10 integer that fits in 64 bits."""
    return parse_int(text) is not None


def _requirement(f: Field, *, fields: bool) -> NodeSelectorRequirement:
    op = f.get("operator").required_str()
    if op not in NODE_OPERATORS:
        raise f.get("operator").fail(f"invalid operator {op!r} (one of {', '.join(NODE_OPERATORS)})")
    key = f.get("key").required_str()
    values = f.get("values").str_list()
    if fields and (key != "metadata.name" or op not in ("In", "NotIn")):
        raise f.fail("matchFields supports only metadata.name with In or NotIn")
    if op in ("In", "NotIn") and not values:
        raise f.get("values").fail(f"operator {op} needs at least one value")
    if op in ("Exists", "DoesNotExist") and values:
        raise f.get("values").fail(f"operator {op} takes no values")
    if op in ("Gt", "Lt") and len(values) != 1:
        raise f.get("values").fail(f"operator {op} needs exactly one value")
    if op in ("Gt", "Lt") and not _is_int64(values[0]):
        raise f.get("values").fail(f"operator {op} needs an integer value, got {shown(values[0])}")
    return NodeSelectorRequirement(key=key, operator=op, values=values)


def _term(f: Field) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=tuple(_requirement(r, fields=False) for r in f.get("matchExpressions").items()),
        match_fields=tuple(_requirement(r, fields=True) for r in f.get("matchFields").items()),
    )


def parse_node_selector_terms(f: Field) -> tuple[NodeSelectorTerm, ...]:
    """A list of node selector terms (ORed), as in a PersistentVolume's ``nodeAffinity.required``."""
    return tuple(_term(t) for t in f.items())


def parse_node_affinity(
    affinity: Field,
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredTerm, ...]]:
    """(required terms or None when absent, preferred terms) of ``spec.affinity``."""
    if not affinity.present():  # most pods: nothing below to read
        return None, ()
    node = affinity.get("nodeAffinity")
    req = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    required: tuple[NodeSelectorTerm, ...] | None = None
    if req.present():
        required = parse_node_selector_terms(req.get("nodeSelectorTerms"))
    preferred = []
    for p in node.get("preferredDuringSchedulingIgnoredDuringExecution").items():
        weight = p.get("weight").integer(0)
        if not 1 <= weight <= 100:
            raise p.get("weight").fail(f"weight must be 1-100, got {weight}")
        preferred.append(PreferredTerm(weight=weight, preference=_term(p.get("preference"))))
    return required, tuple(preferred)


def parse_taints(f: Field) -> tuple[Taint, ...]:
    taints = []
    for t in f.items():
        effect = t.get("effect").required_str()
        if effect not in EFFECTS:
            raise t.get("effect").fail(f"invalid taint effect {effect!r}")
        taints.append(Taint(key=t.get("key").required_str(), value=t.get("value").text(), effect=effect))
    return tuple(taints)


def parse_tolerations(f: Field) -> tuple[Toleration, ...]:
    out = []
    for t in f.items():
        op = t.get("operator").text("Equal") or "Equal"
        if op not in ("Exists", "Equal"):
            raise t.get("operator").fail(f"invalid toleration operator {op!r}")
        effect = t.get("effect").text()
        if effect and effect not in EFFECTS:
            raise t.get("effect").fail(f"invalid toleration effect {effect!r}")
        key = t.get("key").text()
        if not key and op != "Exists":
            raise t.fail("a toleration with an empty key must use operator Exists")
        out.append(_toleration(key, op, t.get("value").text(), effect))
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _toleration(key: str, operator: str, value: str, effect: str) -> Toleration:
    """One toleration model, shared by every pod that carries it (models are frozen): a dump's
    pods repeat the same few, and validating each anew was a tenth of reading a pod."""
    return Toleration.model_validate({"key": key, "operator": operator, "value": value, "effect": effect})


def parse_label_selector(f: Field) -> LabelSelector | None:
    if not f.present():
        return None
    exprs = []
    for r in f.get("matchExpressions").items():
        op = r.get("operator").required_str()
        if op not in SELECTOR_OPERATORS:
            raise r.get("operator").fail(f"invalid operator {op!r}")
        exprs.append(
            LabelSelectorRequirement(key=r.get("key").required_str(), operator=op, values=r.get("values").str_list())
        )
    return LabelSelector(match_labels=f.get("matchLabels").str_map(), match_expressions=tuple(exprs))


def parse_host_ports(containers: list[Field]) -> tuple[HostPort, ...]:
    ports = []
    for c in containers:
        for p in c.get("ports").items():
            host_port = p.get("hostPort").integer(0)
            if host_port == 0:  # none
                continue
            if not 0 < host_port <= 65535:
                raise p.get("hostPort").fail(f"port {host_port} out of range")
            proto = p.get("protocol").text("TCP") or "TCP"
            if proto not in ("TCP", "UDP", "SCTP"):
                raise p.get("protocol").fail(f"invalid protocol {proto!r}")
            ip = p.get("hostIP").text("0.0.0.0") or "0.0.0.0"
            ports.append(HostPort(port=host_port, protocol=proto, host_ip=ip))
    return tuple(ports)


def _with_label_keys(
    selector: LabelSelector | None, labels: dict[str, str], match: list[str], mismatch: list[str]
) -> LabelSelector | None:
    """The selector with matchLabelKeys (key In [own value]) and mismatchLabelKeys (key NotIn [own
    value]) merged in, as the API server does at admission; keys the pod lacks are ignored."""
    extra = [LabelSelectorRequirement(key=k, operator="In", values=(labels[k],)) for k in match if k in labels]
    extra += [LabelSelectorRequirement(key=k, operator="NotIn", values=(labels[k],)) for k in mismatch if k in labels]
    if selector is None or not extra:
        return selector
    merged = tuple(selector.match_expressions) + tuple(e for e in extra if e not in selector.match_expressions)
    return selector.model_copy(update={"match_expressions": merged})


def _pod_affinity_term(f: Field, namespace: str, labels: dict[str, str]) -> PodAffinityTerm:
    topology_key = f.get("topologyKey").text()
    if not topology_key:
        raise f.get("topologyKey").fail("topologyKey must be a non-empty label key")
    selector = parse_label_selector(f.get("labelSelector"))
    match, mismatch = f.get("matchLabelKeys").str_list(), f.get("mismatchLabelKeys").str_list()
    if (match or mismatch) and selector is None:
        raise f.get("matchLabelKeys").fail("matchLabelKeys/mismatchLabelKeys need a labelSelector")
    both = set(match) & set(mismatch)
    if both:
        raise f.get("mismatchLabelKeys").fail(
            f"key {sorted(both)[0]!r} is in both matchLabelKeys and mismatchLabelKeys"
        )
    namespaces = f.get("namespaces").str_list()
    ns_selector = parse_label_selector(f.get("namespaceSelector"))
    if not namespaces and ns_selector is None:
        namespaces = (namespace,)
    return PodAffinityTerm(
        selector=_with_label_keys(selector, labels, list(match), list(mismatch)),
        namespaces=tuple(namespaces),
        namespace_selector=ns_selector,
        topology_key=topology_key,
    )


def _weighted_terms(f: Field, namespace: str, labels: dict[str, str]) -> tuple[WeightedPodAffinityTerm, ...]:
    out = []
    for w in f.items():
        weight = w.get("weight").integer(0)
        if not 1 <= weight <= 100:
            raise w.get("weight").fail(f"weight must be 1-100, got {weight}")
        term = _pod_affinity_term(w.get("podAffinityTerm"), namespace, labels)
        out.append(WeightedPodAffinityTerm(weight=weight, term=term))
    return tuple(out)


def parse_pod_affinity(affinity: Field, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """Pod fields for ``spec.affinity.podAffinity`` and ``podAntiAffinity`` (required and preferred)."""
    out: dict[str, Any] = {}
    for kind, name in (("podAffinity", "pod_affinity"), ("podAntiAffinity", "pod_anti_affinity")):
        if not affinity.present():  # most pods: every term absent
            out[name] = out[f"{name}_preferred"] = ()
            continue
        f = affinity.get(kind)
        required = f.get("requiredDuringSchedulingIgnoredDuringExecution")
        out[name] = tuple(_pod_affinity_term(t, namespace, labels) for t in required.items())
        preferred = f.get("preferredDuringSchedulingIgnoredDuringExecution")
        out[f"{name}_preferred"] = _weighted_terms(preferred, namespace, labels)
    return out


def parse_spread(f: Field, labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    """``spec.topologySpreadConstraints``; matchLabelKeys merged into the selector."""
    out = []
    for c in f.items():
        skew = c.get("maxSkew").integer(0)
        if skew < 1:
            raise c.get("maxSkew").fail(f"maxSkew must be at least 1, got {skew}")
        key = c.get("topologyKey").text()
        if not key:
            raise c.get("topologyKey").fail("topologyKey must be a non-empty label key")
        when = c.get("whenUnsatisfiable").text()
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise c.get("whenUnsatisfiable").fail(
                f"whenUnsatisfiable must be DoNotSchedule or ScheduleAnyway, got {when!r}"
            )
        min_domains = None
        if c.get("minDomains").present():
            min_domains = c.get("minDomains").integer(0)
            if min_domains < 1:
                raise c.get("minDomains").fail(f"minDomains must be at least 1, got {min_domains}")
            if when != "DoNotSchedule":
                raise c.get("minDomains").fail("minDomains can only be set with whenUnsatisfiable DoNotSchedule")
        policies = {}
        for field, default, name in (
            ("nodeAffinityPolicy", "Honor", "node_affinity_policy"),
            ("nodeTaintsPolicy", "Ignore", "node_taints_policy"),
        ):
            value = c.get(field).text(default) or default
            if value not in ("Honor", "Ignore"):
                raise c.get(field).fail(f"{field} must be Honor or Ignore, got {value!r}")
            policies[name] = value
        selector = parse_label_selector(c.get("labelSelector"))
        match = list(c.get("matchLabelKeys").str_list())
        if match and selector is None:
            raise c.get("matchLabelKeys").fail("matchLabelKeys needs a labelSelector")
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=key,
                when_unsatisfiable=when,
                selector=_with_label_keys(selector, labels, match, []),
                min_domains=min_domains,
                **policies,
            )
        )
    return tuple(out)
