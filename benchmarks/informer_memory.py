"""Issue 31: memory per pod held by the controller's Pod informer cache, with and without the
``managedFields`` the API server sends on every object (``placer.kube.informers`` strips them).

The pods are shaped like a Deployment's pod on a real cluster as the API server returns them
(labels, annotations, an owner, two containers with env, probes and mounts, a projected token
volume, tolerations, status with conditions and container statuses, and the managedFields
entries of kube-controller-manager, kube-scheduler and the kubelet), each with its own name and
UID. They are listed through ``Informer.relist`` in pages of 500 JSON documents, as from the
API, and the cache's allocations are counted with tracemalloc.

    python -m benchmarks.informer_memory --pods 50000
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import tracemalloc
import uuid
from collections.abc import Iterator
from typing import Any

from placer.kube import informers
from placer.kube.informers import PAGE, Informer
from placer.kube.policy import Outcome

STAMP = "2026-11-28T03:00:00Z"


def _fields(*paths: str) -> dict[str, Any]:
    """A fieldsV1 tree with an entry per dotted path (as server-side apply records them)."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for part in path.split("."):
            node = node.setdefault(part, {})
    return tree


def _container(name: str, i: int) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.example.com/team/{name}:1.{i % 7}.3",
        "imagePullPolicy": "IfNotPresent",
        "args": ["--port=8080", "--log-level=info", f"--shard={i % 16}"],
        "env": [{"name": f"VAR_{k}", "value": f"value-{k}-{i % 13}"} for k in range(8)]
        + [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": True},
            {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True},
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def _managed(containers: list[str]) -> list[dict[str, Any]]:
    spec_paths = [
        "f:spec.f:dnsPolicy",
        "f:spec.f:enableServiceLinks",
        "f:spec.f:restartPolicy",
        "f:spec.f:schedulerName",
        "f:spec.f:securityContext",
        "f:spec.f:terminationGracePeriodSeconds",
        'f:spec.f:volumes.k:{"name":"config"}.f:configMap.f:name',
    ]
    for c in containers:
        base = f'f:spec.f:containers.k:{{"name":"{c}"}}'
        spec_paths += [
            f"{base}.f:{leaf}"
            for leaf in (
                "image",
                "imagePullPolicy",
                "args",
                "name",
                "resources",
                "terminationMessagePath",
                "terminationMessagePolicy",
                "readinessProbe",
                "livenessProbe",
            )
        ]
        spec_paths += [f'{base}.f:env.k:{{"name":"VAR_{k}"}}.f:value' for k in range(8)]
        spec_paths += [f'{base}.f:ports.k:{{"containerPort":8080,"protocol":"TCP"}}.f:name']
        spec_paths += [f'{base}.f:volumeMounts.k:{{"mountPath":"/etc/app"}}.f:readOnly']
    status_paths = [
        'f:status.f:conditions.k:{"type":"%s"}.f:%s' % (t, leaf)  # noqa: UP031
        for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")
        for leaf in ("lastProbeTime", "lastTransitionTime", "status", "type")
    ]
    status_paths += [
        "f:status.f:containerStatuses",
        "f:status.f:hostIP",
        "f:status.f:hostIPs",
        "f:status.f:phase",
        "f:status.f:podIP",
        "f:status.f:podIPs",
        "f:status.f:startTime",
    ]
    meta = [
        "f:metadata.f:generateName",
        "f:metadata.f:labels.f:app",
        "f:metadata.f:labels.f:pod-template-hash",
        "f:metadata.f:ownerReferences",
        "f:metadata.f:annotations.f:kubectl.kubernetes.io/restartedAt",
    ]
    return [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": STAMP,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields(*meta, *spec_paths),
        },
        {
            "manager": "kube-scheduler",
            "operation": "Update",
            "apiVersion": "v1",
            "time": STAMP,
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": _fields('f:status.f:conditions.k:{"type":"PodScheduled"}.f:status'),
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": STAMP,
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": _fields(*status_paths),
        },
    ]


def pod(i: int) -> dict[str, Any]:
    name = f"web-{i // 1000}-7f9c8d{i % 1000:04d}-x{i:06d}"
    containers = ["app", "sidecar"]
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": STAMP}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {
        "metadata": {
            "name": name,
            "generateName": name[:-7],
            "namespace": f"team-{i % 40}",
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(1000 + i),
            "creationTimestamp": STAMP,
            "labels": {"app": f"web-{i // 1000}", "pod-template-hash": f"7f9c8d{i % 1000:04d}"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": STAMP},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"web-{i // 1000}-7f9c8d",
                    "uid": str(uuid.uuid4()),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": _managed(containers),
        },
        "spec": {
            "containers": [_container(c, i) for c in containers],
            "volumes": [
                {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        }
                                    ]
                                }
                            },
                        ],
                    },
                },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": f"node-{i % 2000}",
            "securityContext": {},
            "schedulerName": "placer",
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": f"10.0.{i % 250}.{i % 200}",
            "podIP": f"10.244.{i % 250}.{i % 200}",
            "podIPs": [{"ip": f"10.244.{i % 250}.{i % 200}"}],
            "startTime": STAMP,
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": c,
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": f"registry.example.com/team/{c}:1.{i % 7}.3",
                    "imageID": f"registry.example.com/team/{c}@sha256:{uuid.uuid4().hex}{uuid.uuid4().hex}",
                    "containerID": f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}",
                    "state": {"running": {"startedAt": STAMP}},
                    "lastState": {},
                }
                for c in containers
            ],
        },
    }


class Pages:
    """The list pages an API server would send, made as they are asked for (JSON bytes)."""

    def __init__(self, pods: int) -> None:
        self.pods = pods
        self.json_bytes = 0

    def list(self, *, limit: int, cont: str | None) -> Outcome:
        start = int(cont or 0)
        stop = min(self.pods, start + limit)
        meta: dict[str, Any] = {"resourceVersion": str(10**9)}
        if stop < self.pods:
            meta["continue"] = str(stop)
        data = json.dumps({"items": [pod(i) for i in range(start, stop)], "metadata": meta}).encode()
        self.json_bytes += len(data)
        return Outcome(ok=True, data=data)

    def watch(self, *, version: str, timeout: int) -> Iterator[dict[str, Any]]:
        return iter(())


def measure(pods: int, *, strip: bool) -> tuple[float, float]:
    """(bytes of cache per pod, JSON bytes per pod as listed)."""
    keep = informers._strip
    if not strip:
        informers._strip = lambda obj: obj  # the cache as it was before issue 31
    try:
        gc.collect()
        tracemalloc.start()
        pages = Pages(pods)
        inf = Informer("Pod", pages)
        before = tracemalloc.get_traced_memory()[0]
        assert inf.relist() is not None
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert len(inf.keys()) == pods
        return held / pods, pages.json_bytes / pods
    finally:
        informers._strip = keep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=50_000)
    args = ap.parse_args()
    print(
        f"machine: {platform.machine()} {platform.python_implementation()} {platform.python_version()}; "
        f"{args.pods} pods, pages of {PAGE}"
    )
    for strip in (False, True):
        per_pod, json_per_pod = measure(args.pods, strip=strip)
        label = "trimmed (issue 31)" if strip else "as listed (before)"
        print(f"{label:30s} cache {per_pod / 1024:6.1f} KiB/pod  (listed JSON {json_per_pod / 1024:.1f} KiB/pod)")


if __name__ == "__main__":
    main()
