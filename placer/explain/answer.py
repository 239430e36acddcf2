"""The answer's final state, shared by every pod explained from one solve.

Built once per solve: where the answer put each pod of the batch, the pods it put on each node, the
strategy's scorer as the decision built it, and (only when some rule of the batch looks at other
pods) the batch's topology rules with the answer's pods counted in, so that a question "could
this pod have gone to node n instead?" is asked of the engine's own rules, not of a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from placer.engine import (
    Batch,
    Prefilter,
    Scorer,
    Snapshot,
    TopologyState,
    build_batch,
    pod_vector,
    uses_topology,
    with_default_spread,
)
from placer.models import Cluster, Config, Pod
from placer.service import Outcome, pending_batch

__all__ = ["Answer", "Rules"]


@dataclass(frozen=True)
class Rules:
    """The batch's topology rules on the answer's final state (the engine's ``TopologyState``)."""

    batch: Batch
    state: TopologyState
    group_of: dict[str, int]  # pod key -> its batch group


@dataclass
class Answer:
    cluster: Cluster
    config: Config
    outcome: Outcome
    pending: list[Pod] = field(init=False)  # the batch, with the configured default spreading
    placed: dict[str, int] = field(init=False)  # pod key -> node index (pending pods placed)
    on_node: dict[int, list[str]] = field(init=False)  # node -> pods the answer put there

    def __post_init__(self) -> None:
        pods, _ = pending_batch(self.cluster, self.config.scheduler_name)
        self.pending = with_default_spread(pods, self.cluster.replicasets, self.config.default_spread)
        index = self.after.index
        self.placed = {}
        self.on_node = {}
        for p in self.outcome.result.placements:
            n = index[p.node]
            self.on_node.setdefault(n, []).append(p.pod or f"replacement of {p.replaces}")
            if p.pod is not None and p.kind == "pending":
                self.placed[p.pod] = n

    @property
    def after(self) -> Snapshot:
        return self.outcome.after

    def pod(self, key: str) -> Pod | None:
        """The batch's pod ``key`` as the engine placed it (default spreading added)."""
        return next((p for p in self.pending if p.key == key), None)

    @property
    def before(self) -> Snapshot:
        return self.outcome.before

    @cached_property
    def prefilter(self) -> Prefilter:
        """The filters on the cluster as it was before the batch."""
        return Prefilter(self.before)

    @cached_property
    def scorer(self) -> Scorer:
        """The strategy as the decision scored it (the engine's ``Scorer`` of the batch: the
        cluster before the batch, the whole batch's demand to come), for a pod alone on the
        cluster before the batch and for a pod moved on the answer's final state alike."""
        demand = np.zeros(len(self.before.resources), dtype=np.int64)
        for pod in self.pending:
            demand += pod_vector(pod, self.before.resources)
        return Scorer(self.before, self.config, demand)

    @cached_property
    def rules(self) -> Rules | None:
        """The batch's topology rules with the answer's pods counted in; None when no rule of
        the batch or of a running pod looks at other pods."""
        base = self.after.copy()
        by_key = {p.key: p for p in self.pending}
        for key, n in self.placed.items():
            base.remove(by_key[key], n)
        if base.watchers == 0 and not any(uses_topology(p) for p in self.pending):
            return None
        batch = build_batch(base, self.pending, self.config)
        if batch.topology.empty:
            return None
        group_of = {p.key: gi for gi, g in enumerate(batch.groups) for p in g.pods}
        state = TopologyState(batch.topology, [g.size for g in batch.groups])
        for key, n in self.placed.items():
            if key in group_of:
                state.add(group_of[key], n)
        return Rules(batch=batch, state=state, group_of=group_of)
