"""A large gang of plain identical members placed whole by one vectorised pass, the start of its
batch (``placer.engine.wholegang``; docs/bench/e2e-biggang.md: a 5,000-pod gang that fits
trivially was left out at every budget up to 10 s under load, because the per-pod greedy pass
could not finish it in its share and a partial gang is dropped whole).

Aspects: at a budget too small for the per-pod pass the gang is placed whole (checked by the
independent validator), which it is not without the linear start; a gang one pod too big for the
room is placed not at all; a gang of two groups whose second does not fit after the first leaves
the room untouched; best fit fills the fewest nodes, water-filling levels the nodes.
"""

from __future__ import annotations

import numpy as np
from support import cluster, node, pod, solve, unplaced, where

from placer.engine import Batch, Budget, Scorer, batch_demand, build_batch, build_snapshot, greedy, wholegang
from placer.models import Config

GANG = 5000


def _gang(n: int, size: int, cpu: str = "100m", name: str = "train") -> list[dict[str, object]]:
    ann = {"placer.io/gang": name, "placer.io/gang-size": str(size)}
    return [pod(f"{name}-{i}", cpu=cpu, memory="128Mi", annotations=ann) for i in range(n)]


# 500 nodes of 16 cpu / 110 pods: room for 55,000 pods of 100m; the budget (deterministic units)
# gives the per-pod greedy pass a few hundred of the gang's 5,000 looks.
NODES = [node(f"n{i:03}", cpu="16", memory="64Gi") for i in range(500)]
SOLVER: dict[str, object] = {"workers": 1, "deterministic": True, "timeLimit": 0.05, "seed": 0}
TINY: dict[str, object] = {"solver": SOLVER}


def test_a_5000_pod_gang_is_placed_whole_at_a_budget_the_per_pod_pass_cannot_finish_in() -> None:
    c = cluster(NODES, _gang(GANG, GANG))
    out = solve(c, solver=SOLVER)  # the validator checks every placement (support.validated)
    placed = where(out)
    assert len(placed) == GANG
    per_node = np.bincount([int(n[1:]) for n in placed.values()], minlength=len(NODES))
    assert per_node.max() - per_node.min() <= 1  # balanced: 10 on every node
    # The start itself: the per-pod pass, in its share of this budget, reaches a few hundred
    # members and drops the partial gang; the linear start places all 5,000 at once.
    batch, scorer = _batch(NODES, _gang(GANG, GANG), config=TINY)
    budget = Budget.of(Config.model_validate(TINY))
    assert sum(int((nodes >= 0).sum()) for nodes in greedy(batch, scorer, budget=budget)) == 0
    start = wholegang.greedy_start(batch, scorer, budget)
    assert sum(int((nodes >= 0).sum()) for nodes in start) == GANG


def test_a_gang_one_pod_too_big_for_the_room_is_placed_not_at_all() -> None:
    nodes = [node(f"n{i}", cpu="16", memory="64Gi", pods=10) for i in range(30)]  # 300 pod slots
    out = solve(cluster(nodes, _gang(301, 301)), solver=SOLVER)
    assert where(out) == {} and len(unplaced(out)) == 301
    fits = solve(cluster(nodes, _gang(300, 300)), solver=SOLVER)
    assert len(where(fits)) == 300


def _batch(
    nodes: list[dict[str, object]], pods: list[dict[str, object]], config: dict[str, object] | None = None
) -> tuple[Batch, Scorer]:
    c = cluster(nodes, pods)
    cfg = Config.model_validate(config or {})
    state = build_snapshot(c.nodes, [p for p in c.pods if p.running], list(c.pods), c.namespaces)
    batch = build_batch(state, list(c.pods), cfg)
    return batch, Scorer(state, cfg, batch_demand(batch))


def test_a_gang_whose_second_group_does_not_fit_after_the_first_leaves_the_room_untouched() -> None:
    nodes = [node(f"n{i}", cpu="4", memory="64Gi") for i in range(100)]  # 400 cpu
    pods = _gang(300, 400, cpu="1") + [
        pod(f"train-big-{i}", cpu="2", memory="128Mi",
            annotations={"placer.io/gang": "train", "placer.io/gang-size": "400"}) for i in range(100)
    ]  # fmt: skip
    batch, scorer = _batch(nodes, pods)
    assert len(wholegang.plain_gangs(batch)) == 1 and len(batch.groups) == 2
    used = batch.snapshot.used.copy()
    assert wholegang.place_whole(batch, scorer, used) == {}  # 300 + 200 cpu > 400: none of it
    assert (used == batch.snapshot.used).all()


def test_best_fit_fills_the_fewest_nodes_and_water_filling_levels_them() -> None:
    free = np.array([[10, 100], [3, 100], [6, 100], [0, 100]], dtype=np.int64)  # cpu, pods
    vec = np.array([1, 1], dtype=np.int64)
    packed = wholegang.fill_counts(free, vec, 9, pack=True)
    assert packed is not None and packed.tolist() == [0, 3, 6, 0]  # least room first, two nodes
    assert wholegang.fill_counts(free, vec, 20, pack=True) is None  # 19 fit
    share = np.array([[0.0], [0.5], [0.2], [1.0]])  # cpu used before, of 10 each
    step = np.full((4, 1), 0.1)
    level = wholegang.fill_counts(free, vec, 9, pack=False, share=share, step=step)
    assert level is not None and level.sum() == 9
    after = share[:, 0] + level * 0.1
    assert level[3] == 0 and after[:3].max() - after[:3].min() <= 0.1 + 1e-9  # within one pod's step
