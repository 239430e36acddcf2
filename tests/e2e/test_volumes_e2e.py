"""Volumes on the real control plane, with placer run under its own ServiceAccount (k8s/rbac.yaml).

Aspects: an unbound claim of a WaitForFirstConsumer StorageClass gets
``volume.kubernetes.io/selected-node`` before its pod is bound there (kube-scheduler's
VolumeBinding); a claim bound (by the real PV controller) to a PersistentVolume with node affinity
puts the pod on that node although balance prefers another; a pod whose claim does not exist
waits with kube-scheduler's message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import kube_helpers as kh
import pytest

# The controller fixtures (placer run with the ServiceAccount token of k8s/rbac.yaml) live with
# the controller's own e2e tests.
from controller_support import Controller
from kubernetes import client

from placer.inputs.volumes import SELECTED_NODE

pytestmark = pytest.mark.e2e

NodeFactory = Callable[..., list[str]]
HOST = "kubernetes.io/hostname"


@pytest.fixture(scope="session")
def storage(api_client: client.ApiClient) -> client.StorageV1Api:
    return client.StorageV1Api(api_client)


@pytest.fixture
def cleanup(core: client.CoreV1Api, storage: client.StorageV1Api) -> Iterator[list[tuple[str, str]]]:
    """Cluster-scoped objects a test created, deleted afterwards: (kind, name)."""
    created: list[tuple[str, str]] = []
    yield created
    for kind, name in created:
        delete = storage.delete_storage_class if kind == "StorageClass" else core.delete_persistent_volume
        kh.delete_if_present(delete, name)


def _claim(
    core: client.CoreV1Api, ns: str, name: str, *, storage_class: str, volume: str | None = None
) -> client.V1PersistentVolumeClaim:
    body = client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            storage_class_name=storage_class,
            volume_name=volume,
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
        ),
    )
    return core.create_namespaced_persistent_volume_claim(ns, body)


def _pod_with_claim(core: client.CoreV1Api, ns: str, name: str, claim: str, mark: dict[str, str]) -> client.V1Pod:
    spec = kh.pod_spec(cpu="1", scheduler_name="placer", node_selector=mark)
    spec.volumes = [
        client.V1Volume(
            name="data", persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name=claim)
        )
    ]
    body = client.V1Pod(metadata=client.V1ObjectMeta(name=name, labels={"app": name}), spec=spec)
    return core.create_namespaced_pod(ns, body)


def _bound_node(core: client.CoreV1Api, ns: str, name: str, timeout: float = 60.0) -> str:
    return kh.wait_for(
        f"pod {ns}/{name} bound", lambda: core.read_namespaced_pod(name, ns).spec.node_name or None, timeout
    )


def test_a_wait_for_first_consumer_claim_gets_the_chosen_node_before_its_pod_is_bound(
    core: client.CoreV1Api,
    storage: client.StorageV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
    cleanup: list[tuple[str, str]],
) -> None:
    mark = {"volume-test": kh.unique("wffc")}
    nodes = make_nodes(2, cpu="4", labels=mark)
    cls = kh.unique("wffc")
    storage.create_storage_class(
        client.V1StorageClass(
            metadata=client.V1ObjectMeta(name=cls),
            provisioner="example.com/none",  # nobody provisions: the annotation is all there is to see
            volume_binding_mode="WaitForFirstConsumer",
        )
    )
    cleanup.append(("StorageClass", cls))
    _claim(core, namespace, "data", storage_class=cls)
    _pod_with_claim(core, namespace, "app", "data", mark)
    controllers()
    node = _bound_node(core, namespace, "app")
    assert node in nodes
    # The claim was patched before the bind, so once the pod is bound the annotation is there.
    claim = core.read_namespaced_persistent_volume_claim("data", namespace)
    assert (claim.metadata.annotations or {}).get(SELECTED_NODE) == node
    assert claim.spec.volume_name in (None, "")


def test_a_claim_bound_to_a_volume_with_node_affinity_puts_the_pod_on_that_node(
    core: client.CoreV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
    cleanup: list[tuple[str, str]],
) -> None:
    mark = {"volume-test": kh.unique("pv")}
    (large,) = make_nodes(1, cpu="16", labels=mark)
    (small,) = make_nodes(1, cpu="4", labels=mark)  # balance alone would choose the large, empty node
    pv = kh.unique("pv")
    only_small = client.V1NodeSelectorTerm(
        match_expressions=[client.V1NodeSelectorRequirement(key=HOST, operator="In", values=[small])]
    )
    core.create_persistent_volume(
        client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=pv),
            spec=client.V1PersistentVolumeSpec(
                capacity={"storage": "1Gi"},
                access_modes=["ReadWriteOnce"],
                storage_class_name="",
                host_path=client.V1HostPathVolumeSource(path=f"/tmp/{pv}"),
                claim_ref=client.V1ObjectReference(namespace=namespace, name="data"),
                node_affinity=client.V1VolumeNodeAffinity(
                    required=client.V1NodeSelector(node_selector_terms=[only_small])
                ),
            ),
        )
    )
    cleanup.append(("PersistentVolume", pv))
    _claim(core, namespace, "data", storage_class="", volume=pv)
    kh.wait_for(
        f"the PV controller to bind claim data to {pv}",
        lambda: core.read_namespaced_persistent_volume_claim("data", namespace).status.phase == "Bound",
        60,
    )
    _pod_with_claim(core, namespace, "db", "data", mark)
    controllers()
    assert _bound_node(core, namespace, "db") == small
    assert large != small


def test_a_pod_whose_claim_does_not_exist_waits_with_kube_schedulers_message(
    core: client.CoreV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    mark = {"volume-test": kh.unique("none")}
    make_nodes(1, cpu="4", labels=mark)
    _pod_with_claim(core, namespace, "orphan", "nowhere", mark)
    controllers()

    def reported() -> str | None:
        conds = core.read_namespaced_pod("orphan", namespace).status.conditions or []
        return next((c.message for c in conds if c.type == "PodScheduled" and c.status == "False"), None)

    message = kh.wait_for("PodScheduled=False on the pod", reported, 60)
    assert 'persistentvolumeclaim "nowhere" not found' in message
    assert not core.read_namespaced_pod("orphan", namespace).spec.node_name
