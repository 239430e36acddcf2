"""Render the fault suite's figures (build/faults/*.json, one per scenario) as a Markdown table.

python tests/e2e/faults/report.py build/faults > build/faults/reliability.md
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

COLUMNS = ("scenario", "expected", "bound", "pending", "lost", "overcommitted nodes", "evicted twice", "recover s")


def row(f: dict[str, Any]) -> str:
    rec = f.get("recover_seconds")
    cells = [
        f["scenario"],
        f["expected"],
        f["bound"],
        f["pending"],
        f["lost"],
        f["overcommitted_nodes"],
        f["evicted_twice"],
        "not recovered" if rec is None else f"{rec:.1f}",
    ]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def render(figures: list[dict[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
        *(row(f) for f in figures),
        "",
        f"Machine: {platform.node()}, {platform.machine()}, Python {platform.python_version()}.",
        "",
    ]
    for f in figures:
        lines.append(f"- **{f['scenario']}** ({f['samples']} usage samples): " + json.dumps(f.get("notes", {})))
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    src = Path(argv[1] if len(argv) > 1 else "build/faults")
    figures = [json.loads(p.read_text()) for p in sorted(src.glob("*.json"))]
    sys.stdout.write(render(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
