"""Text rendering of solve outcomes with rich: placements, reasons, node tables, metrics."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from placer.cli.tables import Col, fits, fitted
from placer.engine import Snapshot
from placer.metrics import running_by_priority
from placer.models import Balance, BudgetStop, NamespaceCounts, Pod, Result, Step, eviction_cause, format_quantity
from placer.rebalance import RebalanceOutcome
from placer.service import Outcome

__all__ = ["offered_resources", "render_compare", "render_outcome", "render_rebalance"]

_COLUMNS = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth", "pods")
_GPU_HINTS = ("gpu", "neuron", "tpu")  # extended resources shown when some node offers them
_DROP = {"pods": 3, "ephemeral-storage": 2, "placer.io/bandwidth": 1}  # left out first on a narrow terminal
MAX_ROWS = 40  # rows of a table before it is cut (``--max-rows``)
_NAMESPACES = 6  # namespaces named in a summary line
_JSON = "see -o json or --max-rows 0"


def _pct(used: int, alloc: int) -> str:
    return f"{100 * used / alloc:.0f}%" if alloc > 0 else "-"


def offered_resources(snap: Snapshot) -> list[str]:
    """The resources worth showing: the usual ones and GPU-like devices, where some node offers them."""
    devices = tuple(r for r in snap.resources if any(h in r.lower() for h in _GPU_HINTS))
    return [r for r in (*_COLUMNS, *devices) if r in snap.resources and snap.alloc[:, snap.column(r)].sum() > 0]


def _limit(rows: int | None) -> int | None:
    return None if rows == 0 else rows


def _node_table(console: Console, outcome: Outcome, rows: int | None) -> Table:
    before, after = outcome.before, outcome.after
    cols = offered_resources(before)
    changed = [i for i in range(len(before.nodes)) if (after.used[i] != before.used[i]).any()]
    limit = _limit(rows)
    shown = list(range(len(before.nodes))) if limit is None or len(before.nodes) <= limit else changed
    title = "Nodes (utilisation before -> after)"
    if len(shown) < len(before.nodes):
        title += f": the {len(shown)} of {len(before.nodes)} nodes that changed"
    full: list[list[str]] = []
    short: list[list[str]] = []  # without the allocatable, for a narrow terminal
    for i in shown:
        full.append([before.nodes[i].name])
        short.append([before.nodes[i].name])
        for r in cols:
            j = before.column(r)
            a = int(before.alloc[i, j])
            b, c = int(before.used[i, j]), int(after.used[i, j])
            text = f"{_pct(b, a)} -> {_pct(c, a)}" if b != c else _pct(b, a)
            full[-1].append(f"{text} of {format_quantity(r, a)}")
            short[-1].append(text)
    columns = [Col("node", key=True)]
    columns += [Col(r.replace("placer.io/", ""), drop=_DROP.get(r, 0), right=True, wrap=False) for r in cols]
    cells = full
    if not fits(columns, full, console.width):
        cells = short
        title = title.replace(")", "; allocatable left out at this width)", 1)
    return fitted(title, columns, cells, width=console.width, limit=limit, where="--max-rows 0 shows them all")


def _steps_table(console: Console, steps: Sequence[Step], title: str, rows: int | None) -> Table:
    """A plan's steps, one row each (the solve and the rebalance answers alike)."""
    cols = [Col("id", right=True), Col("op"), Col("pod", key=True), Col("node", key=True), Col("after")]
    cells = [[str(st.id), st.op, st.subject, st.node, ", ".join(map(str, st.after)) or "-"] for st in steps]
    title = f"{title} (each waits for the steps in 'after')"
    return fitted(title, cols, cells, width=console.width, limit=rows, where=_JSON)


def _namespace_words(name: str, n: NamespaceCounts) -> str:
    counts = (("bound", n.binds), ("moved", n.moves), ("preempted", n.preemptions), ("unplaced", n.unplaced))
    return f"{name or '(none)'} " + ", ".join(f"{k} {v}" for k, v in counts if v)


def summary_line(result: Result) -> str:
    """The answer in one line: what it binds, moves, preempts and leaves pending, by namespace and
    by cause (the causes numbered as in ``causes_legend``)."""
    s = result.summary
    head = f"{s.evictions} evictions ({s.moves} moves, {s.preemptions} preemptions)" if s.evictions else "no evictions"
    head += f", {s.binds} binds" + (f" ({s.replacements} replacements)" if s.replacements else "")
    head += f", {s.unplaced} unplaced"
    if s.unplaced_codes:
        head += " (" + ", ".join(f"{code} {n}" for code, n in s.unplaced_codes.items()) + ")"
    spaces = [_namespace_words(name, n) for name, n in s.namespaces.items()]
    if len(spaces) > _NAMESPACES:
        spaces = [*spaces[:_NAMESPACES], f"{len(spaces) - _NAMESPACES} more namespaces"]
    line = f"{'Plan' if s.evictions else 'Answer'}: {head}"
    if spaces:
        line += "; by namespace: " + "; ".join(spaces)
    if s.causes:
        line += "; by cause: " + ", ".join(f"[{i}] {c.evictions}" for i, c in enumerate(s.causes, 1))
    return line


def causes_legend(result: Result) -> list[str]:
    """One line per cause of eviction (evictions that share one show it once, by its number)."""
    return [f"[{i}] {c.reason} ({c.evictions})" for i, c in enumerate(result.summary.causes, 1)]


def _cause_numbers(result: Result) -> dict[tuple[str, str], str]:
    return {(c.kind, c.reason): f"[{i}]" for i, c in enumerate(result.summary.causes, 1)}


def _names(keys: Sequence[str], limit: int | None) -> str:
    shown = ", ".join(keys if limit is None else keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if limit is not None and len(keys) > limit else "")


def _grouped(pairs: Sequence[tuple[str, tuple[str, ...]]]) -> list[tuple[tuple[str, ...], list[str]]]:
    """(pod, why) pairs as (why, pods) groups, the largest first: rows that share a reason show it once."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for pod, why in pairs:
        groups.setdefault(why, []).append(pod)
    return sorted(groups.items(), key=lambda g: (-len(g[1]), g[0]))


def _print_summary(console: Console, result: Result) -> None:
    console.print(Text(summary_line(result)))
    for line in causes_legend(result):
        console.print(Text(line))


def render_outcome(console: Console, outcome: Outcome, rows: int | None = MAX_ROWS) -> None:
    result = outcome.result
    limit = _limit(rows)
    width = console.width
    _print_summary(console, result)
    if not result.placements and not result.unplaced and not result.evictions:
        console.print("Nothing to place: no pending pod is addressed to this scheduler (see the warnings).")
    if result.placements:
        cells = [[p.pod or f"(replacement of {p.replaces})", p.node] for p in result.placements]
        cols = [Col("pod", key=True), Col("node", key=True)]
        console.print(fitted(f"Placements ({result.policy})", cols, cells, width=width, limit=limit, where=_JSON))
    if result.unplaced:
        groups = _grouped([(u.pod, (u.code, u.reason)) for u in result.unplaced])
        cells = [[str(len(pods)), code, reason, _names(pods, limit)] for (code, reason), pods in groups]
        cols = [Col("pods", right=True), Col("code"), Col("reason"), Col("which", key=True)]
        console.print(fitted("Unplaced, by reason", cols, cells, width=width, limit=limit, where=_JSON))
    if result.evictions:
        numbers = _cause_numbers(result)
        cells = [
            [
                e.pod,
                f"{e.node} -> {e.to}" if e.to else e.node,
                ", ".join(e.for_) or "-",
                numbers[(e.kind, eviction_cause(e))],
            ]
            for e in result.evictions
        ]
        cols = [Col("pod", key=True), Col("node (-> to)", key=True), Col("for", drop=1), Col("cause")]
        console.print(fitted("Global plan: evictions", cols, cells, width=width, limit=limit, where=_JSON))
        console.print(_steps_table(console, result.steps, "Global plan: steps", limit))
    console.print(_node_table(console, outcome, rows))
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


def render_compare(console: Console, a: Outcome, b: Outcome, pods: Sequence[Pod], rows: int | None = MAX_ROWS) -> None:
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
        cols = [Col("pod", key=True), Col(a.result.policy, key=True), Col(b.result.policy, key=True)]
        cells = [[k, where_a.get(k, "unplaced"), where_b.get(k, "unplaced")] for k in differ]
        title = f"Pods placed differently ({len(differ)})"
        console.print(fitted(title, cols, cells, width=console.width, limit=_limit(rows), where=_JSON))
    else:
        console.print("Both policies place every pod on the same node.")


_STOP_UNITS = {"perPeriod": "moves per plan", "perNamespace": "moves per namespace", "perNode": "moves off one node"}


def _stop_words(stop: BudgetStop, now: Balance) -> str:
    """A budget that held the plan back, and what the plan would do with it raised."""
    unit = next((u for k, u in _STOP_UNITS.items() if stop.key.removeprefix("rebalance.limits.").startswith(k)), "")
    scopes = _names(stop.scopes, 3)
    text = (
        f"stopped by {stop.key} ({stop.limit} {unit or 'disruptions allowed'}, in {scopes}): "
        f"{stop.ready} pods offered there stayed"
    )
    if stop.more is None:
        return text
    return (
        f"{text}; raised to {stop.raised_to}, the plan would make {stop.more} more moves: "
        f"spread {now.spread:.4f} -> {stop.spread:.4f}, nodes above high {now.hot} -> {stop.hot}"
    )


def render_rebalance(console: Console, outcome: RebalanceOutcome, rows: int | None = MAX_ROWS) -> None:
    """``placer rebalance``: the summary and the budgets that stopped the plan, the moves, the
    steps, giving and taking nodes before -> after, why the other pods stay, and the balance
    before -> after (lower is better)."""
    result, report = outcome.result, outcome.report
    limit = _limit(rows)
    width = console.width
    _print_summary(console, result)
    for stop in report.stops:
        console.print(Text(_stop_words(stop, report.after)))
    if result.evictions:
        waits = {st.replaces: st.wait for st in result.steps if st.replaces is not None}
        cells = []
        for e in result.evictions:
            wait = waits.get(e.pod, 0.0)
            cells.append([e.pod, f"{e.node} -> {e.to or '-'}", f"{wait:.0f}s Job backoff" if wait else "-"])
        cols = [Col("pod", key=True), Col("from -> to", key=True), Col("replacement waits", drop=1)]
        console.print(fitted("Rebalancing plan: moves", cols, cells, width=width, limit=limit, where=_JSON))
        console.print(_steps_table(console, result.steps, "Steps", limit))
    if report.nodes:
        resources = list(report.nodes[0].before)
        cells = []
        for row in report.nodes:
            loads = []
            for r in resources:
                b, a = row.before.get(r, 0.0), row.after.get(r, 0.0)
                loads.append(f"{b:.0%} -> {a:.0%}" if abs(a - b) > 1e-9 else f"{b:.0%}")
            cells.append([row.node, row.role, f"{row.score:+.2f}", *loads])
        cols = [Col("node", key=True), Col("role"), Col("score", right=True, drop=1)]
        cols += [Col(r, right=True, wrap=False) for r in resources]
        title = f"Nodes giving (above {report.high:g} %) and taking (below {report.low:g} %), load by {report.load}"
        console.print(fitted(title, cols, cells, width=width, limit=limit, where=_JSON))
    if report.skipped:
        groups = _grouped([(pod, (why,)) for pod, why in report.skipped.items()])
        cells = [[str(len(pods)), why, _names(pods, limit)] for (why,), pods in groups]
        cols = [Col("pods", right=True), Col("why it stays"), Col("which", key=True)]
        console.print(fitted("Pods on giving nodes that stay", cols, cells, width=width, limit=limit, where=_JSON))
    old, new = report.before, report.after
    console.print(
        f"{'plan' if report.kept else 'no plan'}: {report.why}. moved {len(result.evictions)}; "
        f"spread {old.spread:.4f} -> {new.spread:.4f}, std_score {old.std_score:.4f} -> {new.std_score:.4f}, "
        f"imbalance {old.imbalance:.4f} -> {new.imbalance:.4f}, nodes above high {old.hot} -> {new.hot} "
        "(lower is better)"
    )
