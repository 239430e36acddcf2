"""``placer solve`` without a file: read the cluster straight from the API server, read-only.

Every kind the registry (``placer.inputs.kinds``) marks as read live: the objects of a
``kubectl get nodes,pods,pdb,rs,jobs,ns,pv,pvc,storageclass -A -o json`` dump, and the PodGroups
(and 1.37 CompositePodGroups) of the gang APIs the server serves, listed in pages through the call
policy (bounded retries, timeouts), returned as one Kubernetes List for the same reader as a file.
"""

from __future__ import annotations

from typing import Any

from placer.errors import InputError
from placer.inputs.kinds import KINDS, LIVE, Kind
from placer.kube.client import Http, connect
from placer.kube.informers import ApiListWatch
from placer.kube.policy import Outcome, Policy

__all__ = ["PAGE", "read_live"]

PAGE = 500  # objects per list call, as kubectl pages


class _ListError(Exception):
    def __init__(self, kind: str, out: Outcome) -> None:
        super().__init__(kind)
        self.kind, self.out = kind, out


def _all(http: Http, policy: Policy, kind: Kind) -> list[dict[str, Any]]:
    """Every object of ``kind``, cluster-wide, a page at a time."""
    lister = ApiListWatch(http, policy, kind.path)
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        out = lister.list(limit=PAGE, cont=token)
        if not out.ok:
            raise _ListError(kind.kind, out)
        page = out.json() or {}
        for item in page.get("items") or []:
            item.setdefault("kind", kind.kind)  # a list's items come without them
            item.setdefault("apiVersion", kind.api_version)
            items.append(item)
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


def _read(http: Http, policy: Policy) -> list[dict[str, Any]]:
    """The items of every kind read live; an optional kind the server does not serve (404) holds
    none, and of a family only the first version served is read."""
    items: list[dict[str, Any]] = []
    read_families: set[str] = set()
    for kind in KINDS:
        if LIVE not in kind.sources or (kind.family and kind.family in read_families):
            continue
        try:
            items += _all(http, policy, kind)
        except _ListError as exc:
            if kind.optional and exc.out.status == 404:
                continue
            raise
        if kind.family:
            read_families.add(kind.family)
    return items


def read_live(kubeconfig: str | None, context: str | None) -> tuple[str, dict[str, Any]]:
    """(a name for messages, a Kubernetes List) of the cluster the kubeconfig's context points at."""
    source = f"cluster {context}" if context else "cluster (current context)"
    api = connect(kubeconfig, context=context)
    try:
        items = _read(Http(api), Policy())
    except _ListError as failed:
        out = failed.out
        if out.status:
            raise InputError(source, failed.kind, f"cannot list: {out.status} {out.reason}") from None
        raise InputError(source, failed.kind, f"cannot reach the API server: {out.reason}") from None
    finally:
        api.close()
    return source, {"kind": "List", "apiVersion": "v1", "items": items}
