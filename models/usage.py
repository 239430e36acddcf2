"""Measured resource usage (``metrics.k8s.io``), for rebalancing by real load (issue 15)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PodUsage", "Usage"]


class PodUsage(BaseModel):
    """One sample of one pod: the sum over its containers, as metrics-server reports it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str = "default"
    name: str
    timestamp: float  # seconds since the epoch, the end of the sample's window
    window: float = 0.0  # seconds the sample averages over
    usage: dict[str, int] = Field(default_factory=dict)  # cpu in millicores, memory in bytes

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Usage(BaseModel):
    """Samples of pods' usage, possibly several per pod (the controller keeps a window of them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    samples: tuple[PodUsage, ...] = ()
