"""Host ports: two pods of the batch that use the same hostPort/protocol (and clashing hostIP)
never share a node. Conflicts with running pods were removed by the prefilter."""

from __future__ import annotations

from placer.engine.model import Model
from placer.engine.prefilter import ports_clash

__all__ = ["build"]


def build(model: Model) -> None:
    groups = model.batch.groups
    with_ports = [gi for gi, g in enumerate(groups) if g.has_ports]
    if not with_ports:
        return
    for entries in model.by_node.values():
        local = [(gi, var) for gi, var in entries if groups[gi].has_ports]
        for a in range(len(local)):
            for b in range(a + 1, len(local)):
                ga, gb = groups[local[a][0]], groups[local[b][0]]
                if ports_clash(ga.pods[0].host_ports, gb.pods[0].host_ports):
                    model.cp.add(local[a][1] + local[b][1] <= 1)
