"""What a solve returns: the JSON output contract (README, "Output contract"), as models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from placer.models.codes import Policy, SolveStatus, UnplacedCode
from placer.models.reasons import Reason
from placer.models.steps import StepKind, step_kind

__all__ = [
    "SCHEMA_VERSION",
    "Eviction",
    "EvictionChoice",
    "EvictionDetail",
    "Metrics",
    "Placement",
    "Result",
    "Step",
    "Unplaced",
    "compare_schema",
    "describe_eviction",
    "result_schema",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Placement(_Out):
    pod: str | None
    node: str
    kind: Literal["pending", "replacement"] = "pending"
    replaces: str | None = None
    owner: str | None = None


class Unplaced(_Out):
    pod: str
    code: UnplacedCode
    reason: str  # kube-scheduler's words: ``describe(detail)``
    detail: Reason | None = None  # the same as data


EvictionChoice = Literal["move", "lowest-key", "fewest-evictions"]


class EvictionDetail(_Out):
    """Why a pod is evicted, as data: what the pods it makes room for lacked on its node
    (``shortOf``: resources, or empty when room was not the problem there, e.g. a move that frees a
    chain), which of them outrank it (a preemption's preemptors), and why this victim
    (``choice``): ``move`` (it keeps running, its replacement is bound elsewhere), ``lowest-key``
    (no pod of a lower key on the node could have made the room) or ``fewest-evictions`` (a
    lower-key pod stays because evicting this one needed fewer evictions in all)."""

    short_of: list[str] = Field(default_factory=list, alias="shortOf")
    outranked_by: list[str] = Field(default_factory=list, alias="outrankedBy")
    choice: EvictionChoice


def describe_eviction(kind: str, node: str, to: str | None, for_: list[str], detail: EvictionDetail) -> str:
    """An eviction's reason in words, e.g. 'preempted for ns/web, which outranks it; node a lacked
    cpu for what the plan binds there; the lowest key on the node'."""
    parts = [f"moved to {to}" if kind == "move" else "preempted"]
    if for_:
        parts[0] += f" to make room for {', '.join(for_)}"
    if detail.outranked_by:
        parts.append(f"outranked by {', '.join(detail.outranked_by)}")
    if detail.short_of:
        parts.append(f"node {node} lacked {', '.join(detail.short_of)} for what the plan binds there")
    choices = {
        "move": "a move keeps it running (its owner re-creates it)",
        "lowest-key": "no lower-key pod on the node could make the room",
        "fewest-evictions": "a lower-key pod stays: this needed fewer evictions",
    }
    parts.append(choices[detail.choice])
    return "; ".join(parts)


class Eviction(_Out):
    pod: str
    node: str
    kind: Literal["move", "preempt"]
    to: str | None = None
    for_: list[str] = Field(default_factory=list, alias="for")
    reason: str | None = None  # ``detail`` in words
    detail: EvictionDetail | None = None


class Step(_Out):
    """One step of a plan. ``pod`` names the pod it acts on; a replacement's bind has no pod yet
    (its owner creates it) and names the pod it ``replaces`` instead."""

    id: int
    op: str  # a registered step kind (placer.models.steps)
    pod: str | None
    node: str
    after: list[int] = Field(default_factory=list)
    replaces: str | None = None
    # Seconds this step may wait beyond the plan's timeouts (a Job's backoff before it recreates
    # an evicted pod); 0 for most steps.
    wait: float = Field(0.0, ge=0, alias="waitSeconds")

    @field_validator("op")
    @classmethod
    def _known(cls, op: str) -> str:
        step_kind(op)
        return op

    @model_validator(mode="after")
    def _names_one_pod(self) -> Step:
        if (self.pod is None) == (self.replaces is None):
            raise ValueError("a step names either a pod or the pod it replaces")
        return self

    @property
    def kind(self) -> StepKind:
        return step_kind(self.op)

    @property
    def subject(self) -> str:
        """The pod in words: its key, or 'replacement of KEY'."""
        return self.pod if self.pod is not None else f"replacement of {self.replaces}"


class Metrics(_Out):
    placed: int = 0
    replacements: int = 0
    moved: int = 0
    preempted: int = 0
    unplaced: int = 0
    imbalance: float = 0.0
    std_score: float = 0.0
    solve_seconds: float = 0.0  # deciding: from the cluster model to the answer
    read_seconds: float = 0.0  # reading the input into the cluster model (0 when not timed)
    gap: float = 0.0


class Balance(_Out):
    """How evenly loaded the nodes are (README, "Reading the numbers"): ``imbalance`` and
    ``std_score`` by requests, ``spread`` the std_score of the load rebalancing reads (requests or
    usage, weighted resources), ``hot`` the nodes above the high threshold."""

    imbalance: float = 0.0
    std_score: float = Field(0.0, alias="stdScore")
    spread: float = 0.0
    hot: int = 0


class NodeLoad(_Out):
    node: str
    role: Literal["gives", "takes", ""] = ""
    score: float = 0.0  # the thesis's node score before (> 0 lighter than the cluster)
    before: dict[str, float] = Field(default_factory=dict)  # utilisation per weighted resource
    after: dict[str, float] = Field(default_factory=dict)


class RebalanceReport(_Out):
    """``placer rebalance``: the plan's why and its effect (the moves are the result's evictions)."""

    load: Literal["requests", "usage"] = "requests"
    kept: bool = False  # the plan is made (its moves are the evictions)
    why: str = ""  # why there is no plan, or what it achieves
    low: float = 0.0  # thresholds, percent
    high: float = 0.0
    before: Balance = Field(default_factory=Balance)
    after: Balance = Field(default_factory=Balance)
    nodes: list[NodeLoad] = Field(default_factory=list)  # givers and takers
    skipped: dict[str, str] = Field(default_factory=dict)  # pods on giving nodes that may not move, and why
    fallbacks: list[str] = Field(default_factory=list)  # pods read by requests: no fresh usage sample


# 2: evictions gained reason and detail; 3: unplaced code Invalid, detail.invalid and detail.pdbs;
# 4: steps' waitSeconds, and the rebalance section of ``placer rebalance``; 5: metrics.read_seconds;
# 6: ``placer explain`` prints one story per pod named (``explanations``), each with its rules.
SCHEMA_VERSION = 6


class Result(_Out):
    schema_version: int = Field(SCHEMA_VERSION, alias="schemaVersion")
    status: SolveStatus = "optimal"
    policy: Policy = "placer"
    placements: list[Placement] = Field(default_factory=list)
    unplaced: list[Unplaced] = Field(default_factory=list)
    evictions: list[Eviction] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    metrics: Metrics = Field(default_factory=Metrics)
    rebalance: RebalanceReport | None = None

    def contract(self) -> dict[str, object]:
        """The JSON output contract's shape, arrays sorted by pod name."""
        data = self.model_dump(by_alias=True, exclude_none=False)
        data["placements"] = [
            {k: v for k, v in p.items() if v is not None or k == "pod"}
            for p in sorted(data["placements"], key=_placement_sort)
        ]
        data["unplaced"] = [
            {k: v for k, v in u.items() if v is not None or k != "detail"}
            for u in sorted(data["unplaced"], key=lambda u: u["pod"])
        ]
        data["evictions"] = sorted(data["evictions"], key=lambda e: e["pod"])
        data["steps"] = [
            {k: v for k, v in st.items() if (v is not None or k == "pod") and not (k == "waitSeconds" and not v)}
            for st in data["steps"]
        ]
        if data["rebalance"] is None:
            del data["rebalance"]  # only ``placer rebalance`` answers have it
        return data


def _placement_sort(p: dict[str, object]) -> str:
    return str(p["pod"] if p["pod"] is not None else p.get("replaces"))


def result_schema() -> dict[str, Any]:
    """The JSON Schema of ``placer solve -o json`` (versioned by ``schemaVersion``)."""
    return Result.model_json_schema(by_alias=True, mode="serialization")


def compare_schema() -> dict[str, Any]:
    """The JSON Schema of ``placer solve --compare POLICY -o json``: placer's answer under
    ``result``, the simulation's under ``compare``, each a ``result`` document."""
    single = result_schema()
    defs = single.pop("$defs", {})
    return {
        "title": "Compare",
        "type": "object",
        "properties": {"result": single, "compare": {"$ref": "#/properties/result"}},
        "required": ["result", "compare"],
        "additionalProperties": False,
        "$defs": defs,
    }
