"""Machine description for benchmark reports: cores, CPU model, memory, versions, date."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["machine_info", "report_header", "source_revision", "write_report"]


def source_revision() -> str:
    """The git commit the benchmark ran on, with ``+dirty`` when placer/ or models/ had local changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "placer", "models"], check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def machine_info() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kib = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines()
            if line.startswith("MemTotal")
        )
        mem = f"{mem_kib / 2**20:.1f} GiB"
    except (OSError, StopIteration):
        mem = "unknown"
    return {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": cpu,
        "memory": mem,
        "python": platform.python_version(),
        "ortools": version("ortools"),
        "numpy": np.__version__,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "revision": source_revision(),
        "load": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def report_header(title: str, command: str, info: dict[str, str], *, load_start: str = "") -> list[str]:
    """The opening lines every benchmark report shares: title, command, revision, machine facts."""
    load = f"Load average at the end: {info['load']}."
    if load_start:
        load = f"Load average at the start: {load_start}; at the end: {info['load']}."
    return [
        f"# {title}",
        "",
        f"Command: `{command}` ({info['date']}, placer at {info['revision']}).",
        "",
        f"Machine: {info['nproc']} cores, {info['cpu']}, {info['memory']}; Python {info['python']}, "
        f"OR-Tools {info['ortools']}, numpy {info['numpy']}. {load}",
        "",
    ]


def write_report(out: Path, stem: str, markdown: str, payload: dict[str, Any], draw: Callable[[Path], None]) -> str:
    """A benchmark's three outputs in ``out``: ``stem``.md, ``stem``.json (``payload``) and
    ``stem``.png (drawn by ``draw``); returns the line that names them."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(markdown, encoding="utf-8")
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    draw(out / f"{stem}.png")
    return f"wrote {out / f'{stem}.md'}, {out / f'{stem}.png'}, {out / f'{stem}.json'}"
