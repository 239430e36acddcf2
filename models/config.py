"""Engine configuration: strategy, priority stance, balance weights, solver limits."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "GROUP_BATCH_SIZE",
    "BalanceWeights",
    "Config",
    "ControllerConfig",
    "DefaultSpreadConstraint",
    "EvictionLimits",
    "LeaderElection",
    "PlanTimeouts",
    "PriorityConfig",
    "SolverConfig",
    "SpreadDefaults",
    "StrategyName",
    "TierScope",
]


class StrategyName(StrEnum):
    """The placement strategies (objective 4); their objectives live in ``placer.engine.objectives``."""

    BALANCE = "balance"
    SPREAD = "spread"
    PACK = "pack"


# The default of ``groupBatchSize``: the most pods one decision holds of gangs that compete for
# topology domains (ten default batches: on the offline topology-gang shapes, one decision of that
# size at the 0.1 s floor places as many groups as the whole backlog decided at once).
GROUP_BATCH_SIZE = 1000

PodClass = Literal["compressible", "incompressible", "balanced"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _default_class_weights() -> dict[PodClass, dict[str, float]]:
    # TBESK: a pod heavy in compressible resources (cpu, bandwidth) weighs those more when it
    # looks for a node; an incompressible-heavy pod (memory, disk) weighs memory and disk more.
    return {
        "compressible": {"cpu": 0.35, "memory": 0.15, "ephemeral-storage": 0.15, "placer.io/bandwidth": 0.35},
        "incompressible": {"cpu": 0.15, "memory": 0.35, "ephemeral-storage": 0.35, "placer.io/bandwidth": 0.15},
        "balanced": {"cpu": 0.25, "memory": 0.25, "ephemeral-storage": 0.25, "placer.io/bandwidth": 0.25},
    }


class BalanceWeights(_Strict):
    """Weights of the balance objective (see README, "Balance objective")."""

    resources: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth")
    intra_node: float = Field(1.0, ge=0, alias="intraNode")
    inter_node: float = Field(1.0, ge=0, alias="interNode")
    pod_class: float = Field(0.5, ge=0, alias="podClass")
    classes: dict[PodClass, dict[str, float]] = Field(default_factory=_default_class_weights)


TierScope = Literal["namespace", "cluster", "off"]


class PriorityConfig(_Strict):
    """``restartTiers``: where the restart tier (Always > OnFailure > Never) ranks pods of equal
    spec.priority. ``namespace`` (default): only pods of one namespace, so no tenant outranks
    another by its restart policy; ``cluster``: every pod (single-tenant clusters); ``off`` (or
    ``false``): pure Kubernetes, spec.priority alone. ``true`` reads as ``cluster``."""

    restart_tiers: TierScope = Field("namespace", alias="restartTiers")

    @field_validator("restart_tiers", mode="before")
    @classmethod
    def _booleans(cls, value: object) -> object:
        if value is True:
            return "cluster"
        if value is False:
            return "off"
        return value


class SolverConfig(_Strict):
    time_limit: float = Field(10.0, gt=0, alias="timeLimit")
    workers: int | None = Field(None, ge=1, alias="workers")  # None: one per core, at most 8
    seed: int = 0
    deterministic: bool = False
    # Above this many feasible nodes per pod group, variables are kept only for a candidate set.
    candidates: int = Field(24, ge=1)


class DefaultSpreadConstraint(_Strict):
    max_skew: int = Field(ge=1, alias="maxSkew")
    topology_key: str = Field(min_length=1, alias="topologyKey")
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = Field("ScheduleAnyway", alias="whenUnsatisfiable")


class SpreadDefaults(_Strict):
    """Cluster-default topology spreading (kube-scheduler's PodTopologySpread ``defaultingType``).

    ``System``: hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway (kube-scheduler's own
    default); ``List``: ``constraints``; ``None``: no default. Applied to pods without constraints
    of their own, with the selector of the ReplicaSets that select them.
    """

    defaulting_type: Literal["None", "System", "List"] = Field("None", alias="defaultingType")
    constraints: tuple[DefaultSpreadConstraint, ...] = ()

    @model_validator(mode="after")
    def _list_needs_constraints(self) -> SpreadDefaults:
        if self.defaulting_type == "List" and not self.constraints:
            raise ValueError("defaultingType List needs constraints")
        if self.defaulting_type != "List" and self.constraints:
            raise ValueError("constraints are only used with defaultingType List")
        return self


class RebalanceThresholds(_Strict):
    """Utilisation in percent of allocatable: above ``high`` a node gives pods, below ``low`` it
    takes them (the thesis's examples: 10-20 % and 80-90 %)."""

    low: float = Field(20.0, ge=0, le=100)
    high: float = Field(80.0, ge=0, le=100)

    @model_validator(mode="after")
    def _ordered(self) -> RebalanceThresholds:
        if not self.low < self.high:
            raise ValueError("need low < high")
        return self


class RebalanceLimits(_Strict):
    """Moves per rebalancing plan (one plan per period). The plan's and a namespace's limits scale
    with the cluster: each is the larger of its count and its percentage (``moves``,
    ``in_namespace``), so a scale-out of 50 empty nodes is not relieved 5 pods a period."""

    per_period: int = Field(5, ge=0, alias="perPeriod")  # moves per plan, at least...
    # ...or this percentage of the cluster's nodes (rounded up) when that is more; 0: perPeriod only
    per_period_percent: float = Field(45.0, ge=0, le=100, alias="perPeriodPercent")
    per_node: int = Field(2, ge=0, alias="perNode")  # moves off one node per plan
    per_namespace: int = Field(3, ge=0, alias="perNamespace")  # moves in one namespace per plan, at least...
    # ...or this percentage of the plan's limit (rounded up) when that is more; 0: perNamespace only
    per_namespace_percent: float = Field(50.0, ge=0, le=100, alias="perNamespacePercent")
    cooldown: float = Field(600.0, ge=0, alias="cooldownSeconds")  # a pod moved since is not moved again

    def moves(self, nodes: int) -> int:
        """The moves one plan may make in a cluster of ``nodes`` nodes."""
        return max(self.per_period, math.ceil(self.per_period_percent * nodes / 100 - 1e-9))

    def in_namespace(self, nodes: int) -> int:
        """The moves one plan may make in one namespace, in a cluster of ``nodes`` nodes."""
        return max(self.per_namespace, math.ceil(self.per_namespace_percent * self.moves(nodes) / 100 - 1e-9))


class RebalanceConfig(_Strict):
    """Dynamic rebalancing (the thesis's chapter 5): ``placer rebalance`` and the controller loop."""

    enabled: bool = False  # the controller's loop; False is the kill switch
    period: float = Field(30.0, gt=0, alias="periodSeconds")
    load: Literal["requests", "usage"] = "requests"  # what "load" means; fitting is always by requests
    usage_window: float = Field(300.0, gt=0, alias="usageWindowSeconds")  # usage is averaged over it
    usage_max_age: float = Field(120.0, gt=0, alias="usageMaxAgeSeconds")  # older samples are stale
    thresholds: RebalanceThresholds = Field(default_factory=RebalanceThresholds)
    # Per-resource weights of the node score (ImprovedLoadBalancePriority); they are normalised.
    weights: dict[str, float] = Field(default_factory=lambda: {"cpu": 0.5, "memory": 0.5})
    # The thesis's balance filter: a node whose 10 - |cpu use - memory use| x 10 is below this takes nothing.
    balance_floor: float = Field(0.0, ge=0, le=10, alias="balanceFloor")
    # A plan is kept only if imbalance (usage spread with load: usage) drops by at least this share.
    margin: float = Field(0.02, ge=0, lt=1)
    limits: RebalanceLimits = Field(default_factory=RebalanceLimits)
    # Always-tier pods move only if this is on, and then only pods of ReplicaSets with >= 2 ready replicas.
    move_always_tier: bool = Field(False, alias="moveAlwaysTier")

    @model_validator(mode="after")
    def _weights(self) -> RebalanceConfig:
        if not self.weights or any(w < 0 for w in self.weights.values()) or sum(self.weights.values()) <= 0:
            raise ValueError("weights need at least one positive weight and none negative")
        return self


class Config(_Strict):
    strategy: StrategyName = StrategyName.BALANCE
    scheduler_name: str = Field("placer", alias="schedulerName")
    priority: PriorityConfig = Field(default_factory=PriorityConfig)
    balance: BalanceWeights = Field(default_factory=BalanceWeights)
    solver: SolverConfig = Field(default_factory=SolverConfig)
    default_spread: SpreadDefaults = Field(default_factory=SpreadDefaults, alias="defaultSpread")
    rebalance: RebalanceConfig = Field(default_factory=RebalanceConfig)


class LeaderElection(_Strict):
    enabled: bool = True
    lease_name: str = Field("placer", alias="leaseName")
    namespace: str = "placer-system"
    lease_duration: int = Field(15, gt=0, alias="leaseDurationSeconds")
    renew_deadline: int = Field(10, gt=0, alias="renewDeadlineSeconds")
    retry_period: int = Field(2, gt=0, alias="retryPeriodSeconds")

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        if not self.lease_duration > self.renew_deadline > 1.2 * self.retry_period:
            raise ValueError("need leaseDurationSeconds > renewDeadlineSeconds > 1.2 x retryPeriodSeconds")
        return self


class PlanTimeouts(_Strict):
    await_gone: float = Field(120.0, gt=0, alias="awaitGoneSeconds")
    await_replacement: float = Field(60.0, gt=0, alias="awaitReplacementSeconds")
    await_room: float = Field(120.0, gt=0, alias="awaitRoomSeconds")


class EvictionLimits(_Strict):
    per_cycle: int = Field(100, ge=0, alias="perCycle")
    per_node: int = Field(2, ge=0, alias="perNode")
    move_cooldown: float = Field(600.0, ge=0, alias="moveCooldownSeconds")


class ControllerConfig(_Strict):
    """``placer run``: the in-cluster controller (a ConfigMap file, overridden by flags/env)."""

    scheduler_name: str = Field("placer", alias="schedulerName")
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    batch_window: float = Field(30.0, gt=0, alias="batchWindowSeconds")
    batch_size: int = Field(99, ge=1, alias="batchSize")
    # A batch holding a gang held to one topology domain takes the such gangs queued behind it up
    # to this many pods: they compete for the domains and are placed jointly (``cut_batch``).
    group_batch_size: int = Field(GROUP_BATCH_SIZE, ge=1, alias="groupBatchSize")
    label_check_period: float = Field(60.0, gt=0, alias="labelCheckPeriodSeconds")
    # Unused since informers never relist periodically (only after 410 Gone); kept so configs load.
    resync_period: float = Field(300.0, gt=0, alias="resyncPeriodSeconds")
    # Server-side timeoutSeconds of each watch; the client's read timeout is 10 s longer, so a watch
    # that goes silent without closing is restarted (resumed from its last resourceVersion) by then.
    watch_timeout: int = Field(60, ge=5, alias="watchTimeoutSeconds")
    # /healthz fails on a leader with pods pending and the API answering when no scheduling cycle has
    # completed for this many batch windows (at least 30 s).
    healthz_stall_windows: float = Field(4.0, gt=0, alias="healthzStallWindows")
    # /healthz fails while a batch's solve has run this many times its time limit (and at least
    # 30 s): a hung or runaway solve is visible, and a restart ends it.
    healthz_solve_overrun: float = Field(4.0, gt=1, alias="healthzSolveOverrun")
    # Anytime solving: a batch is solved while the next one gathers. With a full batch already
    # waiting, or its own pods two windows late, its solve gets engine.solver.timeLimit (the floor);
    # otherwise what is left of the waiting pods' batch window (all of it when none wait), at most
    # this many seconds.
    max_solve: float = Field(10.0, gt=0, alias="maxSolveSeconds")
    bind_workers: int = Field(8, ge=1, alias="bindWorkers")
    requeue_backoff: float = Field(5.0, gt=0, alias="requeueBackoffSeconds")
    max_requeue_backoff: float = Field(60.0, gt=0, alias="maxRequeueBackoffSeconds")
    metrics_port: int = Field(8080, ge=0, le=65535, alias="metricsPort")
    # The address /healthz, /readyz and /metrics listen on (all interfaces: the kubelet probes the
    # pod's IP; k8s/networkpolicy.yaml admits only this port).
    metrics_address: str = Field("0.0.0.0", min_length=1, alias="metricsAddress")
    api_qps: float = Field(50.0, gt=0, alias="apiQPS")  # client-side limit of API writes (kube-scheduler's default)
    api_burst: int = Field(100, ge=1, alias="apiBurst")
    # Events have a client and a limit of their own, as kube-scheduler's event broadcaster
    # (unset: the same numbers as apiQPS/apiBurst, on the separate client).
    event_qps: float | None = Field(None, gt=0, alias="eventQPS")
    event_burst: int | None = Field(None, ge=1, alias="eventBurst")
    dry_run: bool = Field(False, alias="dryRun")
    leader_election: LeaderElection = Field(default_factory=LeaderElection, alias="leaderElection")
    plan_timeouts: PlanTimeouts = Field(default_factory=PlanTimeouts, alias="planTimeouts")
    evictions: EvictionLimits = Field(default_factory=EvictionLimits)
    engine: Config = Field(default_factory=Config)
