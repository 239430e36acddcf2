"""Rebuild ``benchmarks/corpus/data/*.json`` from the public sources (provenance, not run time).

The benchmark never fetches anything: the JSON files are committed. This script records how they
were derived so that anyone can check them against the published files. Each ``--*`` option names
a local copy of a public file or folder (see ``data/README.md`` for where each comes from):

  python -m benchmarks.corpus.derive --vectorpack DIR --azure-flavours DIR \
      --alibaba-tasks FILE --alibaba-machines FILE --google-tasks FILE

``--vectorpack`` is a checkout of github.com/Vectorpack/experiments_vector_paper with its three
``data/*_instances.tar.gz`` unpacked in place (``Panigrahy_instances_multidim/`` etc. under
``data/``); ``--azure-flavours`` a checkout of github.com/huaweicloud/trace_generation_rnn.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"

# Packing families: (family, summary file, instance folder under data/). Kept: the instances with
# a known optimum and at most MAX_ITEMS items, the first few per (class, items, dimensions).
PACKING = (  # family, summary, instance folder, instances kept per cell
    ("panigrahy", "Panigrahy_summary_known.csv", "Panigrahy_instances_multidim", 2),
    ("vectorpack-new", "New_summary_known.csv", "New_instances_multidim", 2),
    ("triplets", "Triplet_summary_known.csv", "Triplet_instances_multidim", 3),
)
MAX_ITEMS = 250


def _vbp(path: Path) -> tuple[list[int], list[list[int]]]:
    """VPSolver's .vbp format: d, the d capacities, m, then m lines of d sizes and a demand."""
    numbers = [int(t) for t in path.read_text(encoding="utf-8").split()]
    d = numbers[0]
    capacity = numbers[1 : 1 + d]
    m = numbers[1 + d]
    rows = numbers[2 + d :]
    items = [rows[k * (d + 1) : (k + 1) * (d + 1)] for k in range(m)]
    return capacity, items


def packing_family(root: Path, family: str, summary: str, folder: str, per_cell: int) -> dict[str, Any]:
    known: dict[str, tuple[int, int]] = {}
    with (root / "results_data" / summary).open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row["OPT"]) > 0:
                known[row["instance_name"]] = (int(row["LB"]), int(row["OPT"]))
    cells: dict[tuple[str, int, int], list[str]] = defaultdict(list)
    for name in sorted(known, key=lambda s: [int(t) if t.isdigit() else t for t in s.split("_")]):
        cls, items_total, dims, _ = name.split("_")
        cell = (cls, int(items_total), int(dims))
        if cell[1] <= MAX_ITEMS and len(cells[cell]) < per_cell:
            cells[cell].append(name)
    paths = {p.stem: p for p in (root / "data" / folder).rglob("*.vbp")}
    instances = []
    for (cls, n, d), names in sorted(cells.items()):
        for name in names:
            capacity, items = _vbp(paths[name])
            lb, opt = known[name]
            instances.append(
                {
                    "name": name,
                    "class": cls,
                    "items_total": n,
                    "d": d,
                    "capacity": capacity,
                    "lower_bound": lb,
                    "optimum": opt,
                    "items": items,
                }
            )
    return {"family": family, "instances": instances}


def azure_flavours(root: Path) -> dict[str, Any]:
    """VM arrivals per flavour over the train/dev/test traces (Azure Public Dataset V1 vmtable)."""
    flavour = {}
    for line in (root / "resources/maps/flav_map.txt").read_text(encoding="utf-8").split("\n"):
        if line.strip():
            shape, letter = line.split()
            cores, gb = shape.split(",")
            flavour[letter] = (int(cores) * 1000, round(float(gb) * 1024))
    counts: Counter[str] = Counter()
    for split in ("train", "dev", "test"):
        for line in (root / f"resources/traces/v1.{split}.txt").read_text(encoding="utf-8").splitlines():
            counts.update(t for t in line.split(" ", 1)[1].split(",") if t in flavour)
    return {"shapes": sorted([*flavour[k], c] for k, c in counts.items())}


def alibaba_tasks(tasks: Path, machines: Path) -> dict[str, Any]:
    """Batch task instances per (cpu, memory) request; cpu in 1/100 core -> millicores, memory
    normalised to the largest machine -> millionths, written as Mi."""
    counts: Counter[tuple[int, int]] = Counter()
    with tasks.open(encoding="utf-8") as f:
        next(f)
        for row in csv.reader(f):
            if row[6] and row[7] and float(row[6]) > 0 and float(row[7]) > 0:
                counts[int(row[6]) * 10, round(float(row[7]) * 1e6)] += int(row[4])
    shapes: Counter[tuple[int, int]] = Counter()
    with machines.open(encoding="utf-8") as f:
        for row in csv.reader(f):
            if row[2] == "add" and float(row[4]) > 0:
                shapes[int(row[4]) * 1000, round(float(row[5]) * 1e6)] += 1
    return {
        "machines": sorted([*k, c] for k, c in shapes.items()),
        "shapes": sorted([*k, c] for k, c in counts.items()),
    }


def google_tasks(tasks: Path) -> dict[str, Any]:
    """Tasks per (cpu, memory) request, both normalised to the largest machine: cpu 1.0 ->
    100,000 m, memory 1.0 -> 1,000,000 Mi, rounded to the unit; zero requests left out."""
    counts: Counter[tuple[int, int]] = Counter()
    for line in tasks.read_text(encoding="utf-8").splitlines():
        cols = line.split(";")
        cpu, mem = round(float(cols[8]) * 1e5), round(float(cols[9]) * 1e6)
        if cpu > 0 and mem > 0:
            counts[cpu, mem] += 1
    return {"shapes": sorted([*k, c] for k, c in counts.items())}


def _write(name: str, doc: dict[str, Any]) -> None:
    """One JSON object per line of the top-level lists, so that diffs stay readable."""
    lines = ["{"]
    keys = list(doc)
    for i, key in enumerate(keys):
        value = doc[key]
        end = "," if i < len(keys) - 1 else ""
        if isinstance(value, list):
            inner = ",\n".join("  " + json.dumps(v, separators=(",", ":")) for v in value)
            lines.append(f" {json.dumps(key)}: [\n{inner}\n ]{end}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{end}")
    lines.append("}")
    (DATA / f"{name}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus.derive", description=__doc__.splitlines()[0])
    parser.add_argument("--vectorpack", type=Path, required=True)
    parser.add_argument("--azure-flavours", type=Path, required=True)
    parser.add_argument("--alibaba-tasks", type=Path, required=True)
    parser.add_argument("--alibaba-machines", type=Path, required=True)
    parser.add_argument("--google-tasks", type=Path, required=True)
    args = parser.parse_args(argv)
    meta = json.loads((DATA / "sources.json").read_text(encoding="utf-8"))
    for family, summary, folder, per_cell in PACKING:
        _write(family, {**meta[family], **packing_family(args.vectorpack, family, summary, folder, per_cell)})
    _write("azure-2017", {**meta["azure-2017"], **azure_flavours(args.azure_flavours)})
    _write("alibaba-2017", {**meta["alibaba-2017"], **alibaba_tasks(args.alibaba_tasks, args.alibaba_machines)})
    _write("google-2011", {**meta["google-2011"], **google_tasks(args.google_tasks)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
