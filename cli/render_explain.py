"""Text rendering of ``placer explain`` (and ``placer solve --explain``) with rich: the pod's
constraints as kubectl describes them, the filters, the candidate nodes with the rule that kept
the pod off each cheaper one, the decision with its plan step, and for a pending workload group
what each topology domain lacked."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from placer.cli import kubectl
from placer.explain import DomainTry, Explanation, PodSpec, Rule, Why
from placer.models import Filter, Insufficient, Reason, Rejected, Step, Untolerated, label

__all__ = ["render_explanations"]

_MAX_DOMAINS = 20  # domain rows shown (the rest: -o json)
_MAX_PODS = 3  # pods named per "the answer put ... here"


def render_explanations(console: Console, stories: Sequence[Explanation]) -> None:
    for i, story in enumerate(stories):
        if i:
            console.print()
        _render(console, story)


def _render(console: Console, story: Explanation) -> None:
    console.print(f"[bold]{story.pod}[/]")
    if story.spec is not None:
        for name, value in _spec_lines(story.spec):
            console.print(f"  {name}: {value}", highlight=False, markup=False)
    if not story.in_batch:
        console.print(story.note)
        if story.evicted is not None:
            e = story.evicted
            what = f"moves it to {e.to}" if e.kind == "move" else "preempts it"
            console.print(f"The answer {what}, for {', '.join(e.for_) or '-'}: {e.reason}", highlight=False)
        _render_plan(console, story)
        return
    if story.filters is not None and story.filters.filters:
        console.print(_filters_table(story.filters, f"Filters (kube-scheduler's order) on {story.filters.nodes} nodes"))
    console.print(f"Nodes that pass every filter with room now: {story.feasible}. {story.note}.")
    if story.candidates:
        table = Table(title="Candidate nodes, cheapest first (why not: what kept the pod off it in the answer)")
        for col in ("node", "cost", "left free after it", "chosen", "why not"):
            table.add_column(col, overflow="fold")
        for c in story.candidates:
            left = ", ".join(f"{r.replace('placer.io/', '')} {100 * v:.0f}%" for r, v in c.free_after.items())
            chosen = ("yes" if c.fits_before else "yes (room made by the plan)") if c.chosen else ""
            table.add_row(c.node, f"{c.cost:.4f}", left, chosen, "; ".join(_why(w, story) for w in c.why_not))
        console.print(table)
    decided = _decided_by(story)
    if decided:
        console.print(f"Decided by: {decided}.", highlight=False)
    if story.node is not None:
        console.print(f"Decision: placed on [bold]{story.node}[/].")
    else:
        console.print(f"Decision: stays pending ({story.unplaced_code}): {story.unplaced_reason}")
    _render_plan(console, story)
    for e in story.evictions:
        console.print(f"For it: {e.pod} on {e.node} is {'moved' if e.kind == 'move' else 'preempted'}: {e.reason}")
    if story.domains:
        console.print(_domains_table(story.domains))


def _step(s: Step) -> str:
    return f"{s.id} {s.op} {s.pod or f'the replacement of {s.replaces}'} on {s.node}"


def _render_plan(console: Console, story: Explanation) -> None:
    """Its steps in the plan, and the other steps they wait for."""
    if story.plan:
        waits = ", ".join(_step(s) for s in story.waits_for)
        console.print(
            f"Plan: steps {'; '.join(_step(s) for s in story.plan)}"
            + (f"; once these are done: {waits}" if waits else "; waiting for no other step"),
            highlight=False,
        )


def _spec_lines(spec: PodSpec) -> list[tuple[str, str]]:
    """The pod's constraints as ``kubectl describe pod`` words them (only those it has)."""
    lines = [("Requests", kubectl.quantities(spec.requests) or "<none>")]
    if spec.priority:
        lines.append(("Priority", str(spec.priority)))
    if spec.node_selector:
        lines.append(("Node-Selectors", ",".join(f"{k}={v}" for k, v in sorted(spec.node_selector.items()))))
    if spec.required_terms:
        lines.append(("Node affinity (required)", kubectl.node_terms(spec.required_terms)))
    if spec.tolerations:
        lines.append(("Tolerations", ", ".join(kubectl.toleration(t) for t in spec.tolerations)))
    if spec.spread:
        lines.append(("Topology Spread Constraints", "; ".join(kubectl.spread_constraint(c) for c in spec.spread)))
    if spec.pod_affinity:
        lines.append(("Pod affinity (required)", "; ".join(kubectl.affinity_term(t) for t in spec.pod_affinity)))
    if spec.pod_anti_affinity:
        terms = "; ".join(kubectl.affinity_term(t) for t in spec.pod_anti_affinity)
        lines.append(("Pod anti-affinity (required)", terms))
    if spec.gang:
        lines.append(("Gang", spec.gang))
    for d in spec.group_domains:
        lines.append(("Held in one domain of", f"{d.key} ({d.group})"))
    return lines


def _filter_detail(entry: Rejected | Untolerated | Insufficient) -> str:
    if isinstance(entry, Untolerated):
        return f"untolerated taint {kubectl.taint(entry.taint)}"
    if isinstance(entry, Insufficient):
        r = entry.resource
        return f"requests {kubectl.quantity(r, entry.requested)}, most free {kubectl.quantity(r, entry.most_free)}"
    return label(entry)


def _filters_table(reason: Reason, title: str) -> Table:
    table = Table(title=title)
    table.add_column("filter")
    table.add_column("nodes turned away", justify="right")
    table.add_column("detail", overflow="fold")
    for f in reason.filters:
        what = f"{f.filter} {f.resource}" if isinstance(f, Insufficient) else str(f.filter)
        table.add_row(what, str(f.nodes), _filter_detail(f))
    return table


def _pods(keys: Sequence[str]) -> str:
    more = f" and {len(keys) - _MAX_PODS} more" if len(keys) > _MAX_PODS else ""
    return ", ".join(keys[:_MAX_PODS]) + more


def _why(w: Why, story: Explanation) -> str:
    """One rule that kept the pod off a node, in words."""
    chosen = story.node or "-"
    match w.rule:
        case Rule.GANG_DOMAIN:
            here = f"this node's is {w.here}" if w.here is not None else "this node lacks the label"
            return f"gang domain: {w.group} sits whole in {w.key}={w.domain}; {here}"
        case Rule.GANG:
            return "gang: room for this pod alone, not for its whole gang"
        case Rule.ROOM:
            short = ", ".join(f"{r} {kubectl.quantity(r, v)}" for r, v in w.short.items())
            by = f"; the answer put {_pods(w.taken_by)} here" if w.taken_by else ""
            return f"room: short of {short} in the answer{by}"
        case Rule.PORTS:
            return "host port: " + (f"held by {_pods(w.taken_by)}" if w.taken_by else "held by a pod there")
        case Rule.TOPOLOGY:
            words = label(Rejected(filter=Filter(w.filter), nodes=1)).split(" ", 1)[1] if w.filter else ""
            return f"{w.filter}: {words}, with the batch placed"  # kube-scheduler's words, "node(s)" cut
        case Rule.MATCHING:
            return "kept on nodes matching its affinity first (when-no-node-fits: ignore-affinity)"
        case Rule.PREFERENCE:
            return f"preferences: score {w.cost:g} here, {w.chosen_cost:g} on {chosen} (higher is better)"
        case Rule.STRATEGY:
            return f"strategy {w.term}: costs {w.cost:.4f} here, {w.chosen_cost:.4f} on {chosen}, with the batch placed"
        case Rule.TIE:
            return f"tie: {w.cost:.4f} here and on {chosen}; the solver kept {chosen}"
        case _:
            if w.cost is not None:
                return (
                    f"solver: {w.cost:.4f} here beats {w.chosen_cost:.4f} on {chosen}; the solve ended {w.status} "
                    f"(gap {w.gap or 0:.4f}) before finding it"
                )
            return f"solver: it fits here in the answer; the solve ended {w.status} before deciding it"


_RULE_WORDS = {
    Rule.GANG_DOMAIN: "its group's topology domain",
    Rule.GANG: "its gang placed whole or not at all",
    Rule.ROOM: "room the rest of the answer took",
    Rule.PORTS: "host ports",
    Rule.TOPOLOGY: "spreading and pod (anti-)affinity",
    Rule.MATCHING: "its weak node affinity",
    Rule.PREFERENCE: "preferences",
    Rule.STRATEGY: "the strategy's cost",
    Rule.TIE: "ties",
    Rule.SOLVER: "the solver's time limit",
}


def _decided_by(story: Explanation) -> str:
    """Per rule, how many of the cheaper-looking nodes it kept the pod off."""
    counts: Counter[Rule] = Counter(w.rule for c in story.candidates for w in c.why_not[:1])
    if not counts:
        return ""
    parts = [f"{_RULE_WORDS[r]} ({n} node{'s' if n > 1 else ''})" for r, n in counts.most_common()]
    return ", ".join(parts)


def _domains_table(tries: Sequence[DomainTry]) -> Table:
    shown = tries[:_MAX_DOMAINS]
    more = f", {len(tries) - len(shown)} more: see -o json" if len(tries) > len(shown) else ""
    table = Table(title=f"Topology domains tried for its group ({len(tries)}{more})")
    for col in ("group", "domain", "nodes", "pass filters", "room for", "lacks"):
        table.add_column(col, overflow="fold")
    for d in shown:
        table.add_row(
            d.group,
            f"{d.key}={d.domain}",
            str(d.nodes),
            str(d.allowed),
            f"{d.room_for} of {d.members}",
            _lacks(d),
        )
    return table


def _lacks(d: DomainTry) -> str:
    parts = []
    if d.pinned_elsewhere:
        parts.append("members already run in another domain")
    if d.allowed == 0:
        parts.append("no node passes the filters")
    else:
        if d.allowed < d.nodes:
            parts.append(f"only {d.allowed} of {d.nodes} nodes pass the filters")
        for r, need in d.needs.items():
            parts.append(f"{r}: needs {kubectl.quantity(r, need)}, {kubectl.quantity(r, d.free.get(r, 0))} free")
    if d.filters is not None:
        for f in d.filters.filters:
            if not isinstance(f, Insufficient):
                parts.append(f"{f.nodes} of its nodes: {_filter_detail(f)}")
    if not d.needs and d.allowed and d.room_for < d.members:
        parts.append("enough in total, split across nodes: no node has room for the rest")
    return "; ".join(parts) or "-"
