"""Large batches improve the strategy by neighbourhood re-solves (LNS) around the answer.

Aspects: a batch of many distinct pods (more (pod, node) pairs than one CP-SAT model takes) goes
through the LNS level; every pod stays placed, the answer passes the independent validator, and
its strategy cost is no higher than the greedy start's (only improving neighbourhoods are kept).
"""

from __future__ import annotations

import numpy as np
from support import cluster, node, pod

from placer.engine import build_snapshot, greedy, solve_batch, strategy_cost
from placer.models import Config
from placer.validate import validate_placements


def test_a_large_batch_of_distinct_pods_is_improved_by_neighbourhoods_and_stays_valid() -> None:
    nodes = [node(f"n{i:02d}", cpu=str(16 + 8 * (i % 3)), memory=f"{32 + 16 * (i % 2)}Gi") for i in range(40)]
    # 320 distinct requests (no two pods alike: one group each), about half the cluster's room.
    pods = [pod(f"p{j:03d}", cpu=f"{100 + 13 * j % 900}m", memory=f"{256 + 37 * j % 1500}Mi") for j in range(320)]
    c = cluster(nodes, pods)
    config = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 4, "seed": 0}})
    state = build_snapshot(c.nodes, [], list(c.pods), c.namespaces)
    result = solve_batch(state, list(c.pods), config)
    assert [level.name for level in result.levels] == ["strategy-lns"]
    assert len(result.placements) == len(pods) and not result.unplaced
    names = [n.name for n in c.nodes]
    assert validate_placements(c, {p.key: names[n] for p, n in result.placements}) == []
    batch, scorer = result.batch, result.scorer
    assert batch is not None and scorer is not None
    group_of = {p.key: gi for gi, g in enumerate(batch.groups) for p in g.pods}
    answer: dict[tuple[int, int], int] = {}
    for p, n in result.placements:
        answer[group_of[p.key], n] = answer.get((group_of[p.key], n), 0) + 1
    start: dict[tuple[int, int], int] = {}
    for gi, placed in enumerate(greedy(batch, scorer)):
        for n in placed[placed >= 0].tolist():
            start[gi, n] = start.get((gi, n), 0) + 1
    every = np.arange(len(names), dtype=np.int64)
    assert strategy_cost(batch, scorer, answer, every) <= strategy_cost(batch, scorer, start, every) + 1e-9
