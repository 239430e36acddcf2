"""Text rendering of solve outcomes with rich: placements, reasons, node tables, metrics."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from placer.models import format_quantity
from placer.service import Outcome

__all__ = ["render_compare", "render_outcome"]

_COLUMNS = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth", "pods")
_MAX_ROWS = 40


def _pct(used: int, alloc: int) -> str:
    return f"{100 * used / alloc:.0f}%" if alloc > 0 else "-"


def _node_table(outcome: Outcome) -> Table:
    before, after = outcome.before, outcome.after
    cols = [r for r in _COLUMNS if r in before.resources and before.alloc[:, before.column(r)].sum() > 0]
    changed = [i for i in range(len(before.nodes)) if (after.used[i] != before.used[i]).any()]
    rows = list(range(len(before.nodes))) if len(before.nodes) <= _MAX_ROWS else changed
    title = "Nodes (utilisation before -> after)"
    if len(rows) < len(before.nodes):
        title += f": the {len(rows)} of {len(before.nodes)} nodes that changed"
    table = Table(title=title)
    table.add_column("node")
    for r in cols:
        table.add_column(r.replace("placer.io/", ""), justify="right")
    for i in rows[: _MAX_ROWS * 5]:
        cells = []
        for r in cols:
            j = before.column(r)
            a = int(before.alloc[i, j])
            b, c = int(before.used[i, j]), int(after.used[i, j])
            text = f"{_pct(b, a)} -> {_pct(c, a)}" if b != c else _pct(b, a)
            cells.append(f"{text} of {format_quantity(r, a)}")
        table.add_row(before.nodes[i].name, *cells)
    return table


def render_outcome(console: Console, outcome: Outcome) -> None:
    result = outcome.result
    if not result.placements and not result.unplaced and not result.evictions:
        console.print("Nothing to place: no pending pod is addressed to this scheduler (see the warnings).")
    if result.placements:
        table = Table(title=f"Placements ({result.policy})")
        table.add_column("pod")
        table.add_column("node")
        for p in result.placements:
            table.add_row(p.pod or f"(replacement of {p.replaces})", p.node)
        console.print(table)
    if result.unplaced:
        table = Table(title="Unplaced")
        table.add_column("pod")
        table.add_column("code")
        table.add_column("reason", overflow="fold")
        for u in result.unplaced:
            table.add_row(u.pod, u.code, u.reason)
        console.print(table)
    if result.evictions:
        table = Table(title="Global plan: evictions")
        for col in ("pod", "node", "kind", "to", "for"):
            table.add_column(col, overflow="fold")
        for e in result.evictions:
            table.add_row(e.pod, e.node, e.kind, e.to or "-", ", ".join(e.for_) or "-")
        console.print(table)
        steps = Table(title="Global plan: steps (each waits for the steps in 'after')")
        for col in ("id", "op", "pod", "node", "after"):
            steps.add_column(col)
        for st in result.steps:
            steps.add_row(str(st.id), st.op, st.subject, st.node, ", ".join(map(str, st.after)) or "-")
        console.print(steps)
    console.print(_node_table(outcome))
    m = result.metrics
    console.print(
        f"placed {m.placed}, moved {m.moved}, preempted {m.preempted}, unplaced {m.unplaced}, "
        f"imbalance {m.imbalance:.4f}, std_score {m.std_score:.4f}, "
        f"solve {m.solve_seconds:.3f}s, status {result.status}, gap {m.gap:.4f}"
    )


def render_compare(console: Console, a: Outcome, b: Outcome) -> None:
    table = Table(title="Side by side")
    table.add_column("")
    table.add_column(a.result.policy, justify="right")
    table.add_column(b.result.policy, justify="right")
    ma, mb = a.result.metrics, b.result.metrics
    table.add_row("placed", str(ma.placed), str(mb.placed))
    table.add_row("unplaced", str(ma.unplaced), str(mb.unplaced))
    table.add_row("imbalance", f"{ma.imbalance:.4f}", f"{mb.imbalance:.4f}")
    table.add_row("std_score", f"{ma.std_score:.4f}", f"{mb.std_score:.4f}")
    table.add_row("seconds", f"{ma.solve_seconds:.3f}", f"{mb.solve_seconds:.3f}")
    console.print(table)
    where_a = {p.pod: p.node for p in a.result.placements}
    where_b = {p.pod: p.node for p in b.result.placements}
    differ = sorted(k for k in set(where_a) | set(where_b) if k is not None and where_a.get(k) != where_b.get(k))
    if differ:
        diff = Table(title=f"Pods placed differently ({len(differ)})")
        diff.add_column("pod")
        diff.add_column(a.result.policy)
        diff.add_column(b.result.policy)
        for k in differ[:_MAX_ROWS]:
            diff.add_row(k, where_a.get(k, "unplaced"), where_b.get(k, "unplaced"))
        console.print(diff)
    else:
        console.print("Both policies place every pod on the same node.")
