"""Kubernetes objects in the words kubectl prints them (``kubectl describe``, ``kubectl get``):
taints ``key=value:NoSchedule``, tolerations ``key:NoExecute op=Exists``, label selectors
``app=web,tier in (a,b),!legacy``, quantities ``500m`` and ``2Gi``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placer.models import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    SpreadConstraint,
    Taint,
    Toleration,
    format_quantity,
)

__all__ = [
    "affinity_term",
    "label_selector",
    "node_term",
    "node_terms",
    "quantities",
    "quantity",
    "spread_constraint",
    "taint",
    "toleration",
]


def quantity(resource: str, units: int) -> str:
    """An amount in scheduler units as kubectl shows a quantity (cpu ``500m``, memory ``2Gi``)."""
    return format_quantity(resource, units)


def quantities(amounts: Mapping[str, int]) -> str:
    """``cpu=500m, memory=2Gi``."""
    return ", ".join(f"{r}={quantity(r, v)}" for r, v in amounts.items())


def taint(t: Taint) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as ``kubectl describe node``."""
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def toleration(t: Toleration) -> str:
    """As ``kubectl describe pod`` lists it: ``key=value:Effect``, ``key:Effect op=Exists``, or
    ``op=Exists`` for a toleration of every taint."""
    text = t.key
    if t.operator == "Equal" and t.value:
        text += f"={t.value}"
    if t.effect:
        text += f":{t.effect}"
    if t.operator == "Exists":
        text = f"{text} op=Exists" if text else "op=Exists"
    return text


def _requirement(r: LabelSelectorRequirement | NodeSelectorRequirement) -> str:
    values = ",".join(r.values)
    match r.operator:
        case "In":
            return f"{r.key} in ({values})"
        case "NotIn":
            return f"{r.key} notin ({values})"
        case "Exists":
            return r.key
        case "DoesNotExist":
            return f"!{r.key}"
        case "Gt":
            return f"{r.key}>{values}"
        case _:
            return f"{r.key}<{values}"


def label_selector(selector: LabelSelector | None) -> str:
    """kubectl's form of a label selector; ``<none>`` for a selector that matches nothing."""
    if selector is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    parts += [_requirement(r) for r in selector.match_expressions]
    return ",".join(parts) or "<everything>"


def node_term(term: NodeSelectorTerm) -> str:
    """One required node affinity term (its requirements ANDed), in label-selector form."""
    parts = [_requirement(r) for r in term.match_expressions]
    parts += [f"metadata.name: {_requirement(r)}" for r in term.match_fields]
    return ",".join(parts) or "<nothing>"


def node_terms(terms: Sequence[NodeSelectorTerm]) -> str:
    """Terms ORed."""
    return " or ".join(f"({node_term(t)})" if len(terms) > 1 else node_term(t) for t in terms)


def spread_constraint(c: SpreadConstraint) -> str:
    """As ``kubectl describe pod``: ``zone:DoNotSchedule when max skew 1 is exceeded for selector app=web``."""
    return (
        f"{c.topology_key}:{c.when_unsatisfiable} when max skew {c.max_skew} is exceeded "
        f"for selector {label_selector(c.selector)}"
    )


def affinity_term(term: PodAffinityTerm) -> str:
    """``app=db in namespace default, per kubernetes.io/hostname``."""
    where = f"namespaces {','.join(term.namespaces)}" if term.namespaces else ""
    if term.namespace_selector is not None:
        where = f"{where} and " if where else ""
        where += f"namespaces {label_selector(term.namespace_selector)}"
    return f"{label_selector(term.selector)} in {where or 'every namespace'}, per {term.topology_key}"
