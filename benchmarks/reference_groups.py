"""A yardstick for placing competing workload groups: the plain CP-SAT model of issue 30.

``cpsat_groups`` takes a cluster whose pending pods (awaiting ``scheduler_name``) belong to gangs
each required in one domain of a node label (Kubernetes 1.37 PodGroups with ``minCount`` = their
size and ``schedulingConstraints.topology[0].key``, as ``benchmarks/workloads.py`` generates) and
solves one textbook model with the whole time limit:

- one boolean x[g, d] per group and domain of its key (at most one true: the group's domain),
- integer counts y[g, n] of the group's pods per node, summing over each domain's nodes to the
  group's size when x[g, d] and to 0 otherwise (all-or-nothing, all in one domain),
- capacity per node and resource (the ``pods`` slot count included; free room as
  ``benchmarks.reference.problem`` computes it),
- objective: groups placed, then pods placed (one weighted sum), no hint, no symmetry breaking,
  no search tricks; workers as placer's configuration uses them (``reference.placer_workers``).

Every pod of a group must ask for the same resources (true of the generated instances); nothing
else (labels beyond the key, taints, priorities, running members) is modelled. The answer (pod
key -> node name) goes to the independent validator like any other.
"""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from benchmarks.reference import Answer, placer_workers, problem
from placer.models import Cluster, Config

__all__ = ["cpsat_groups"]


def cpsat_groups(cluster: Cluster, time_limit: float, *, scheduler_name: str = "placer") -> Answer:
    """The plain groups model (module docstring), solved once with the whole ``time_limit``
    (model building included)."""
    started = time.perf_counter()
    prob = problem(cluster, scheduler_name)
    demand_of = {key: prob.demand[g] for g, keys in enumerate(prob.members) for key in keys}
    pending = [p for p in cluster.pods if p.awaits(scheduler_name)]
    groups: dict[str, list[str]] = {}
    label: dict[str, str] = {}
    for pod in pending:
        if pod.gang is None or not pod.group_domains:
            raise ValueError(f"{pod.key}: not a member of a gang held in one domain")
        groups.setdefault(pod.gang, []).append(pod.key)
        label[pod.gang] = pod.group_domains[0].key
    node_of = {name: b for b, name in enumerate(prob.bins)}
    model = cp_model.CpModel()
    chosen: dict[tuple[str, str], cp_model.IntVar] = {}  # (group, domain) -> x
    counts: dict[tuple[str, int], cp_model.IntVar] = {}  # (group, node) -> y
    for name, keys in sorted(groups.items()):
        need = demand_of[keys[0]]
        if any((demand_of[k] != need).any() for k in keys):
            raise ValueError(f"gang {name}: its pods ask for different resources")
        size = len(keys)
        domains: dict[str, list[int]] = {}
        for node in cluster.nodes:
            value = node.labels.get(label[name])
            if value is not None:
                domains.setdefault(value, []).append(node_of[node.name])
        picks = []
        for value, nodes in sorted(domains.items()):
            x = model.new_bool_var(f"x_{name}_{value}")
            picks.append(x)
            chosen[name, value] = x
            ys = []
            for b in nodes:
                room = prob.free[b]
                most = min([size] + [int(room[r] // need[r]) for r in range(len(need)) if need[r] > 0])
                if most > 0:
                    y = model.new_int_var(0, most, f"y_{name}_{b}")
                    counts[name, b] = y
                    ys.append(y)
            model.add(sum(ys) == size * x)
        model.add_at_most_one(picks)
    per_node: dict[int, list[tuple[str, cp_model.IntVar]]] = {}
    for (name, b), y in counts.items():
        per_node.setdefault(b, []).append((name, y))
    for b, row in per_node.items():
        for r in range(len(prob.resources)):
            terms = [int(demand_of[groups[name][0]][r]) * y for name, y in row if demand_of[groups[name][0]][r] > 0]
            if terms:
                model.add(sum(terms) <= int(prob.free[b][r]))
    pods = sum(len(k) for k in groups.values())
    placed_groups = sum(chosen.values())
    placed_pods = sum(len(groups[name]) * x for (name, _), x in chosen.items())
    model.maximize((pods + 1) * placed_groups + placed_pods)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit - (time.perf_counter() - started), 0.01)
    solver.parameters.num_workers = placer_workers(Config())
    status = solver.solve(model)
    placements: dict[str, str] = {}
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        members = {name: iter(keys) for name, keys in groups.items()}
        for (name, b), y in sorted(counts.items()):
            for _ in range(solver.value(y)):
                placements[next(members[name])] = prob.bins[b]
    return Answer(placements, time.perf_counter() - started, solver.status_name(status))
