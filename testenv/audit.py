"""Read kube-apiserver's JSON audit log (``Cluster(audit=True)``): who wrote what, and when.

The testenv's audit policy logs every write by placer's ServiceAccounts at Metadata level, one
JSON event per line at the ResponseComplete (or Panic) stage. The fault suite gives each replica
its own ServiceAccount, so ``user`` names the replica that made a write.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class Write:
    received: datetime  # requestReceivedTimestamp: when the API server got the request
    completed: datetime  # stageTimestamp of the ResponseComplete event
    user: str
    user_agent: str
    verb: str
    resource: str  # "pods/binding", "leases", ...
    namespace: str
    name: str
    code: int  # HTTP status answered

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def parse_event(event: dict[str, Any]) -> Write | None:
    """One audit event as a Write, or None when it is not a completed write."""
    if event.get("stage") not in ("ResponseComplete", "Panic") or event.get("verb") not in WRITE_VERBS:
        return None
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    return Write(
        received=_ts(event["requestReceivedTimestamp"]),
        completed=_ts(event["stageTimestamp"]),
        user=(event.get("user") or {}).get("username", ""),
        user_agent=event.get("userAgent", ""),
        verb=event["verb"],
        resource=resource,
        namespace=ref.get("namespace", ""),
        name=ref.get("name", ""),
        code=int((event.get("responseStatus") or {}).get("code", 0)),
    )


def read_writes(path: Path) -> list[Write]:
    """Every completed write in the log, in log order (a torn last line is skipped)."""
    out: list[Write] = []
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        w = parse_event(event)
        if w is not None:
            out.append(w)
    return out


def by_user(writes: list[Write]) -> dict[str, list[Write]]:
    grouped: dict[str, list[Write]] = defaultdict(list)
    for w in writes:
        grouped[w.user].append(w)
    return dict(grouped)


def successful_evictions(writes: list[Write]) -> dict[tuple[str, str], list[Write]]:
    """(namespace, pod) -> the evictions that succeeded on it (two or more: evicted twice)."""
    out: dict[tuple[str, str], list[Write]] = defaultdict(list)
    for w in writes:
        if w.resource == "pods/eviction" and w.ok:
            out[(w.namespace, w.name)].append(w)
    return dict(out)


def summary(writes: list[Write]) -> dict[str, dict[str, int]]:
    """user -> "verb resource code" -> count (for reports and failure messages)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for w in writes:
        out[w.user][f"{w.verb} {w.resource} {w.code}"] += 1
    return {u: dict(v) for u, v in out.items()}
