"""Why the answer did not use a node: the rules evaluated on the answer's final state.

For a placed pod, each alternative node is judged as if the pod alone moved there from its node,
everything else staying where the answer put it: first the hard rules (its workload group's
domain, room, host ports, spreading and inter-pod affinity as the engine's ``TopologyState``
counts them), then, if the move breaks none, the objective levels in the order the solver fixes
them (kept on matching nodes, preferences, the strategy's cost): the first that ranks the node
worse decided. A node no level ranks worse is a tie, or one the solver did not reach (its status
and gap say so). For an unplaced pod the hard rules are asked of the final state as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from placer.engine import Fragmentation, PodMasks, ports_clash
from placer.explain.answer import Answer
from placer.explain.stories import Rule, Why
from placer.models import Pod

__all__ = ["TIE", "why_not"]

TIE = 1e-9  # strategy costs this close are equal


def why_not(
    answer: Answer,
    pod: Pod,
    vec: npt.NDArray[np.int64],
    masks: PodMasks,
    nodes: Sequence[int],
    chosen: int | None,
) -> dict[int, list[Why]]:
    """Per node of ``nodes`` (not ``chosen``), what kept ``pod`` off it in the answer."""
    if not nodes:
        return {}
    after = answer.after
    free = after.free.copy()
    if chosen is not None:
        free[chosen] += vec
    at = np.array(nodes, dtype=np.int64)
    hard = {n: _hard(answer, pod, vec, free, n, chosen) for n in nodes}
    for n, rule in zip(nodes, _topology(answer, pod, at, chosen), strict=True):
        hard[n].extend(rule)
    if chosen is None:
        fallback = Why(Rule.GANG) if pod.gang_key else None
        result = answer.outcome.result
        solver = Why(Rule.SOLVER, status=result.status, gap=result.metrics.gap)
        return {n: whys or [fallback or solver] for n, whys in hard.items()}
    soft = _objective(answer, pod, vec, masks, [n for n in nodes if not hard[n]], chosen)
    return {n: hard[n] or soft[n] for n in nodes}


def _hard(
    answer: Answer, pod: Pod, vec: npt.NDArray[np.int64], free: npt.NDArray[np.int64], n: int, chosen: int | None
) -> list[Why]:
    after = answer.after
    out: list[Why] = []
    if chosen is not None:
        for level in pod.group_domains:
            domain = after.nodes[chosen].labels.get(level.key)
            here = after.nodes[n].labels.get(level.key)
            if here != domain:
                out.append(Why(Rule.GANG_DOMAIN, group=level.group, key=level.key, domain=domain, here=here))
    others = [k for k in answer.on_node.get(n, []) if k != pod.key]
    short = {r: int(vec[j] - free[n, j]) for j, r in enumerate(after.resources) if vec[j] > free[n, j]}
    if short:
        out.append(Why(Rule.ROOM, short=short, taken_by=others))
    if pod.host_ports and ports_clash(pod.host_ports, after.ports.get(n, [])):
        out.append(Why(Rule.PORTS, taken_by=others))
    return out


def _topology(answer: Answer, pod: Pod, nodes: npt.NDArray[np.int64], chosen: int | None) -> list[list[Why]]:
    """Per node, the spreading and inter-pod filters that refuse one more pod of its group there."""
    rules = answer.rules
    gi = rules.group_of.get(pod.key) if rules is not None else None
    if rules is None or gi is None:
        return [[] for _ in nodes]
    if chosen is not None:
        rules.state.add(gi, chosen, -1)
    try:
        checks = rules.state.checks(gi, nodes)
    finally:
        if chosen is not None:
            rules.state.add(gi, chosen, 1)
    return [[Why(Rule.TOPOLOGY, filter=str(what)) for ok, what in checks if not ok[i]] for i in range(len(nodes))]


def _objective(
    answer: Answer,
    pod: Pod,
    vec: npt.NDArray[np.int64],
    masks: PodMasks,
    nodes: Sequence[int],
    chosen: int,
) -> dict[int, list[Why]]:
    """The first objective level that ranks each node worse than ``chosen`` (lexicographic, as
    the solver fixes them)."""
    if not nodes:
        return {}
    rules = answer.rules
    gi = rules.group_of.get(pod.key) if rules is not None else None
    preference = rules.batch.groups[gi].masks.preference if rules is not None and gi is not None else masks.preference
    used = answer.after.used.copy()
    used[chosen] -= vec
    at = np.array([*nodes, chosen], dtype=np.int64)
    costs = answer.scorer.delta(vec, at, used)
    mine = float(costs[-1])
    result = answer.outcome.result
    strategy = answer.scorer.strategy
    term = f"{strategy.name} + GPU fragmentation" if isinstance(strategy, Fragmentation) else str(strategy.name)
    out: dict[int, list[Why]] = {}
    for n, cost in zip(nodes, costs[:-1].tolist(), strict=True):
        if masks.binding == "relaxed" and masks.matching[chosen] and not masks.matching[n]:
            out[n] = [Why(Rule.MATCHING)]
        elif preference[n] < preference[chosen]:
            out[n] = [Why(Rule.PREFERENCE, cost=float(preference[n]), chosen_cost=float(preference[chosen]))]
        elif preference[n] > preference[chosen]:
            out[n] = [Why(Rule.SOLVER, status=result.status, gap=result.metrics.gap)]
        elif cost > mine + TIE:
            out[n] = [Why(Rule.STRATEGY, cost=round(cost, 6), chosen_cost=round(mine, 6), term=term)]
        elif cost >= mine - TIE:
            out[n] = [Why(Rule.TIE, cost=round(cost, 6), chosen_cost=round(mine, 6), term=term)]
        else:
            out[n] = [
                Why(
                    Rule.SOLVER,
                    cost=round(cost, 6),
                    chosen_cost=round(mine, 6),
                    term=term,
                    status=result.status,
                    gap=result.metrics.gap,
                )
            ]
    return out
