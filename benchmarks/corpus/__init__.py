"""The public-family benchmark corpus: readers of the stored instances (``instances``) and the
benchmark that runs placer, kube-scheduler's simulation, the plain CP-SAT model and the greedy
heuristics on them (``python -m benchmarks.corpus``). Tests import the readers from here."""

from benchmarks.corpus.instances import (
    FAMILIES,
    FILL,
    PACKING_FAMILIES,
    TRACE_FAMILIES,
    Instance,
    draw,
    family_info,
    packing_instances,
    trace_instance,
    trace_shapes,
)

__all__ = [
    "FAMILIES",
    "FILL",
    "PACKING_FAMILIES",
    "TRACE_FAMILIES",
    "Instance",
    "draw",
    "family_info",
    "packing_instances",
    "trace_instance",
    "trace_shapes",
]
