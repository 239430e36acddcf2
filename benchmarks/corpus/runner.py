"""One corpus instance through every method, each answer checked by the independent validator.

Methods, all at the same ``--time-limit`` and in the same run: ``placer`` (``solve_cluster``, what
``placer solve`` runs, default configuration), ``default`` (``--policy default``, kube-scheduler's
simulation), ``reference`` (``benchmarks.reference.cpsat``, the plain CP-SAT model given the whole
limit) and the greedy heuristics ``ffd``, ``bfd``, ``dot`` (``benchmarks.reference.HEURISTICS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks import reference
from benchmarks.corpus.instances import Instance
from benchmarks.solving import timed_solve
from placer.models import Cluster
from placer.validate import validate_placements

__all__ = ["GREEDY", "METHODS", "Row", "run_instance"]

GREEDY = tuple(reference.HEURISTICS)
METHODS = ("placer", "reference", *GREEDY, "default")


@dataclass
class Row:
    family: str
    kind: str
    name: str
    group: str
    pods: int
    nodes: int
    optimum: int | None
    limit: float
    placed: dict[str, int] = field(default_factory=dict)  # method -> pods placed
    seconds: dict[str, float] = field(default_factory=dict)  # method -> wall time of the call
    violations: dict[str, list[str]] = field(default_factory=dict)  # method -> validator findings
    status: dict[str, str] = field(default_factory=dict)  # placer's and the reference's status

    def packed(self, method: str) -> bool:
        """Every pod placed (for packing families: packed into the optimal node count)."""
        return self.placed[method] == self.pods

    @property
    def best_greedy(self) -> int:
        return max(self.placed[m] for m in GREEDY)


def _record(row: Row, cluster: Cluster, method: str, placements: dict[str, str], seconds: float) -> None:
    row.placed[method] = len(placements)
    row.seconds[method] = round(seconds, 4)
    row.violations[method] = validate_placements(cluster, placements)


def run_instance(inst: Instance, limit: float) -> Row:
    """Every method on ``inst`` (module docstring); validator findings kept per method."""
    cluster = inst.cluster()
    row = Row(inst.family, inst.kind, inst.name, inst.group, inst.pods, inst.nodes, inst.optimum, limit)
    for method, policy in (("placer", "placer"), ("default", "default")):
        timed = timed_solve(cluster, policy, time_limit=limit)
        placements = {p.pod: p.node for p in timed.outcome.result.placements if p.pod and p.kind == "pending"}
        _record(row, cluster, method, placements, timed.seconds)
        if method == "placer":
            row.status["placer"] = timed.outcome.result.status
    prob = reference.problem(cluster)
    answer = reference.cpsat(prob, limit)
    _record(row, cluster, "reference", answer.placements, answer.seconds)
    row.status["reference"] = answer.status
    for name, heuristic in reference.HEURISTICS.items():
        greedy = heuristic(prob)
        _record(row, cluster, name, greedy.placements, greedy.seconds)
    return row
