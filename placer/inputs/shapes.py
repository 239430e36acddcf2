"""Parsers for the Kubernetes sub-shapes shared by both input formats."""

from __future__ import annotations

from placer.inputs.fields import Field
from placer.models import (
    HostPort,
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredTerm,
    Taint,
    Toleration,
)

__all__ = [
    "parse_host_ports",
    "parse_label_selector",
    "parse_node_affinity",
    "parse_taints",
    "parse_tolerations",
]

NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


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
    return NodeSelectorRequirement(key=key, operator=op, values=values)


def _term(f: Field) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=tuple(_requirement(r, fields=False) for r in f.get("matchExpressions").items()),
        match_fields=tuple(_requirement(r, fields=True) for r in f.get("matchFields").items()),
    )


def parse_node_affinity(
    affinity: Field,
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredTerm, ...]]:
    """(required terms or None when absent, preferred terms) of ``spec.affinity``."""
    node = affinity.get("nodeAffinity")
    req = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    required: tuple[NodeSelectorTerm, ...] | None = None
    if req.present():
        required = tuple(_term(t) for t in req.get("nodeSelectorTerms").items())
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
        out.append(Toleration(key=key, operator=op, value=t.get("value").text(), effect=effect))
    return tuple(out)


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
            if host_port <= 0:
                continue
            if host_port > 65535:
                raise p.get("hostPort").fail(f"port {host_port} out of range")
            proto = p.get("protocol").text("TCP") or "TCP"
            if proto not in ("TCP", "UDP", "SCTP"):
                raise p.get("protocol").fail(f"invalid protocol {proto!r}")
            ip = p.get("hostIP").text("0.0.0.0") or "0.0.0.0"
            ports.append(HostPort(port=host_port, protocol=proto, host_ip=ip))
    return tuple(ports)
