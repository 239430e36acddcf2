"""placer's own pod annotations and labels, read apart from what Kubernetes accounts for the pod.

The API server validates a pod's identity, node, phase and resources, but any string is a valid
annotation value: a ``placer.io/*`` value placer cannot read must affect only its own pod, never
the whole input or the other pods. So each value is read here, once, into a typed field; one that
cannot be read becomes a problem naming it, and gets its safe reading meanwhile:

- ``placer.io/gang-size``: no size (the gang is the members present);
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

__all__ = [
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
    annotations: dict[str, str]  # as placer acts on them: an unreadable value has its safe reading
    problems: tuple[str, ...]  # one line per unreadable value, naming the field


def _gang_size(text: str) -> int | None:
    if not text.isascii() or not text.isdigit() or int(text) < 1 or int(text) > 1_000_000:
        return None
    return int(text)


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
    where, size_text = (
        ("labels", labels[GANG_SIZE]) if GANG_SIZE in labels else ("annotations", annotations.get(GANG_SIZE))
    )
    if size_text is not None:
        size = _gang_size(size_text)
        if size is None:
            problems.append(f"metadata.{where}[{GANG_SIZE}]: must be a positive integer, got {size_text!r}")
    moved_at = None
    if MOVED_AT in annotations:
        moved_at = parse_timestamp(annotations[MOVED_AT])
        if moved_at is None:
            moved_at = math.inf
            problems.append(
                f"metadata.annotations[{MOVED_AT}]: expected an RFC 3339 time such as 2025-01-02T03:04:05Z, "
                f"got {annotations[MOVED_AT]!r} (the pod counts as just moved)"
            )
    for key, (values, safe) in _CHOICES.items():
        value = annotations.get(key)
        if value is None or value in values:
            continue
        problems.append(f"metadata.annotations[{key}]: expected one of {', '.join(values)}, got {value!r}")
        if safe is None:
            del acted[key]
        else:
            acted[key] = safe
    return PlacerFields(
        gang=name,
        gang_size=size if name else None,
        gang_object=gang_object,
        moved_at=moved_at,
        annotations=acted,
        problems=tuple(problems),
    )
