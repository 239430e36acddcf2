"""Pods left unplaced in groups alike but for their gang (hundreds of small gangs of one shape)
share one diagnosis (``unplaced.extract``): every pod's code and reason are those a diagnosis of
its own gives. Random clusters of racks with a tainted node, gangs of a few request shapes, some
tolerating the taint or selecting a rack, some asking for a host port, plain pods beside them;
the answers go through the independent validator (``support.validated``)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from support import DETERMINISTIC, validated
from workload_builders import RACK, dump, node, pod, pod_group

from placer.models import Cluster, Config
from placer.service import SolveOptions, solve_cluster

unplaced_module = importlib.import_module("placer.engine.unplaced")
SHAPES = ("1", "2", "3")


def _cluster(seed: int) -> Cluster:
    """Three racks of 2-4 nodes of 4 cpu (the first node tainted), and 10-20 gangs of 1-4 pods,
    more than fit: each of one cpu shape, some tolerating the taint, selecting rack r1 or asking
    for host port 80; two plain pods of each shape that fit nowhere (5 cpu)."""
    rng = np.random.default_rng(seed)
    items: list[Any] = []
    for r in range(3):
        for i in range(int(rng.integers(2, 5))):
            items.append(node(f"r{r}-{i}", 4, rack=f"r{r}"))
    items[0]["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
    for g in range(int(rng.integers(10, 21))):
        size = int(rng.integers(1, 5))
        items.append(pod_group(f"g{g}", size))
        cpu = str(rng.choice(SHAPES))
        tolerates, selects, ported = rng.random() < 0.3, rng.random() < 0.3, rng.random() < 0.2
        for i in range(size):
            member = pod(f"g{g}-{i}", f"g{g}", cpu=cpu, created=f"2026-01-01T00:{g:02d}:{i:02d}Z")
            if tolerates:
                member["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
            if selects:
                member["spec"]["nodeSelector"] = {RACK: "r1"}
            if ported:
                member["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
            items.append(member)
    items += [pod(f"big-{k}", cpu="5") for k in range(2)]
    return dump(items)


def _unplaced(c: Cluster) -> list[tuple[str | None, str, str]]:
    config = Config.model_validate(DETERMINISTIC)
    outcome = solve_cluster(c, SolveOptions(policy="placer", config=config))
    validated(c, outcome, config, "placer")
    return [(u.pod, u.code, u.reason) for u in outcome.result.unplaced]


@pytest.mark.parametrize("seed", range(10))
def test_groups_alike_share_the_diagnosis_each_would_get(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    c = _cluster(seed)
    shared = _unplaced(c)
    with monkeypatch.context() as patch:  # every pod its own diagnosis
        patch.setattr(unplaced_module, "diagnosis_signature", lambda pod: (pod.key,))
        assert shared == _unplaced(c)
    assert len({reason for _, _, reason in shared}) > 1
    assert sum(1 for key, _, _ in shared if key is not None and key.startswith("ml/g")) > 1
