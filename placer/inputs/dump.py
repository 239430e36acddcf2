"""Read a Kubernetes ``List`` (``kubectl get nodes,pods,pdb,rs,jobs,ns,pv,pvc,storageclass -A -o json``,
with ``deviceclass`` and ``podgroups`` where the cluster serves them: README, "Input formats") into
models, each item by the reader its kind has in the registry (``placer.inputs.kinds``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from placer.inputs.fields import Field
from placer.inputs.kinds import dump_kinds, for_item
from placer.inputs.kubectl import KubeObjects
from placer.inputs.workloads import is_workload

__all__ = ["ignored_kinds", "is_list", "read_list"]

KINDS = frozenset(dump_kinds())  # a document of one of these kinds is read as a one-item List


def read_list(doc: Field) -> KubeObjects:
    out = KubeObjects()
    kind = doc.get("kind").text()
    items = [doc] if kind in KINDS else list(doc.get("items").items())
    if kind not in KINDS and not doc.get("items").present():
        raise doc.fail("expected a Kubernetes List with items, or placer's native schema (nodes, pods)")
    ignored: Counter[str] = Counter()
    for item in items:
        item_kind = item.get("kind").text()
        found = for_item(item_kind, item.get("apiVersion").text())
        if found is not None and found.read is not None:
            found.fill(out, [found.read(item)])
        elif is_workload(item):
            pass  # its PodGroups carry the rules of its templates (placer.inputs.workloads)
        else:
            ignored[item_kind or "(no kind)"] += 1
    if ignored:
        out.warnings.append(ignored_kinds(ignored))
    for pod in out.pods:
        out.warnings += [f"pod {pod.key}: {problem}" for problem in pod.problems]
    return out


def ignored_kinds(counts: Mapping[str, int]) -> str:
    """One line for every object of a kind placer does not read: ``250 objects of 3 ignored kinds:
    Service 200, ConfigMap 40, Secret 10``."""
    total = sum(counts.values())
    kinds = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    noun = "object" if total == 1 else "objects"
    what = "kind" if len(kinds) == 1 else "kinds"
    return f"{total} {noun} of {len(kinds)} ignored {what}: " + ", ".join(f"{k} {n}" for k, n in kinds)


def is_list(data: Any) -> bool:
    return isinstance(data, dict) and ("items" in data or data.get("kind") in KINDS)
