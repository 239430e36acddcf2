"""The pod annotations and labels placer reads, apart from what Kubernetes accounts for the pod.

The API server validates a pod's identity, node, phase and resources, but any string is a valid
annotation value: a value placer cannot read must affect only its own pod, never the whole input
or the other pods. So each value is read here, once, into a typed field; one that cannot be read
becomes a problem naming it, and gets its safe reading meanwhile:

- ``placer.io/gang-size``: no size (the gang is the members present);
- ``batch.kubernetes.io/job-completion-index``: none, and the pod counts as just moved (it is not
  moved: its replacement could not be told apart);
- ``placer.io/moved-at``: moved infinitely recently (never moved again until fixed);
- ``placer.io/evictable``: ``"false"`` (never evicted);
- ``placer.io/when-no-node-matches`` / ``when-no-node-fits``: ``wait``;
- ``placer.io/when-node-labels-change``: nothing is done.

The caller refuses a pending pod with a problem (code ``Invalid``); a running pod keeps running in
the model, with a warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from placer.inputs.stamps import parse_timestamp
from placer.models.integers import parse_int, shown

__all__ = [
    "COMPLETION_INDEX",
    "EVICTABLE",
    "GANG",
    "GANG_SIZE",
    "LABEL_POLICY",
    "MOVED_AT",
    "POD_GROUP",
    "WHEN_NO_NODE_FITS",
    "WHEN_NO_NODE_MATCHES",
    "PlacerFields",
    "read_placer_fields",
]

GANG = "placer.io/gang"
GANG_SIZE = "placer.io/gang-size"
POD_GROUP = "scheduling.x-k8s.io/pod-group"
MOVED_AT = "placer.io/moved-at"
EVICTABLE = "placer.io/evictable"
WHEN_NO_NODE_MATCHES = "placer.io/when-no-node-matches"
WHEN_NO_NODE_FITS = "placer.io/when-no-node-fits"
LABEL_POLICY = "placer.io/when-node-labels-change"
# An Indexed Job's pods carry their completion index here (annotation; a label too since 1.28).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

# Annotations with a fixed set of values: (values, the safe reading of an unknown one; None: drop it).
_CHOICES: dict[str, tuple[tuple[str, ...], str | None]] = {
    EVICTABLE: (("true", "false"), "false"),
    WHEN_NO_NODE_MATCHES: (("wait", "ignore-affinity"), "wait"),
    WHEN_NO_NODE_FITS: (("wait", "preempt", "ignore-affinity"), "wait"),
    LABEL_POLICY: (("reschedule", "kill", "ignore"), None),
}


@dataclass(frozen=True)
class PlacerFields:
    gang: str | None
    gang_size: int | None
    gang_object: Literal["workload", "plugins"] | None  # the PodGroup kind that declares the gang
    moved_at: float | None
    completion_index: int | None
    annotations: dict[str, str]  # as placer acts on them: an unreadable value has its safe reading
    problems: tuple[str, ...]  # one line per unreadable value, naming the field


def _gang_size(text: str) -> int | None:
    return parse_int(text, low=1, high=1_000_000, signed=False)


def _lookup(key: str, *maps: tuple[str, Mapping[str, str]]) -> tuple[str, str | None]:
    """(where, value) of a key placer reads from several maps, the first that has it winning."""
    return next(((where, m[key]) for where, m in maps if key in m), ("", None))


def _gang(
    labels: Mapping[str, str], annotations: Mapping[str, str], pod_group: str | None
) -> tuple[str | None, Literal["workload", "plugins"] | None]:
    """The pod's gang and the PodGroup kind that declares it (``placer.inputs.podgroups``):
    placer's own label or annotation first, then the Workload API's ``spec.schedulingGroup``, then
    scheduler-plugins' label."""
    own = labels.get(GANG) or annotations.get(GANG)
    if own:
        return own, None
    if pod_group:
        return pod_group, "workload"
    if labels.get(POD_GROUP):
        return labels[POD_GROUP], "plugins"
    return None, None


def read_placer_fields(
    labels: Mapping[str, str], annotations: Mapping[str, str], pod_group: str | None = None
) -> PlacerFields:
    """placer's fields of a pod from its labels and annotations (already known to be strings);
    ``pod_group`` is the pod's ``spec.schedulingGroup.podGroupName``."""
    problems: list[str] = []
    acted = dict(annotations)
    name, gang_object = _gang(labels, annotations, pod_group)
    size = None
    where, size_text = _lookup(GANG_SIZE, ("labels", labels), ("annotations", annotations))
    if size_text is not None:
        size = _gang_size(size_text)
        if size is None:
            problems.append(f"metadata.{where}[{GANG_SIZE}]: must be a positive integer, got {shown(size_text)}")
    index = None
    where, index_text = _lookup(COMPLETION_INDEX, ("annotations", annotations), ("labels", labels))
    if index_text is not None:
        index = parse_int(index_text, low=0, high=2**31 - 1, signed=False)
        if index is None:
            problems.append(
                f"metadata.{where}[{COMPLETION_INDEX}]: expected a non-negative integer, got {shown(index_text)} "
                "(the pod counts as just moved)"
            )
    moved_at = None if index_text is None or index is not None else math.inf
    if MOVED_AT in annotations and moved_at is None:
        moved_at = parse_timestamp(annotations[MOVED_AT])
        if moved_at is None:
            moved_at = math.inf
            problems.append(
                f"metadata.annotations[{MOVED_AT}]: expected an RFC 3339 time such as 2025-01-02T03:04:05Z, "
                f"got {shown(annotations[MOVED_AT])} (the pod counts as just moved)"
            )
    for key, (values, safe) in _CHOICES.items():
        value = annotations.get(key)
        if value is None or value in values:
            continue
        problems.append(f"metadata.annotations[{key}]: expected one of {', '.join(values)}, got {shown(value)}")
        if safe is None:
            del acted[key]
        else:
            acted[key] = safe
    return PlacerFields(
        gang=name,
        gang_size=size if name else None,
        gang_object=gang_object,
        moved_at=moved_at,
        completion_index=index,
        annotations=acted,
        problems=tuple(problems),
    )
