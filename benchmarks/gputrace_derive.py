"""Derive the compact copy of Alibaba's GPU trace v2023 kept in ``benchmarks/data/gpu/``.

Run once, by hand, on a checkout of https://github.com/alibaba/clusterdata (directory
``cluster-trace-gpu-v2023/csv``); the benchmark (``benchmarks/gputrace.py``) reads only the
derived files and fetches nothing. Kept: every node (``openb_node_list_all_node.csv``: cpu,
memory, GPUs, GPU model) and every pod of ``openb_pod_list_default.csv`` in creation order (cpu,
memory, GPUs, milli-GPU, creation time), with the GPU-model constraint ``gpu_spec`` of
``openb_pod_list_gpuspec33.csv`` (the same pods; the variant where about a third of the GPU pods
require models). Dropped: names (the row number is the name's number), QoS, phase, deletion and
scheduled times (the replay, like the paper's simulator, never deletes a pod).

  python -m benchmarks.gputrace_derive PATH/cluster-trace-gpu-v2023/csv
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "gpu"
POD_COLUMNS = ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with gzip.GzipFile(path, "wb", mtime=0) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    src = Path(args[0])
    nodes = _rows(src / "openb_node_list_all_node.csv")
    for i, n in enumerate(nodes):
        assert n["sn"] == f"openb-node-{i:04d}", n["sn"]
    pods = _rows(src / "openb_pod_list_default.csv")
    spec = _rows(src / "openb_pod_list_gpuspec33.csv")
    for i, (p, s) in enumerate(zip(pods, spec, strict=True)):
        assert p["name"] == s["name"] == f"openb-pod-{i:04d}", p["name"]
        assert all(p[c] == s[c] for c in POD_COLUMNS), p["name"]
    OUT.mkdir(parents=True, exist_ok=True)
    _write(
        OUT / "openb_nodes.csv.gz",
        ["cpu_milli", "memory_mib", "gpu", "model"],
        [[n["cpu_milli"], n["memory_mib"], n["gpu"], n["model"]] for n in nodes],
    )
    _write(
        OUT / "openb_pods.csv.gz",
        [*POD_COLUMNS, "gpu_spec33"],
        [[p[c] for c in POD_COLUMNS] + [s["gpu_spec"]] for p, s in zip(pods, spec, strict=True)],
    )
    print(f"wrote {len(nodes)} nodes and {len(pods)} pods to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
