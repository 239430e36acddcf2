"""Simulated usage reaches metrics.k8s.io on the real control plane (issue 15 item 8).

A control plane of its own with metrics-server (``Cluster(metrics=True)``, no kube-scheduler:
pods are bound by nodeName). Usage set on pods by name and by label, and on a Job's pod
template, is what ``/apis/metrics.k8s.io/v1beta1`` reports for the pods and, summed, for their
nodes; a Job pod labelled to keep running is not completed by kwok.
"""

from __future__ import annotations

from collections.abc import Iterator

import kube_helpers as kh
import pytest
import usage_support as us
from kubernetes import client

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

MI = 2**20
GI = 2**30


@pytest.fixture(scope="module")
def metrics_api() -> Iterator[client.ApiClient]:
    if not testenv.is_built():  # (without CI, conftest has marked the tests skipped already)
        pytest.fail(testenv.not_built_message(), pytrace=False)
    with testenv.Cluster(with_scheduler=False, metrics=True, log=print) as c, kh.admin_api(c.kubeconfig) as api:
        yield api


def _job(name: str, node: str, cpu_millis: int, memory_bytes: int, keep_running: bool = True) -> client.V1Job:
    """One pod on ``node`` with this usage; with ``keep_running`` it runs until deleted, like the
    rebalancing tests' Jobs (else kwok completes it at once)."""
    labels = {"app": name, **(us.KEEP_RUNNING if keep_running else {})}
    template = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels, annotations=us.usage_annotations(cpu_millis, memory_bytes)),
        spec=kh.pod_spec(node_name=node),
    )
    template.spec.restart_policy = "Never"
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(template=template, backoff_limit=0),
    )


def test_usage_set_on_pods_is_reported_for_pods_and_nodes(metrics_api: client.ApiClient) -> None:
    core = client.CoreV1Api(metrics_api)
    batch = client.BatchV1Api(metrics_api)
    custom = client.CustomObjectsApi(metrics_api)
    ns = kh.create_namespace(core)
    nodes = [kh.unique("usage") for _ in range(3)]
    for name in nodes:
        kh.create_node(core, name)
    us.enable_node_metrics(core, nodes)
    kh.wait_nodes_ready(core, nodes)
    hot, warm, idle = nodes

    kh.create_pod(core, ns, "a1", node_name=hot)
    kh.create_pod(core, ns, "a2", node_name=hot)
    for i in range(2):
        kh.create_pod(core, ns, f"b{i}", labels={"app": "b"}, node_name=warm)
    kh.create_pod(core, ns, "c0", node_name=idle)
    batch.create_namespaced_job(ns, _job("job", warm, 700, 2 * GI))
    batch.create_namespaced_job(ns, _job("done", idle, 700, 2 * GI, keep_running=False))
    kh.wait_running(core, ns, {"app": "b"}, 2)
    job_pod = kh.wait_running(core, ns, {"app": "job"}, 1)[0].metadata.name

    assert us.set_pod_usage(core, ns, names=["a1", "a2"], cpu_millis=1500, memory_bytes=6 * GI) == ["a1", "a2"]
    assert sorted(us.set_pod_usage(core, ns, label_selector="app=b", cpu_millis=250, memory_bytes=512 * MI)) == [
        "b0",
        "b1",
    ]

    idle_default = us.Usage(us.DEFAULT_CONTAINER_USAGE_CPU_MILLIS, us.DEFAULT_CONTAINER_USAGE_MEMORY_BYTES)
    us.wait_pod_usage(
        custom,
        ns,
        {
            "a1": us.Usage(1500, 6 * GI),
            "a2": us.Usage(1500, 6 * GI),
            "b0": us.Usage(250, 512 * MI),
            "b1": us.Usage(250, 512 * MI),
            job_pod: us.Usage(700, 2 * GI),
            "c0": idle_default,
        },
    )
    us.wait_node_usage(
        custom,
        {hot: us.Usage(3000, 12 * GI), warm: us.Usage(1200, 3 * GI), idle: idle_default},
    )

    # A change shows up on the next scrapes, and the Job pod is still running (kwok spared it).
    us.set_pod_usage(core, ns, names=["a2"], cpu_millis=100, memory_bytes=256 * MI)
    us.wait_node_usage(custom, {hot: us.Usage(1600, 6 * GI + 256 * MI)})
    assert core.read_namespaced_pod(job_pod, ns).status.phase == "Running"
    # ... while a Job pod without the label was completed as before.
    kh.wait_for("job done to succeed", lambda: (batch.read_namespaced_job("done", ns).status.succeeded or 0) == 1)

    # One pod's object, as `kubectl get --raw` (placer rebalance --usage) reads the list.
    raw = custom.get_namespaced_custom_object(us.METRICS_GROUP, us.METRICS_VERSION, ns, "pods", "a1")
    assert raw["kind"] == "PodMetrics"
    assert [c["name"] for c in raw["containers"]] == ["main"]
