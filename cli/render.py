"""Text rendering of solve outcomes with rich: placements, reasons, node tables, metrics."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from placer.engine import Snapshot
from placer.metrics import running_by_priority
from placer.models import Pod, Step, format_quantity
from placer.rebalance import RebalanceOutcome
from placer.service import Outcome

__all__ = ["offered_resources", "render_compare", "render_outcome", "render_rebalance"]

_COLUMNS = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth", "pods")
_GPU_HINTS = ("gpu", "neuron", "tpu")  # extended resources shown when some node offers them
_MAX_ROWS = 40


def _pct(used: int, alloc: int) -> str:
    return f"{100 * used / alloc:.0f}%" if alloc > 0 else "-"


def offered_resources(snap: Snapshot) -> list[str]:
    """The resources worth showing: the usual ones and GPU-like devices, where some node offers them."""
    devices = tuple(r for r in snap.resources if any(h in r.lower() for h in _GPU_HINTS))
    return [r for r in (*_COLUMNS, *devices) if r in snap.resources and snap.alloc[:, snap.column(r)].sum() > 0]


def _node_table(outcome: Outcome) -> Table:
    before, after = outcome.before, outcome.after
    cols = offered_resources(before)
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


def _steps_table(steps: Sequence[Step], title: str) -> Table:
    """A plan's steps, one row each (the solve and the rebalance answers alike)."""
    table = Table(title=f"{title} (each waits for the steps in 'after')")
    for col in ("id", "op", "pod", "node", "after"):
        table.add_column(col)
    for st in steps:
        table.add_row(str(st.id), st.op, st.subject, st.node, ", ".join(map(str, st.after)) or "-")
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
        for col in ("pod", "node", "kind", "to", "for", "why"):
            table.add_column(col, overflow="fold")
        for e in result.evictions:
            why = "; ".join((e.reason or "-").split("; ")[1:]) or "-"  # the first part repeats kind/to/for
            table.add_row(e.pod, e.node, e.kind, e.to or "-", ", ".join(e.for_) or "-", why)
        console.print(table)
        console.print(_steps_table(result.steps, "Global plan: steps"))
    console.print(_node_table(outcome))
    m = result.metrics
    console.print(
        f"placed {m.placed}, moved {m.moved}, preempted {m.preempted}, unplaced {m.unplaced}, "
        f"imbalance {m.imbalance:.4f}, std_score {m.std_score:.4f}, "
        f"read {m.read_seconds:.3f}s, solve {m.solve_seconds:.3f}s, status {result.status}, gap {m.gap:.4f}"
    )


def _better(a: float, b: float, higher: bool) -> str:
    """The arrow towards the better value; none where they are equal."""
    if a == b:
        return ""
    return "<-" if (a > b) == higher else "->"


def _lexicographic(a: Sequence[int], b: Sequence[int]) -> str:
    """The arrow towards the better vector, compared from its first entry (higher is better)."""
    first = next(((x, y) for x, y in zip(a, b, strict=True) if x != y), (0, 0))
    return _better(*first, higher=True)


def render_compare(console: Console, a: Outcome, b: Outcome, pods: Sequence[Pod]) -> None:
    """One table, both policies side by side, for the cluster whose ``pods`` both answers place.
    The last column points at the better one, and is empty where they are equal (README,
    "Reading the numbers", defines each row)."""
    priorities = {p.key: p.priority for p in pods}
    table = Table(title="Side by side (the arrow points at the better policy)")
    table.add_column("")
    table.add_column(a.result.policy, justify="right")
    table.add_column(b.result.policy, justify="right")
    table.add_column("better", justify="center")
    ra, rb = a.result, b.result
    ma, mb = ra.metrics, rb.metrics
    run_a, run_b = running_by_priority(pods, ra), running_by_priority(pods, rb)
    running = sorted(set(run_a) | set(run_b), reverse=True)
    va, vb = [run_a.get(k, 0) for k in running], [run_b.get(k, 0) for k in running]
    table.add_row(
        f"running, priority {' / '.join(map(str, running))} (higher is better"
        + (", from the left)" if len(running) > 1 else ")"),
        " / ".join(map(str, va)),
        " / ".join(map(str, vb)),
        _lexicographic(va, vb),
    )
    levels = sorted({priorities.get(p.pod, 0) for r in (ra, rb) for p in r.placements if p.pod}, reverse=True)
    if len(levels) > 1:
        for level in levels:
            pa = sum(1 for p in ra.placements if p.pod and p.kind == "pending" and priorities.get(p.pod, 0) == level)
            pb = sum(1 for p in rb.placements if p.pod and p.kind == "pending" and priorities.get(p.pod, 0) == level)
            table.add_row(f"placed, priority {level} (higher is better)", str(pa), str(pb), _better(pa, pb, True))
    table.add_row("placed (higher is better)", str(ma.placed), str(mb.placed), _better(ma.placed, mb.placed, True))
    table.add_row(
        "unplaced (fewer is better)", str(ma.unplaced), str(mb.unplaced), _better(ma.unplaced, mb.unplaced, False)
    )
    table.add_row("moved (fewer is better)", str(ma.moved), str(mb.moved), _better(ma.moved, mb.moved, False))
    table.add_row(
        "preempted (fewer is better)", str(ma.preempted), str(mb.preempted), _better(ma.preempted, mb.preempted, False)
    )
    for name, xa, xb in (("imbalance", ma.imbalance, mb.imbalance), ("std_score", ma.std_score, mb.std_score)):
        shown_a, shown_b = f"{xa:.4f}", f"{xb:.4f}"  # equal as shown: no arrow
        table.add_row(f"{name} (lower is better)", shown_a, shown_b, _better(float(shown_a), float(shown_b), False))
    table.add_row("seconds to decide", f"{ma.solve_seconds:.3f}", f"{mb.solve_seconds:.3f}", "")
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


def render_rebalance(console: Console, outcome: RebalanceOutcome) -> None:
    """``placer rebalance``: the moves, the steps, giving and taking nodes before -> after, and
    the balance before -> after (lower is better)."""
    result, report = outcome.result, outcome.report
    if result.evictions:
        table = Table(title="Rebalancing plan: moves")
        for col in ("pod", "from", "to", "replacement waits"):
            table.add_column(col)
        waits = {st.replaces: st.wait for st in result.steps if st.replaces is not None}
        for e in result.evictions:
            wait = waits.get(e.pod, 0.0)
            table.add_row(e.pod, e.node, e.to or "-", f"{wait:.0f}s Job backoff" if wait else "-")
        console.print(table)
        console.print(_steps_table(result.steps, "Steps"))
    if report.nodes:
        table = Table(
            title=f"Nodes giving (above {report.high:g} %) and taking (below {report.low:g} %), load by {report.load}"
        )
        table.add_column("node")
        table.add_column("role")
        table.add_column("score", justify="right")
        resources = list(report.nodes[0].before)
        for r in resources:
            table.add_column(r, justify="right")
        for row in report.nodes:
            cells = []
            for r in resources:
                b, a = row.before.get(r, 0.0), row.after.get(r, 0.0)
                cells.append(f"{b:.0%} -> {a:.0%}" if abs(a - b) > 1e-9 else f"{b:.0%}")
            table.add_row(row.node, row.role, f"{row.score:+.2f}", *cells)
        console.print(table)
    for pod, why in list(report.skipped.items())[:_MAX_ROWS]:
        console.print(f"stays: {pod}: {why}")
    old, new = report.before, report.after
    console.print(
        f"{'plan' if report.kept else 'no plan'}: {report.why}. moved {len(result.evictions)}; "
        f"spread {old.spread:.4f} -> {new.spread:.4f}, std_score {old.std_score:.4f} -> {new.std_score:.4f}, "
        f"imbalance {old.imbalance:.4f} -> {new.imbalance:.4f}, nodes above high {old.hot} -> {new.hot} "
        "(lower is better)"
    )
