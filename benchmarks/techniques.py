"""What each packing technique contributes: placer with one technique switched off at a time.

Issue 29: a technique stays only if the corpus shows it pays. On tight batches the dispatcher
(``placer.engine.packing.dispatch``) runs the classic heuristics as starts, the CP-SAT search
"every pod placed" (``place-all``) and bin completion racing it. This benchmark runs placer as
``placer solve`` does (wall clock, default workers) on packing instances with every technique, and
again with each one switched off (``placer.engine.packing.tuning.OFF``), beside the plain CP-SAT
feasibility model (``benchmarks.packing.reference_pack``: x[pod, node], every pod on exactly one
node, the textbook symmetry rule, the whole limit). Instances: the public packing families of
``benchmarks.corpus`` (drawn by ``--seed``) and ``benchmarks.packing``'s generator as one family
among them (``generated``: perfect packings, demand equal to the room).

  python -m benchmarks.techniques --seed 5 [--per-family 8] [--time-limit 10] [--out docs/bench]

Reported per family: instances packed (every pod placed into the optimal node count) and pods
placed by each variant, and the instances a variant packs that "all" does not (a technique whose
removal never loses an instance does not pay on that family).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import corpus  # noqa: E402
from benchmarks import packing as generated  # noqa: E402
from benchmarks.machine import machine_info, report_header, source_revision  # noqa: E402
from benchmarks.solving import timed_solve  # noqa: E402
from placer.engine import packing  # noqa: E402
from placer.models import Cluster  # noqa: E402
from placer.validate import validate_placements  # noqa: E402

OUT_DIR = REPO / "docs" / "bench"
TECHNIQUES = tuple(t.name for t in packing.TECHNIQUES)
VARIANTS = ("all", *(f"no {name}" for name in TECHNIQUES))
REFERENCE = "plain feasibility model"
GENERATED = "generated"


@dataclass
class Row:
    family: str
    name: str
    pods: int
    nodes: int
    placed: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _off(variant: str) -> frozenset[str]:
    return frozenset() if variant == "all" else frozenset({variant.removeprefix("no ")})


def _placer(cluster: Cluster, variant: str, limit: float) -> tuple[int, float]:
    packing.tuning.OFF = _off(variant)
    try:
        timed = timed_solve(cluster, "placer", time_limit=limit)
    finally:
        packing.tuning.OFF = frozenset()
    placements = {p.pod: p.node for p in timed.outcome.result.placements if p.pod and p.kind == "pending"}
    violations = validate_placements(cluster, placements)
    if violations:
        raise SystemExit(f"[techniques] invalid answer ({variant}): {violations[:3]}")
    return len(placements), timed.seconds


def _instances(seed: int, per_family: int, max_pods: int) -> list[tuple[str, str, Cluster, int, int]]:
    out = [
        (inst.family, inst.name, inst.cluster(), inst.pods, inst.nodes)
        for inst in corpus.draw(
            seed, per_family=per_family, traces=0, max_pods=max_pods, families=corpus.PACKING_FAMILIES
        )
    ]
    rng = np.random.default_rng(seed)
    for _ in range(per_family):
        kind = str(rng.choice(generated.CLASSES))
        pods, d = int(rng.choice([60, 100, 150])), int(rng.integers(2, 6))
        inst = generated.instance(kind, pods, d, int(rng.integers(0, 1000)))
        out.append((GENERATED, f"{kind}_{pods}_{d}_{inst.seed}", inst.cluster(), inst.pods, inst.nodes))
    return out


def run(seed: int, per_family: int, limit: float, max_pods: int) -> list[Row]:
    rows = []
    for family, name, cluster, pods, nodes in _instances(seed, per_family, max_pods):
        row = Row(family, name, pods, nodes)
        for variant in VARIANTS:
            row.placed[variant], row.seconds[variant] = _placer(cluster, variant, limit)
        packed, seconds = generated.reference_pack(cluster, limit)
        row.placed[REFERENCE], row.seconds[REFERENCE] = (pods if packed else 0), seconds
        rows.append(row)
        summary = " ".join(f"{v}={row.placed[v]}" for v in (*VARIANTS, REFERENCE))
        print(f"[techniques] {family} {name} ({pods} pods, {nodes} nodes): {summary}", flush=True)
    return rows


def _families(rows: list[Row]) -> list[str]:
    return sorted({r.family for r in rows}, key=lambda f: (f == GENERATED, f))


def render_markdown(rows: list[Row], command: str, info: dict[str, str]) -> str:
    methods = (*VARIANTS, REFERENCE)
    lines = [
        *report_header("What each packing technique contributes", command, info),
        "Placer with every technique (`all`) and with one switched off at a time, beside the plain",
        "CP-SAT feasibility model, at the same limit. Packed: every pod placed into the optimal node",
        "count (the reference model only says packed or not, so it has no pods column).",
        "",
        "| family | instances | " + " | ".join(f"packed: {m}" for m in methods) + " |",
        "|---|---:|" + "---:|" * len(methods),
    ]
    for family in _families(rows):
        group = [r for r in rows if r.family == family]
        cells = [f"{sum(r.placed[m] == r.pods for r in group)}/{len(group)}" for m in methods]
        lines.append(f"| {family} | {len(group)} | " + " | ".join(cells) + " |")
    lines += ["", "| family | " + " | ".join(f"pods: {m}" for m in VARIANTS) + " |", "|---|" + "---:|" * len(VARIANTS)]
    for family in _families(rows):
        group = [r for r in rows if r.family == family]
        lines.append(f"| {family} | " + " | ".join(str(sum(r.placed[m] for r in group)) for m in VARIANTS) + " |")
    lines += [
        "",
        "What switching a technique off costs (instances packed with it and not without, and the reverse):",
        "",
    ]
    for name in TECHNIQUES:
        variant = f"no {name}"
        lost = [r for r in rows if r.placed["all"] == r.pods and r.placed[variant] < r.pods]
        won = [r for r in rows if r.placed["all"] < r.pods and r.placed[variant] == r.pods]
        by = ", ".join(
            f"{f} {sum(r.family == f for r in lost)}" for f in _families(rows) if any(r.family == f for r in lost)
        )
        lines.append(
            f"- `{name}`: {len(lost)} instances lost without it ({by or 'none'}); {len(won)} packed only without it"
        )
    lines += ["", "![techniques](techniques.png)", ""]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    methods = (*VARIANTS, REFERENCE)
    families = _families(rows)
    fig = Figure(figsize=(10, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(methods)
    for k, method in enumerate(methods):
        shares = [
            np.mean([r.placed[method] == r.pods for r in rows if r.family == f]) if families else 0.0 for f in families
        ]
        ax.bar(np.arange(len(families)) + k * width, shares, width, label=method)
    ax.set_xticks(np.arange(len(families)) + 0.4 - width / 2, families)
    ax.set_ylabel("share of instances packed")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.techniques", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, required=True, help="draws which instances run")
    parser.add_argument("--per-family", type=int, default=8, help="instances per family")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--max-pods", type=int, default=150)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    command = "python -m benchmarks.techniques " + " ".join(argv if argv is not None else sys.argv[1:])
    info = {**machine_info(), "revision": source_revision()}
    rows = run(args.seed, args.per_family, args.time_limit, args.max_pods)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "techniques.md").write_text(render_markdown(rows, command, info), encoding="utf-8")
    doc = {"command": command, "machine": info, "rows": [asdict(r) for r in rows]}
    (args.out / "techniques.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    plot(rows, args.out / "techniques.png")
    print(f"[techniques] wrote {args.out / 'techniques.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
