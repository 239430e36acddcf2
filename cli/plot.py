"""``placer solve --plot out.png``: per-node utilisation per resource, before and after the answer,
placer beside the compared policy. matplotlib is an optional dependency (the ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from placer import DISTRIBUTION
from placer.cli.render import offered_resources
from placer.engine import Snapshot
from placer.service import Outcome

__all__ = ["PlotUnavailableError", "plot_outcomes"]

_MAX_NODES = 60  # beyond, nodes are shown sorted by utilisation (a curve per answer)


class PlotUnavailableError(RuntimeError):
    """matplotlib is not installed."""


def _share(snap: Snapshot, used: npt.NDArray[np.int64], resource: str) -> npt.NDArray[np.float64]:
    j = snap.column(resource)
    alloc = snap.alloc[:, j].astype(np.float64)
    return np.where(alloc > 0, used[:, j] / np.maximum(alloc, 1.0), 0.0) * 100.0


def plot_outcomes(path: Path, outcome: Outcome, other: Outcome | None = None) -> None:
    """Write a PNG: one panel per resource the nodes offer; bars (or sorted curves on large
    clusters) of each node's utilisation before, after placer's answer (plan included) and after
    the compared policy's."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as exc:
        raise PlotUnavailableError(f"--plot needs matplotlib: pip install '{DISTRIBUTION}[plot]'") from exc
    before = outcome.before
    resources = offered_resources(before)
    series = [("before", before.used, "#b0b0b0"), (f"{outcome.result.policy}", outcome.after.used, "#1f77b4")]
    if other is not None:
        series.append((f"{other.result.policy}", other.after.used, "#ff7f0e"))
    names = [n.name for n in before.nodes]
    fig, axes = plt.subplots(len(resources), 1, figsize=(max(8.0, min(0.35 * len(names), 24.0)), 2.6 * len(resources)))
    axes = np.atleast_1d(axes)
    width = 0.8 / len(series)
    for ax, resource in zip(axes, resources, strict=True):
        for k, (label, used, colour) in enumerate(series):
            share = _share(before, used, resource)
            if len(names) <= _MAX_NODES:
                ax.bar(
                    np.arange(len(names)) + (k - (len(series) - 1) / 2) * width, share, width, label=label, color=colour
                )
            else:
                ax.plot(np.sort(share)[::-1], label=label, color=colour)
        if len(names) <= _MAX_NODES:
            ax.set_xticks(np.arange(len(names)), names, rotation=60, ha="right", fontsize=7)
        else:
            ax.set_xlabel("nodes, most utilised first")
        ax.set_ylabel(f"{resource.replace('placer.io/', '')} %")
        ax.set_ylim(0, 105)
        ax.legend(loc="upper right", fontsize=7)
    m = outcome.result.metrics
    title = f"{outcome.result.policy}: placed {m.placed}, imbalance {m.imbalance:.3f}, std_score {m.std_score:.3f}"
    if other is not None:
        o = other.result.metrics
        title += (
            f"  |  {other.result.policy}: placed {o.placed}, imbalance {o.imbalance:.3f}, std_score {o.std_score:.3f}"
        )
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
