"""Volumes: PersistentVolumes, claims and StorageClasses read from both formats, resolved into a
pod's volume fields as kube-scheduler's VolumeBinding does, placed by ``placer solve``, and the
controller setting a WaitForFirstConsumer claim's selected node before it binds.

Bad PV/PVC/StorageClass fields are one line on stderr naming the file and the field, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runner_support import FakeActions, feed, make_runner
from support import node, pod
from typer.testing import CliRunner

from placer.cli.app import app
from placer.inputs import parse_cluster
from placer.inputs.volumes import (
    SELECTED_NODE,
    UNBOUND_IMMEDIATE,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
    StorageClass,
    resolve_pod,
)
from placer.models import ClaimRef, NodeSelectorRequirement, NodeSelectorTerm, Pod

runner = CliRunner()
HOST = "kubernetes.io/hostname"


# -- builders -------------------------------------------------------------------------------------


def _node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOST: name, "zone": f"z-{name}"}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def _pod(name: str = "p", volumes: list[dict[str, Any]] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {
            "schedulerName": "placer",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": volumes
            if volumes is not None
            else [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }


def _pv(name: str = "pv-1", hosts: tuple[str, ...] | None = ("b",)) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    if hosts is not None:
        expr = {"key": HOST, "operator": "In", "values": list(hosts)}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
    return {"kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def _pvc(
    name: str = "data",
    *,
    volume: str = "",
    phase: str | None = None,
    storage_class: str | None = None,
    annotations: dict[str, str] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    item: dict[str, Any] = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}, **meta},
        "spec": spec,
    }
    if phase:
        item["status"] = {"phase": phase}
    return item


def _bound(name: str = "data", volume: str = "pv-1") -> dict[str, Any]:
    return _pvc(name, volume=volume, phase="Bound", annotations={"pv.kubernetes.io/bind-completed": "yes"})


def _class(name: str = "local-wffc", mode: str = "WaitForFirstConsumer", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "example.com/disk",
        "volumeBindingMode": mode,
        **extra,
    }


def _list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": [_node("a", cpu="16"), _node("b", cpu="4"), *items]}


def _write(tmp_path: Path, data: Any, name: str = "cluster.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _solve(tmp_path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    res = runner.invoke(app, ["solve", str(_write(tmp_path, doc)), "-o", "json", "--deterministic"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def _term(key: str, *values: str, fields: bool = False) -> NodeSelectorTerm:
    req = NodeSelectorRequirement(key=key, operator="In", values=values)
    return NodeSelectorTerm(match_fields=(req,)) if fields else NodeSelectorTerm(match_expressions=(req,))


# -- readers --------------------------------------------------------------------------------------


def test_the_list_reader_takes_claims_from_pod_volumes_and_accepts_pv_pvc_and_storageclass_items() -> None:
    volumes = [
        {"name": "config", "configMap": {"name": "settings"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "local-wffc"}}}},
        {"name": "again", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
    ]
    doc = _list(_pod("web-0", volumes), _pv(), _bound(), _class())
    c = parse_cluster("dump.json", json.dumps(doc))
    (p,) = c.pods
    assert p.claims == ("data", "web-0-scratch")
    assert c.warnings == ()
    # the ephemeral claim does not exist yet: upstream's own words for that case
    assert (
        p.volume_problem
        == 'waiting for ephemeral volume controller to create the persistentvolumeclaim "web-0-scratch"'
    )


def test_a_pod_without_claims_is_left_alone() -> None:
    c = parse_cluster("dump.json", json.dumps(_list(_pod(volumes=[{"name": "tmp", "emptyDir": {}}]))))
    (p,) = c.pods
    assert p.claims == () and p.volume_terms == () and p.wffc_claims == () and p.volume_problem is None


def test_the_native_schema_takes_claims_and_kubernetes_volume_objects() -> None:
    doc = {
        "nodes": [node("a"), node("b", labels={HOST: "b"})],
        "pods": [pod("p", claims=["data", "data"])],
        "persistentVolumes": [_pv()],
        "persistentVolumeClaims": [_bound()],
        "storageClasses": [_class()],
    }
    (p,) = parse_cluster("what-if.json", json.dumps(doc)).pods
    assert p.claims == ("data",)
    assert p.volume_terms == ((_term(HOST, "b"),),)


def test_the_native_schema_publishes_the_volume_fields() -> None:
    res = runner.invoke(app, ["schema"])
    schema = json.loads(res.stdout)
    assert {"persistentVolumes", "persistentVolumeClaims", "storageClasses"} <= set(schema["properties"])
    assert "claims" in schema["$defs"]["NativePod"]["properties"]


# -- resolution -----------------------------------------------------------------------------------


def _resolve(
    claims: tuple[str, ...] = ("data",),
    *,
    volumes: tuple[PersistentVolume, ...] = (),
    pvcs: tuple[PersistentVolumeClaim, ...] = (),
    classes: tuple[StorageClass, ...] = (),
    ephemeral: tuple[str, ...] = (),
    uid: str = "uid-p",
) -> Pod:
    p = Pod(name="p", uid=uid, claims=claims, ephemeral_claims=ephemeral)
    return resolve_pod(p, Storage.of(volumes, pvcs, classes), node_count=3)


WFFC = StorageClass(name="wffc", provisioner="example.com/disk", binding_mode="WaitForFirstConsumer")
IMMEDIATE = StorageClass(name="fast", provisioner="example.com/disk")


def _claim(name: str = "data", **kw: Any) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(namespace="default", name=name, **kw)


PROBLEMS = [
    ("missing claim", {}, 'persistentvolumeclaim "data" not found'),
    (
        "missing ephemeral claim",
        {"ephemeral": ("data",)},
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "data"',
    ),
    (
        "ephemeral claim of another pod",
        {"ephemeral": ("data",), "pvcs": (_claim(controller_uid="uid-other"),)},
        "PVC default/data was not created for pod default/p (pod is not owner)",
    ),
    (
        "lost claim",
        {"pvcs": (_claim(volume_name="pv-9", phase="Lost"),)},
        'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-9"',
    ),
    ("claim being deleted", {"pvcs": (_claim(deleting=True),)}, 'persistentvolumeclaim "data" is being deleted'),
    (
        "bound to a missing volume",
        {"pvcs": (_claim(volume_name="pv-9", phase="Bound"),)},
        "3 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
    ),
    ("unbound without a class", {"pvcs": (_claim(),)}, UNBOUND_IMMEDIATE),
    ("unbound, Immediate class", {"pvcs": (_claim(storage_class="fast"),), "classes": (IMMEDIATE,)}, UNBOUND_IMMEDIATE),
    ("unbound, class missing", {"pvcs": (_claim(storage_class="gone"),)}, UNBOUND_IMMEDIATE),
    (
        "pre-bound by volumeName, not yet bound",
        {"pvcs": (_claim(storage_class="wffc", volume_name="pv-1"),), "classes": (WFFC,)},
        UNBOUND_IMMEDIATE,
    ),
]


@pytest.mark.parametrize(("case", "storage", "problem"), PROBLEMS, ids=[c[0] for c in PROBLEMS])
def test_a_pod_whose_claims_no_node_can_serve_waits_with_upstreams_message(
    case: str, storage: dict[str, Any], problem: str
) -> None:
    p = _resolve(**storage)
    assert p.volume_problem == problem, case
    assert p.volume_terms == () and p.wffc_claims == ()


def test_the_first_failing_volume_is_the_one_reported() -> None:
    p = _resolve(("gone", "data"), pvcs=(_claim(deleting=True),))
    assert p.volume_problem == 'persistentvolumeclaim "gone" not found'


def test_a_bound_claim_restricts_the_pod_to_its_volumes_node_affinity() -> None:
    pv1 = PersistentVolume(name="pv-1", node_terms=(_term(HOST, "b"),))
    pv2 = PersistentVolume(name="pv-2", node_terms=(_term("zone", "x"), _term("zone", "y")))
    anywhere = PersistentVolume(name="pv-3")
    pvcs = (
        _claim("one", volume_name="pv-1", bind_completed=True),
        _claim("two", volume_name="pv-2", phase="Bound"),
        _claim("nfs", volume_name="pv-3", phase="Bound"),
    )
    p = _resolve(("one", "two", "nfs"), volumes=(pv1, pv2, anywhere), pvcs=pvcs)
    assert p.volume_problem is None and p.wffc_claims == ()
    assert p.volume_terms == ((_term(HOST, "b"),), (_term("zone", "x"), _term("zone", "y")))


def test_an_unbound_wait_for_first_consumer_claim_is_left_to_the_scheduler() -> None:
    zoned = StorageClass(
        name="zoned", provisioner="example.com/disk", binding_mode="WaitForFirstConsumer",
        allowed_topologies=(_term("zone", "z-a"),),
    )  # fmt: skip
    pvcs = (_claim(storage_class="wffc"), _claim("logs", storage_class="zoned"))
    p = _resolve(("data", "logs"), pvcs=pvcs, classes=(WFFC, zoned))
    assert p.volume_problem is None and p.unsupported is None
    assert p.wffc_claims == (ClaimRef(namespace="default", name="data"), ClaimRef(namespace="default", name="logs"))
    assert p.volume_terms == ((_term("zone", "z-a"),),)


def test_a_node_already_selected_on_the_claim_is_the_only_one_left() -> None:
    p = _resolve(pvcs=(_claim(storage_class="wffc", selected_node="b"),), classes=(WFFC,))
    assert p.wffc_claims == (ClaimRef(namespace="default", name="data"),)
    assert p.volume_terms == ((_term("metadata.name", "b", fields=True),),)


def test_a_claim_only_a_pre_created_volume_can_serve_is_unsupported() -> None:
    local = StorageClass(name="local", provisioner="kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer")
    p = _resolve(pvcs=(_claim(storage_class="local"),), classes=(local,))
    assert p.unsupported is not None and "pre-created PersistentVolume" in p.unsupported


def test_an_ephemeral_claim_owned_by_its_pod_resolves_like_any_other() -> None:
    p = _resolve(pvcs=(_claim(storage_class="wffc", controller_uid="uid-p"),), classes=(WFFC,), ephemeral=("data",))
    assert p.volume_problem is None and p.wffc_claims == (ClaimRef(namespace="default", name="data"),)


def test_resolving_twice_gives_the_same_pod() -> None:
    storage = Storage.of(
        [PersistentVolume(name="pv-1", node_terms=(_term(HOST, "b"),))],
        [_claim(volume_name="pv-1", phase="Bound")],
    )
    once = resolve_pod(Pod(name="p", claims=("data",)), storage, node_count=2)
    assert resolve_pod(once, storage, node_count=2) == once


# -- placer solve ---------------------------------------------------------------------------------


def test_solve_puts_a_pod_on_the_only_node_its_bound_volume_allows(tmp_path: Path) -> None:
    # Without the volume, balance would choose the much larger, empty node a.
    assert _solve(tmp_path, _list(_pod(volumes=[])))["placements"][0]["node"] == "a"
    data = _solve(tmp_path, _list(_pod(), _pv(hosts=("b",)), _bound()))
    assert [(p["pod"], p["node"]) for p in data["placements"]] == [("default/p", "b")]


def test_solve_explains_a_volume_node_affinity_conflict(tmp_path: Path) -> None:
    data = _solve(tmp_path, _list(_pod(), _pv(hosts=("c",)), _bound()))
    detail = data["unplaced"][0].pop("detail")
    assert detail["filters"] == [{"filter": "VolumeNodeAffinity", "nodes": 2}]
    assert data["unplaced"] == [
        {
            "pod": "default/p",
            "code": "Unschedulable",
            "reason": "0/2 nodes are available: 2 node(s) had volume node affinity conflict.",
        }
    ]


def test_solve_reports_a_missing_claim_in_kube_schedulers_words(tmp_path: Path) -> None:
    data = _solve(tmp_path, _list(_pod()))
    assert data["placements"] == []
    assert data["unplaced"][0].pop("detail")["volumes"] == 'persistentvolumeclaim "data" not found'
    assert data["unplaced"] == [
        {
            "pod": "default/p",
            "code": "Unschedulable",
            "reason": '0/2 nodes are available: persistentvolumeclaim "data" not found.',
        }
    ]


def test_solve_places_a_wait_for_first_consumer_claim_within_its_allowed_topologies(tmp_path: Path) -> None:
    topologies = [{"matchLabelExpressions": [{"key": "zone", "values": ["z-b"]}]}]
    doc = _list(_pod(), _pvc(storage_class="local-wffc"), _class(allowedTopologies=topologies))
    data = _solve(tmp_path, doc)
    assert [(p["pod"], p["node"]) for p in data["placements"]] == [("default/p", "b")]


def _bad_pv_affinity() -> dict[str, Any]:
    pv = _pv()
    pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] = "Near"
    return pv


BAD: list[tuple[str, Any, str]] = [
    (
        "PV node affinity with an invalid operator",
        _list(_pod(), _bad_pv_affinity(), _bound()),
        "items[3].spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator",
    ),
    ("PV without a name", _list({"kind": "PersistentVolume", "metadata": {}}), "items[2].metadata.name"),
    ("PVC with an invalid phase", _list(_pvc(phase="Happy")), "items[2].status.phase"),
    ("PVC annotations that are not a map", _list(_pvc(annotations=["x"])), "items[2].metadata.annotations"),
    ("PVC volumeName that is not a string", _list(_pvc(volume=7)), "items[2].spec.volumeName"),  # type: ignore[arg-type]
    ("StorageClass with an invalid binding mode", _list(_class(mode="Later")), "items[2].volumeBindingMode"),
    (
        "StorageClass topology without values",
        _list(_class(allowedTopologies=[{"matchLabelExpressions": [{"key": "zone", "values": []}]}])),
        "items[2].allowedTopologies[0].matchLabelExpressions[0].values",
    ),
    (
        "pod volume without a claim name",
        _list(_pod(volumes=[{"name": "v", "persistentVolumeClaim": {}}])),
        "items[2].spec.volumes[0].persistentVolumeClaim.claimName",
    ),
    ("duplicate claims", _list(_pvc(), _pvc()), "duplicate name 'default/data'"),
    (
        "native PersistentVolumeClaim with an invalid phase",
        {"nodes": [node("a")], "persistentVolumeClaims": [_pvc(phase="Happy")]},
        "persistentVolumeClaims[0].status.phase",
    ),
    ("native claims that are not names", {"nodes": [node("a")], "pods": [pod("p", claims=[1])]}, "pods[0].claims"),
]


@pytest.mark.parametrize(("case", "content", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_volume_input_is_one_line_naming_file_and_field_exit_2(
    tmp_path: Path, case: str, content: Any, field: str
) -> None:
    path = _write(tmp_path, content, "bad-volumes.json")
    res = runner.invoke(app, ["solve", str(path), "-o", "json"])
    assert res.exit_code == 2, (case, res.output)
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "bad-volumes.json" in lines[0] and field in lines[0], lines[0]
    assert "Traceback" not in res.output


# -- the controller -------------------------------------------------------------------------------


WFFC_POD = Pod(name="p", uid="uid-p", wffc_claims=(ClaimRef(name="data"), ClaimRef(name="logs")))


def test_the_controller_sets_the_selected_node_on_each_claim_before_binding() -> None:
    actions = FakeActions()
    out = make_runner(actions).binder.bind_one(WFFC_POD, "b")
    assert out.ok
    assert actions.calls[:3] == [
        ("select_node", "default/data", "b"),
        ("select_node", "default/logs", "b"),
        ("bind", "default/p", "b"),
    ]


def test_a_refused_claim_patch_means_no_bind_an_event_and_a_back_off() -> None:
    actions = FakeActions(refuse=403)
    r = make_runner(actions)
    out = r.binder.bind_one(WFFC_POD, "b")
    assert not out.ok and out.prebind and out.status == 403
    assert not [c for c in actions.calls if c[0] == "bind"]
    (event,) = [c for c in actions.calls if c[0] == "event"]
    assert event[2] == "FailedScheduling" and SELECTED_NODE in event[3] and '"data"' in event[3]
    # The pool reports it: the assumption is dropped and the pod waits out a back-off.
    r.binder.bind_all([(WFFC_POD, "b")])
    r.ctx.pool.shutdown(wait=True)
    r.binder.collect()
    assert "default/p" not in r.ctx.assumed
    r.ctx.batcher.sync(["default/p"], now=0.0)
    assert len(r.ctx.batcher) == 0


def test_dry_run_never_patches_a_claim() -> None:
    r = make_runner(dryRun=True)
    r.actions.http = None  # type: ignore[assignment]  # any API call would fail loudly
    assert r.actions.select_node("default/data", "b").ok


def test_the_controllers_model_resolves_volumes_and_namespace_labels_from_its_caches() -> None:
    r = make_runner()
    feed(r, "Node", _node("a"), _node("b"))
    feed(r, "Pod", _pod("bound"), _pod("waits", [{"name": "v", "persistentVolumeClaim": {"claimName": "scratch"}}]))
    feed(r, "PersistentVolume", _pv(hosts=("b",)))
    feed(r, "PersistentVolumeClaim", _bound(), _pvc("scratch", storage_class="local-wffc"))
    feed(r, "StorageClass", _class())
    feed(r, "Namespace", {"kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "x"}}})
    cluster = r.cluster()
    pods = {p.name: p for p in cluster.pods}
    assert pods["bound"].volume_terms == ((_term(HOST, "b"),),)
    assert pods["waits"].wffc_claims == (ClaimRef(name="scratch"),)
    assert cluster.namespaces == {"default": {"kubernetes.io/metadata.name": "default", "team": "x"}}
    # The provisioner's answer arrives: the claim gets bound, the model follows.
    feed(r, "PersistentVolumeClaim", _bound(), _bound("scratch", volume="pv-1"))
    cluster = r.cluster()
    assert {p.name: p for p in cluster.pods}["waits"].volume_terms == ((_term(HOST, "b"),),)
