"""A scheduler that decides nothing: the e2e benchmark's ceiling (``--ceiling``).

It binds the pending pods of one namespace that name ``--scheduler-name``, round-robin over the
benchmark's nodes, through placer's own write path (``placer.kube.actions.Actions.bind``: the
same client, connection pool, call policy, rate limiter and number of bind workers as the
controller), and sends nothing else: no events, no status patches, no watch. It ignores every
constraint (its binds are not a valid schedule for the inter-pod shapes); what it measures is how
fast this control plane on this machine takes binds from placer's client path when no decision
costs anything, so the throughput any scheduler with that path could reach here.

  python -m benchmarks.bindonly --kubeconfig K --namespace NS --scheduler-name bind-only
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from placer.kube.actions import Actions
from placer.kube.client import Http, api_client
from placer.kube.policy import Policy


def _items(http: Http, policy: Policy, path: str, query: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The items of one list (none when the list fails)."""
    out = policy.call(f"list {path}", lambda t: http.request("GET", path, t, query=query))
    return (out.json() or {}).get("items") or [] if out.ok else []


def pending(http: Http, policy: Policy, namespace: str, scheduler: str) -> list[tuple[str, str]]:
    """(namespace/name, uid) of the namespace's unbound pods that name ``scheduler``."""
    query = {"fieldSelector": f"spec.nodeName=,spec.schedulerName={scheduler}"}
    items = _items(http, policy, f"/api/v1/namespaces/{namespace}/pods", query)
    return [(f"{namespace}/{p['metadata']['name']}", p["metadata"]["uid"]) for p in items]


def nodes(http: Http, policy: Policy, prefix: str) -> list[str]:
    names = (n["metadata"]["name"] for n in _items(http, policy, "/api/v1/nodes"))
    return sorted(name for name in names if name.startswith(prefix))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--scheduler-name", default="bind-only")
    ap.add_argument("--node-prefix", default="bench-")
    ap.add_argument("--workers", type=int, default=32)
    ap.add_argument("--qps", type=float, default=1000.0)
    ap.add_argument("--burst", type=int, default=2000)
    args = ap.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    api = api_client(args.kubeconfig, "bind-only")
    api.configuration.connection_pool_maxsize = args.workers + 4
    http = Http(api)
    policy = Policy()
    actions = Actions(http, policy, scheduler_name=args.scheduler_name, identity="bind-only", qps=args.qps,
                      burst=args.burst)  # fmt: skip
    targets = nodes(http, policy, args.node_prefix)
    turn, bound, failed = 0, 0, 0
    with ThreadPoolExecutor(args.workers) as pool:
        while not stop.is_set():
            todo = pending(http, policy, args.namespace, args.scheduler_name)
            if not todo:
                time.sleep(0.05)
                continue
            futures = []
            for key, uid in todo:
                futures.append(pool.submit(actions.bind, key, targets[turn % len(targets)], uid))
                turn += 1
            for f in futures:
                if f.result().ok:
                    bound += 1
                else:
                    failed += 1
    print(json.dumps({"bound": bound, "failed": failed}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
