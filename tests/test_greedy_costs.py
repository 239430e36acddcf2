"""The greedy pass keeps each group's node costs and re-evaluates only the nodes a placement
changed: its answers are exactly those of evaluating every node for every pod."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from support import cluster, greedy_answer, node, pod

from placer.engine import build_snapshot
from placer.models import Cluster, Config

greedy_module = importlib.import_module("placer.engine.greedy")  # the package's `greedy` is the function


def _cluster(seed: int) -> Cluster:
    """Eight nodes of three sizes, some running load; sixty pods of four shapes (groups of many
    identical pods, each placement changing the balance of its node)."""
    rng = np.random.default_rng(seed)
    nodes = [
        node(f"n{i}", cpu=str(int(rng.choice([4, 8, 16]))), memory=f"{int(rng.choice([8, 16, 64]))}Gi")
        for i in range(8)
    ]
    pods: list[dict[str, Any]] = []
    for i in range(60):
        home = f"n{int(rng.integers(0, 8))}" if rng.random() < 0.3 else None
        shape = int(rng.integers(0, 4))  # few shapes: groups of many identical pods
        extra = {"node": home} if home else {}
        pods.append(pod(f"p{i}", cpu=f"{250 * (shape + 1)}m", memory=f"{512 * (4 - shape)}Mi", **extra))
    return cluster(nodes, pods)


@pytest.mark.parametrize("strategy", ["balance", "spread", "pack"])
@pytest.mark.parametrize("seed", range(8))
def test_kept_costs_give_the_answer_of_fresh_costs(strategy: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    c = _cluster(seed)
    config = Config.model_validate({"strategy": strategy})
    pending = [p for p in c.pods if p.pending]
    running = [p for p in c.pods if not p.pending]
    snap = build_snapshot(c.nodes, running, pending, c.namespaces)

    def answer() -> list[list[int]]:
        return greedy_answer(c, snap, pending, config)

    kept = answer()
    monkeypatch.setattr(
        greedy_module._Costs, "delta", lambda self, scorer, gi, vec, nodes, used: scorer.delta(vec, nodes, used)
    )
    assert kept == answer()
    assert sum(n >= 0 for nodes in kept for n in nodes) > 0
