"""Dynamic rebalancing on the real control plane with measured usage (issue 15).

A control plane of its own with metrics-server (``Cluster(metrics=True)``). Two nodes get hot by
kwok's simulated usage; the controller (``placer run`` with
the manifests' RBAC, ``rebalance.load: usage``) first in dry-run prints the plan and moves
nothing, then moves opted-in Never-tier Job pods to the planned taking nodes. Always-tier
Deployment pods stay, and a Job whose PodDisruptionBudget allows no disruption keeps its pods.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import kube_helpers as kh
import pytest
import usage_support as us
from controller_support import Controller, controller_factory, service_account_kubeconfig
from kubernetes import client

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

GI = 2**30
IGNORE_DISRUPTION = client.V1PodFailurePolicy(
    rules=[
        client.V1PodFailurePolicyRule(
            action="Ignore",
            on_pod_conditions=[client.V1PodFailurePolicyOnPodConditionsPattern(type="DisruptionTarget")],
        )
    ]
)
REBALANCE = {
    "enabled": True,
    "periodSeconds": 5,
    "load": "usage",
    "usageWindowSeconds": 60,
    "usageMaxAgeSeconds": 60,
    "weights": {"cpu": 1},
    "thresholds": {"low": 20, "high": 80},
    "limits": {"perPeriod": 4, "perNode": 2, "perNamespace": 8, "cooldownSeconds": 600},
}


@pytest.fixture(scope="module")
def metrics_cluster() -> Iterator[testenv.Cluster]:
    if not testenv.is_built():
        pytest.fail(testenv.not_built_message(), pytrace=False)
    with testenv.Cluster(with_scheduler=False, metrics=True, log=print) as c:
        yield c


@pytest.fixture(scope="module")
def api(metrics_cluster: testenv.Cluster) -> Iterator[client.ApiClient]:
    with kh.admin_api(metrics_cluster.kubeconfig) as a:
        yield a


@pytest.fixture
def start_controller(
    metrics_cluster: testenv.Cluster, api: client.ApiClient, tmp_path: Path
) -> Iterator[Callable[..., Controller]]:
    kubeconfig = service_account_kubeconfig(metrics_cluster, client.CoreV1Api(api), tmp_path)
    yield from controller_factory(kubeconfig, tmp_path)


def _template(name: str, *, restart: str, cpu_millis: int, group: dict[str, str]) -> client.V1PodTemplateSpec:
    """Pods of 1 cpu requested, using ``cpu_millis``."""
    spec = kh.pod_spec(cpu="1", memory="1Gi", scheduler_name="placer", node_selector=group)
    spec.restart_policy = restart
    labels = {"app": name, **us.KEEP_RUNNING}
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels, annotations=us.usage_annotations(cpu_millis, GI)), spec=spec
    )


def _job(batch: client.BatchV1Api, ns: str, name: str, pods: int, *, cpu_millis: int, group: dict[str, str]) -> None:
    """A Job that opts in by accepting restarts (``placer.io/rebalance: restarts-work``). The
    podFailurePolicy opt-in is not used here: its Job waits for an evicted pod to turn Failed,
    which only a kubelet does (kwok deletes terminating pods without that phase)."""
    body = client.V1Job(
        metadata=client.V1ObjectMeta(name=name, annotations={"placer.io/rebalance": "restarts-work"}),
        spec=client.V1JobSpec(
            parallelism=pods,
            completions=pods,
            backoff_limit=6,
            template=_template(name, restart="Never", cpu_millis=cpu_millis, group=group),
        ),
    )
    batch.create_namespaced_job(ns, body)


def _deployment(apps: client.AppsV1Api, ns: str, name: str, replicas: int, *, group: dict[str, str]) -> None:
    match = {"app": name}
    body = client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=match),
            template=_template(name, restart="Always", cpu_millis=1800, group=group),
        ),
    )
    apps.create_namespaced_deployment(ns, body)


def _where(core: client.CoreV1Api, ns: str, app: str) -> dict[str, str]:
    pods = core.list_namespaced_pod(ns, label_selector=f"app={app}").items
    return {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name and not p.metadata.deletion_timestamp}


def _cordon(core: client.CoreV1Api, nodes: list[str], on: bool) -> None:
    for name in nodes:
        core.patch_node(name, {"spec": {"unschedulable": on}})


def _requests_fit(core: client.CoreV1Api, nodes: list[str]) -> None:
    """Every node holds at most its allocatable cpu in requests (every pod here asks 1 cpu)."""
    for name in nodes:
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
        cpu = sum(1 for p in pods if p.status.phase not in ("Succeeded", "Failed"))
        allocatable = int(core.read_node(name).status.allocatable["cpu"])
        assert cpu <= allocatable, f"node {name} holds {cpu} cpu of requests on {allocatable}"


def test_usage_hot_nodes_shed_opted_in_job_pods_to_planned_nodes(
    api: client.ApiClient, start_controller: Callable[..., Controller]
) -> None:
    core, apps, batch, policy = (
        client.CoreV1Api(api),
        client.AppsV1Api(api),
        client.BatchV1Api(api),
        client.PolicyV1Api(api),
    )
    ns = kh.create_namespace(core)
    group = {"e2e-group": kh.unique("rebalance")}
    hot = [kh.unique("hot") for _ in range(2)]
    cold = [kh.unique("cold") for _ in range(2)]
    # Hot nodes take exactly 5 pods of 1 cpu each: the split is 5 and 5 whatever the batches.
    for name in hot:
        kh.create_node(core, name, cpu="5", memory="32Gi", labels=group)
    for name in cold:
        kh.create_node(core, name, cpu="8", memory="32Gi", labels=group)
    kh.wait_nodes_ready(core, hot + cold)
    us.enable_node_metrics(core, hot + cold)
    _cordon(core, cold, True)  # the workloads start on the two hot nodes only
    started = time.monotonic()
    placing = start_controller("placer-0", engine={"solver": {"timeLimit": 2, "workers": 1}})
    # 10 pods of 1 cpu requested on two 5-cpu nodes; each pod uses 1.8 cpu: 9 cpu used per node.
    _job(batch, ns, "etl", 6, cpu_millis=1800, group=group)
    _job(batch, ns, "pinned", 2, cpu_millis=1800, group=group)
    _deployment(apps, ns, "web", 2, group=group)
    kh.create_pdb(policy, ns, "pinned", {"app": "pinned"}, min_available=2)
    kh.wait_for("10 pods bound", lambda: sum(len(_where(core, ns, a)) for a in ("etl", "pinned", "web")) == 10, 120)
    placing.kill()
    before = {app: _where(core, ns, app) for app in ("etl", "pinned", "web")}
    assert set().union(*(set(w.values()) for w in before.values())) <= set(hot)
    kh.wait_for(
        "metrics-server to report the hot nodes above 80 %",
        lambda: (
            all(u.cpu_millis > 6400 for n, u in us.node_usage(client.CustomObjectsApi(api)).items() if n in hot)
            and all(n in us.node_usage(client.CustomObjectsApi(api)) for n in hot)
        ),
        us.USAGE_TIMEOUT,
    )
    _cordon(core, cold, False)

    # Dry run: the plan is printed, nothing moves.
    dry = start_controller(
        "placer-dry", dryRun=True, engine={"solver": {"timeLimit": 2, "workers": 1}, "rebalance": REBALANCE}
    )
    kh.wait_for("the dry run to print its plan", lambda: "rebalance (dry run, nothing moves)" in dry.output(), 90)
    time.sleep(3)
    assert {app: _where(core, ns, app) for app in before} == before, dry.output()
    dry.kill()

    ctrl = start_controller("placer-1", engine={"solver": {"timeLimit": 2, "workers": 1}, "rebalance": REBALANCE})

    def moved() -> bool:
        now = _where(core, ns, "etl")
        return sum(1 for node in now.values() if node in cold) >= 2 and len(now) == 6

    kh.wait_for("opted-in Job pods moved to the taking nodes", moved, 180)
    after = _where(core, ns, "etl")
    assert sum(1 for n in after.values() if n in cold) >= 2, ctrl.output()
    assert _where(core, ns, "web") == before["web"], "an Always-tier pod moved"
    assert _where(core, ns, "pinned") == before["pinned"], "a pod under a PDB allowing no disruption moved"
    events = core.list_namespaced_event(ns).items
    assert any(e.reason == "Rebalanced" for e in events), ctrl.output()
    _requests_fit(core, hot + cold)
    print(f"rebalance e2e: {time.monotonic() - started:.0f}s")
