"""What a solve returns: the JSON output contract (README, "Output contract"), as models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from placer.models.codes import Policy, SolveStatus, UnplacedCode
from placer.models.reasons import Reason
from placer.models.steps import StepKind, step_kind

__all__ = [
    "SCHEMA_VERSION",
    "BudgetStop",
    "Cause",
    "Eviction",
    "EvictionChoice",
    "EvictionDetail",
    "Metrics",
    "NamespaceCounts",
    "Placement",
    "Result",
    "Step",
    "Summary",
    "Unplaced",
    "compare_schema",
    "describe_eviction",
    "eviction_cause",
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


_CHOICES: dict[str, str] = {
    "move": "a move keeps it running (its owner re-creates it)",
    "lowest-key": "no lower-key pod on the node could make the room",
    "fewest-evictions": "a lower-key pod stays: this needed fewer evictions",
}


def _lacked(where: str, short_of: list[str]) -> str:
    return f"{where} lacked {', '.join(short_of)} for what the plan binds there"


def describe_eviction(kind: str, node: str, to: str | None, for_: list[str], detail: EvictionDetail) -> str:
    """An eviction's reason in words, e.g. 'preempted for ns/web, which outranks it; node a lacked
    cpu for what the plan binds there; the lowest key on the node'."""
    parts = [f"moved to {to}" if kind == "move" else "preempted"]
    if for_:
        parts[0] += f" to make room for {', '.join(for_)}"
    if detail.outranked_by:
        parts.append(f"outranked by {', '.join(detail.outranked_by)}")
    if detail.short_of:
        parts.append(_lacked(f"node {node}", detail.short_of))
    parts.append(_CHOICES[detail.choice])
    return "; ".join(parts)


class Eviction(_Out):
    pod: str
    node: str
    kind: Literal["move", "preempt"]
    to: str | None = None
    for_: list[str] = Field(default_factory=list, alias="for")
    reason: str | None = None  # ``detail`` in words
    detail: EvictionDetail | None = None


def eviction_cause(e: Eviction) -> str:
    """What an eviction's reason says beyond the pod itself (its node, its destination, the pods it
    makes room for): the words evictions for the same cause share, e.g. 'preempted; outranked by
    the pods it makes room for; its node lacked cpu for what the plan binds there; no lower-key pod
    on the node could make the room'."""
    kind = "moved" if e.kind == "move" else "preempted"
    if e.detail is None:
        return kind
    parts = [kind]
    if e.detail.outranked_by:
        same = sorted(e.detail.outranked_by) == sorted(e.for_)
        parts.append(f"outranked by {'the pods it makes room for' if same else ', '.join(e.detail.outranked_by)}")
    if e.detail.short_of:
        parts.append(_lacked("its node", e.detail.short_of))
    parts.append(_CHOICES[e.detail.choice])
    return "; ".join(parts)


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


class BudgetStop(_Out):
    """A rebalancing limit the plan reached while pods it had ready to move stayed: ``key`` the
    setting that gave the limit (``rebalance.limits.`` ``perPeriod`` or ``perPeriodPercent``,
    ``perNamespace`` or ``perNamespacePercent``, ``perNode``; or ``PodDisruptionBudget``),
    ``scopes`` the namespaces, giving nodes or budgets (ns/name) where it bound, ``limit`` the
    moves (disruptions) it allows in each, ``ready`` the offered pods in those scopes that stayed.
    What raising it would do comes from a second plan made with only this limit lifted:
    ``raisedTo`` the most that plan uses of it in one scope, ``more`` the moves it adds,
    ``spread`` and ``hot`` the balance it reaches. ``placer rebalance`` makes that plan and lists
    only the limits without which the plan makes more moves; the controller does not make it
    (then these are None and every limit reached is listed)."""

    key: str
    scopes: list[str] = Field(default_factory=list)
    limit: int = 0
    ready: int = 0
    raised_to: int | None = Field(None, alias="raisedTo")
    more: int | None = None
    spread: float | None = None
    hot: int | None = None


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
    stops: list[BudgetStop] = Field(default_factory=list)  # the budgets that held the plan back


class Cause(_Out):
    """Evictions of one kind for one cause (``eviction_cause``): the words their reasons share."""

    kind: Literal["move", "preempt"]
    reason: str
    evictions: int


class NamespaceCounts(_Out):
    binds: int = 0  # pending pods and replacements bound in the namespace
    moves: int = 0
    preemptions: int = 0
    unplaced: int = 0


class Summary(_Out):
    """The answer in one line: what it evicts and binds, per namespace and per cause."""

    evictions: int = 0
    moves: int = 0
    preemptions: int = 0
    binds: int = 0  # pending pods bound and replacements bound
    replacements: int = 0
    unplaced: int = 0
    unplaced_codes: dict[str, int] = Field(default_factory=dict, alias="unplacedCodes")
    namespaces: dict[str, NamespaceCounts] = Field(default_factory=dict)  # sorted by name
    causes: list[Cause] = Field(default_factory=list)  # most evictions first


def _namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def summarize(placements: list[Placement], evictions: list[Eviction], unplaced: list[Unplaced]) -> Summary:
    spaces: dict[str, NamespaceCounts] = {}

    def count(key: str, field: str) -> None:
        row = spaces.setdefault(_namespace(key), NamespaceCounts())
        setattr(row, field, getattr(row, field) + 1)

    for p in placements:
        count(p.pod or p.replaces or "", "binds")
    for e in evictions:
        count(e.pod, "moves" if e.kind == "move" else "preemptions")
    for u in unplaced:
        count(u.pod, "unplaced")
    causes: dict[tuple[Literal["move", "preempt"], str], int] = {}
    for e in evictions:
        causes[(e.kind, eviction_cause(e))] = causes.get((e.kind, eviction_cause(e)), 0) + 1
    codes: dict[str, int] = {}
    for u in unplaced:
        codes[u.code] = codes.get(u.code, 0) + 1
    moves = sum(1 for e in evictions if e.kind == "move")
    return Summary(
        evictions=len(evictions),
        moves=moves,
        preemptions=len(evictions) - moves,
        binds=len(placements),
        replacements=sum(1 for p in placements if p.kind == "replacement"),
        unplaced=len(unplaced),
        unplaced_codes=dict(sorted(codes.items())),
        namespaces=dict(sorted(spaces.items())),
        causes=[
            Cause(kind=k, reason=r, evictions=n) for (k, r), n in sorted(causes.items(), key=lambda c: (-c[1], c[0]))
        ],
    )


# 2: evictions gained reason and detail; 3: unplaced code Invalid, detail.invalid and detail.pdbs;
# 4: steps' waitSeconds, and the rebalance section of ``placer rebalance``; 5: metrics.read_seconds;
# 6: summary, and the rebalance section's stops.
# 7: ``placer explain`` prints one story per pod named (``explanations``), each with its rules.
SCHEMA_VERSION = 7


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

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> Summary:
        """The answer in one line (README, "Output contract"): derived, never set."""
        return summarize(self.placements, self.evictions, self.unplaced)

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
        head = {k: data.pop(k) for k in ("schemaVersion", "status", "policy", "summary")}
        return {**head, **data}


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
