"""Engine configuration: strategy, priority stance, balance weights, solver limits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BalanceWeights", "Config", "PriorityConfig", "SolverConfig"]

Strategy = Literal["balance", "spread", "pack"]
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


class PriorityConfig(_Strict):
    restart_tiers: bool = Field(True, alias="restartTiers")


class SolverConfig(_Strict):
    time_limit: float = Field(10.0, gt=0, alias="timeLimit")
    workers: int = Field(8, ge=1, alias="workers")
    seed: int = 0
    deterministic: bool = False
    # Above this many feasible nodes per pod group, variables are kept only for a candidate set.
    candidates: int = Field(24, ge=1)


class Config(_Strict):
    strategy: Strategy = "balance"
    scheduler_name: str = Field("placer", alias="schedulerName")
    priority: PriorityConfig = Field(default_factory=PriorityConfig)
    balance: BalanceWeights = Field(default_factory=BalanceWeights)
    solver: SolverConfig = Field(default_factory=SolverConfig)
