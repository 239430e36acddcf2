"""The registry of the kinds placer reads (``placer.inputs.kinds``) drives every reader: a dump,
``placer solve`` against a cluster and the controller's caches read the same kinds into the same
fields of the model, and the live read lists what the registry says, where the server serves it."""

from __future__ import annotations

import copy
import json
from typing import Any

from runner_support import feed, make_runner
from workload_builders import ALPHA3, BETA, composite, pod_group
from workload_builders import node as k8s_node
from workload_builders import pod as k8s_pod

from placer.inputs.dump import read_list
from placer.inputs.fields import Field
from placer.inputs.kinds import DUMP, KINDS, LIVE, WATCH, for_item
from placer.inputs.kubectl import KubeObjects
from placer.kube.informers import Informer
from placer.kube.live import _read
from placer.kube.policy import Policy, Response, Timeouts

Json = dict[str, Any]
PLUGINS = "scheduling.x-k8s.io/v1alpha1"
ALPHA2 = "scheduling.k8s.io/v1alpha2"


def _named(kind: str, name: str, api: str = "v1", namespace: str | None = "ml", **rest: Any) -> Json:
    meta: Json = {"name": name, "uid": f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": meta, **rest}


def one_of_each() -> dict[str, Json]:
    """One object of every kind the controller watches, by the registry's name."""
    template = {"spec": {"schedulerName": "placer"}}
    objects = {
        "Node": k8s_node("n1", 8, rack="r1"),
        "Pod": k8s_pod("p1", node="n1"),
        "PodDisruptionBudget": _named(
            "PodDisruptionBudget", "pdb", "policy/v1", spec={"selector": {}}, status={"disruptionsAllowed": 1}
        ),
        "ReplicaSet": _named(
            "ReplicaSet", "rs", "apps/v1", spec={"selector": {}, "template": template}, status={"readyReplicas": 1}
        ),
        "Job": _named("Job", "job", "batch/v1", spec={"template": template, "completionMode": "Indexed"}),
        "Namespace": _named("Namespace", "ml", namespace=None, metadata={"name": "ml", "labels": {"team": "a"}}),
        "PersistentVolume": _named("PersistentVolume", "pv", namespace=None, spec={"storageClassName": "fast"}),
        "PersistentVolumeClaim": _named("PersistentVolumeClaim", "pvc", spec={"storageClassName": "fast"}),
        "StorageClass": _named(
            "StorageClass", "fast", "storage.k8s.io/v1", namespace=None, volumeBindingMode="WaitForFirstConsumer"
        ),
        "PodGroup.scheduling.k8s.io/v1beta1": pod_group("beta", 2, api=BETA),
        "PodGroup.scheduling.k8s.io/v1alpha3": pod_group("alpha3", 2, api=ALPHA3),
        "PodGroup.scheduling.k8s.io": pod_group("alpha2", 2, key=None, api=ALPHA2),
        "PodGroup.scheduling.x-k8s.io": _named("PodGroup", "plugins", PLUGINS, spec={"minMember": 2}),
        "CompositePodGroup.scheduling.k8s.io": composite("parent"),
    }
    objects["Namespace"]["metadata"] = {"name": "ml", "labels": {"team": "a"}}
    return objects


def test_the_registry_names_an_object_for_every_kind_placer_watches() -> None:
    """The fixture of this file covers the registry (a kind added there is added here)."""
    assert sorted(one_of_each()) == sorted(k.name for k in KINDS if WATCH in k.sources)
    for name, obj in one_of_each().items():
        found = for_item(obj["kind"], obj.get("apiVersion", "v1"))
        assert found is not None and found.name == name


def _fields(objs: KubeObjects) -> dict[str, Any]:
    out = {k.field: getattr(objs, k.field) for k in KINDS if k.field and WATCH in k.sources}
    out["pod_groups"] = sorted(objs.pod_groups, key=lambda g: (g.api, g.name))
    return out


def test_a_dump_and_the_controllers_caches_read_every_kind_into_the_same_fields() -> None:
    objects = one_of_each()
    dumped = read_list(Field("dump.json", "", {"kind": "List", "items": copy.deepcopy(list(objects.values()))}))
    r = make_runner(schedulerName="placer")
    for name, obj in objects.items():
        if name not in r.informers:  # an optional kind, as if discovery had found it served
            r.informers[name] = Informer(name, lw=None)  # type: ignore[arg-type]
        item = copy.deepcopy(obj)
        item.pop("kind"), item.pop("apiVersion", None)  # a list's items come without them
        feed(r, name, item)
    cached = r.view.objects()
    expected = _fields(dumped)
    assert all(expected.values())  # every field holds what its kind gave
    assert _fields(cached) == expected
    assert len(cached.pod_groups) == 5  # three Workload API versions, scheduler-plugins', a composite


def test_a_dumps_other_kinds_are_one_warning_and_device_classes_are_read_from_dumps_only() -> None:
    items = [
        _named("DeviceClass", "gpu", "resource.k8s.io/v1", namespace=None, spec={"extendedResourceName": "x.io/gpu"}),
        _named("Service", "svc"),
        _named("PodGroup", "unknown-version", "scheduling.k8s.io/v9"),
    ]
    objs = read_list(Field("dump.json", "", {"kind": "List", "items": items}))
    assert objs.device_resources == {"x.io/gpu"} and objs.pod_groups == []
    assert objs.warnings == ["2 objects of 2 ignored kinds: PodGroup 1, Service 1"]
    assert [k.name for k in KINDS if DUMP in k.sources and WATCH not in k.sources] == ["DeviceClass"]


class ServerHttp:
    """An API server serving ``served`` (collection path -> its items), one item per page, 404
    for every other path."""

    def __init__(self, served: dict[str, list[Json]]) -> None:
        self.served = served
        self.asked: list[str] = []

    def call(self, method: str, path: str, *, query: dict[str, Any] | None = None, **_: Any) -> Any:
        assert method == "GET"
        self.asked.append(path)

        def send(_timeouts: Timeouts) -> Response:
            if path not in self.served:
                return Response(status=404, data=b'{"kind":"Status","code":404}')
            at = int((query or {}).get("continue") or 0)
            items = self.served[path][at : at + 1]
            more = {"continue": str(at + 1)} if at + 1 < len(self.served[path]) else {}
            return Response(status=200, data=json.dumps({"items": items, "metadata": more}).encode())

        return send


def test_a_live_read_lists_every_live_kind_in_pages_and_the_first_workload_version_served() -> None:
    served: dict[str, list[Json]] = {k.path: [] for k in KINDS if LIVE in k.sources and not k.optional}
    served["/api/v1/nodes"] = [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]  # two pages
    served["/apis/batch/v1/jobs"] = [{"metadata": {"name": "j", "namespace": "ml"}}]
    # A 1.37 server with the alpha API only: v1beta1 is not served (404), v1alpha3 is; v1alpha2
    # holds the same objects and is not read.
    served["/apis/scheduling.k8s.io/v1alpha3/podgroups"] = [{"metadata": {"name": "g", "namespace": "ml"}}]
    served["/apis/scheduling.k8s.io/v1alpha2/podgroups"] = [{"metadata": {"name": "g", "namespace": "ml"}}]
    http = ServerHttp(served)
    items = _read(http, Policy())  # type: ignore[arg-type]
    got = [(i["kind"], i["apiVersion"], i["metadata"]["name"]) for i in items]
    assert got == [
        ("Node", "v1", "a"),
        ("Node", "v1", "b"),
        ("Job", "batch/v1", "j"),
        ("PodGroup", ALPHA3, "g"),
    ]
    assert "/apis/scheduling.k8s.io/v1alpha2/podgroups" not in http.asked
    assert not any("deviceclasses" in p or "metrics.k8s.io" in p for p in http.asked)
