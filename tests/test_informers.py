"""Informers against a fake list/watch: they cannot hang and never relist without a reason.

Aspects: the first list is paged (limit/continue) and replaces the cache at once; a watch resumes
from the last resourceVersion delivered (bookmarks included) after it ends or breaks; only 410
Gone (as an HTTP status or a watch ERROR event) makes it list again, paged; an expired continue
token starts the list over; a watch that goes silent raises its read timeout and is resumed; every
watch asks for bookmarks and a server-side timeout, with a read timeout a little longer.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from urllib3.exceptions import ReadTimeoutError

from placer.inputs.kubectl import parse_pod
from placer.kube.informers import (
    PAGE,
    WATCHED,
    WORKLOAD_POD_GROUP,
    ApiListWatch,
    GoneError,
    Informer,
    _strip,
    optional_informers,
)
from placer.kube.policy import Outcome, Policy, Response, Result, Timeouts

Raw = dict[str, Any]


def _obj(name: str, version: int) -> Raw:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(version)}}


def _event(kind: str, name: str, version: int) -> Raw:
    return {"type": kind, "object": _obj(name, version)}


class FakeListWatch:
    """Pages of a list and scripted watches; each watch is a list of events, or an exception."""

    def __init__(self, pages: list[list[Raw]], version: str = "10") -> None:
        self.pages = pages
        self.version = version
        self.lists: list[tuple[int, str | None]] = []
        self.watches: list[tuple[str, int]] = []
        self.script: list[list[Raw] | Exception] = []
        self.expire_continue_once = False

    def list(self, *, limit: int, cont: str | None) -> Outcome:
        self.lists.append((limit, cont))
        if cont is not None and self.expire_continue_once:
            self.expire_continue_once = False
            return Outcome(ok=False, status=410, result=Result.REJECTED)
        page = int(cont or 0)
        meta: Raw = {"resourceVersion": self.version}
        if page + 1 < len(self.pages):
            meta["continue"] = str(page + 1)
        return Outcome(ok=True, data=json.dumps({"items": self.pages[page], "metadata": meta}).encode())

    def watch(self, *, version: str, timeout: int) -> Iterator[Raw]:
        self.watches.append((version, timeout))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        yield from step


def _informer(lw: FakeListWatch) -> Informer:
    return Informer("Pod", lw, watch_timeout=60)


def _names(inf: Informer) -> set[str]:
    return {o["metadata"]["name"] for o in inf.items()}


def test_the_first_list_is_paged_and_fills_the_cache_at_once() -> None:
    lw = FakeListWatch([[_obj("a", 1), _obj("b", 2)], [_obj("c", 3)]])
    inf = _informer(lw)
    inf.step()
    assert lw.lists == [(PAGE, None), (PAGE, "1")]
    assert _names(inf) == {"a", "b", "c"} and inf.synced and inf.version == "10"
    assert all(o["kind"] == "Pod" for o in inf.items())


def test_a_watch_resumes_from_the_last_version_it_delivered_bookmarks_included() -> None:
    lw = FakeListWatch([[_obj("a", 1)]])
    inf = _informer(lw)
    inf.step()
    lw.script = [
        [_event("ADDED", "b", 11), _event("MODIFIED", "a", 12)],  # ends: the server's timeoutSeconds
        [_event("DELETED", "a", 13), _event("BOOKMARK", "x", 20)],
        ConnectionResetError("reset"),  # breaks: resumed from the same version
        [_event("ADDED", "c", 21)],
    ]
    inf.step()
    inf.step()
    with pytest.raises(ConnectionResetError):
        inf.step()
    inf.step()
    assert [w[0] for w in lw.watches] == ["10", "12", "20", "20"]
    assert _names(inf) == {"b", "c"}
    assert len(lw.lists) == 1  # never listed again


def test_a_silent_watch_raises_its_read_timeout_and_is_resumed_not_relisted() -> None:
    lw = FakeListWatch([[_obj("a", 1)]])
    inf = _informer(lw)
    inf.step()
    lw.script = [ReadTimeoutError(None, "/api/v1/pods", "Read timed out."), [_event("ADDED", "b", 11)]]  # type: ignore[arg-type]
    with pytest.raises(ReadTimeoutError):
        inf.step()
    inf.step()
    assert [w[0] for w in lw.watches] == ["10", "10"] and len(lw.lists) == 1
    assert _names(inf) == {"a", "b"}


@pytest.mark.parametrize(
    "gone", [GoneError("410"), [{"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}]]
)
def test_410_gone_is_answered_by_a_paged_relist_that_replaces_the_cache(gone: Any) -> None:
    lw = FakeListWatch([[_obj("a", 1)], [_obj("b", 2)]])
    inf = _informer(lw)
    inf.step()
    lw.script = [gone, [_event("ADDED", "d", 31)]]
    lw.pages = [[_obj("c", 30)]]  # a and b were deleted while the watch was away
    lw.version = "30"
    inf.step()
    assert inf.version is None
    inf.step()  # the relist
    assert _names(inf) == {"c"} and inf.version == "30"
    inf.step()
    assert lw.watches[-1][0] == "30" and _names(inf) == {"c", "d"}
    assert inf.lists == 2


def test_an_expired_continue_token_starts_the_list_over() -> None:
    lw = FakeListWatch([[_obj("a", 1)], [_obj("b", 2)]])
    lw.expire_continue_once = True
    inf = _informer(lw)
    inf.step()
    assert lw.lists == [(PAGE, None), (PAGE, "1"), (PAGE, None), (PAGE, "1")]
    assert _names(inf) == {"a", "b"}


def test_a_failed_list_keeps_the_cache_and_is_retried() -> None:
    lw = FakeListWatch([[_obj("a", 1)]])
    inf = _informer(lw)
    inf.step()
    lw.script = [GoneError("410")]
    inf.step()
    lw.list = lambda **_: Outcome(ok=False, result=Result.UNAVAILABLE, reason="refused")  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        inf.step()
    assert _names(inf) == {"a"} and inf.version is None


class _Stream:
    def __init__(self, status: int, chunks: list[bytes]) -> None:
        self.status, self.chunks, self.data = status, chunks, b""
        self.released = False

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        yield from self.chunks

    def release_conn(self) -> None:
        self.released = True


class _Http:
    def __init__(self, resp: _Stream) -> None:
        self.resp = resp
        self.asked: list[tuple[Timeouts, dict[str, Any]]] = []

    def stream(self, path: str, timeouts: Timeouts, *, query: dict[str, Any]) -> _Stream:
        self.asked.append((timeouts, query))
        return self.resp

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        return lambda timeouts: Response(200, b"{}")


def test_a_watch_request_asks_for_bookmarks_and_a_timeout_and_reads_with_a_longer_one() -> None:
    lines = [_event("ADDED", "a", 5), _event("BOOKMARK", "x", 6)]
    raw = b"".join(json.dumps(e).encode() + b"\n" for e in lines)
    resp = _Stream(200, [raw[:7], raw[7:40], raw[40:]])  # lines split across chunks
    http = _Http(resp)
    events = list(ApiListWatch(http, Policy(), "/api/v1/pods").watch(version="4", timeout=60))
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    timeouts, query = http.asked[0]
    assert query == {"watch": "true", "resourceVersion": "4", "timeoutSeconds": 60, "allowWatchBookmarks": "true"}
    assert 60 < timeouts.read <= 90
    assert resp.released
    with pytest.raises(GoneError):
        list(ApiListWatch(_Http(_Stream(410, [])), Policy(), "/api/v1/pods").watch(version="4", timeout=60))


class DiscoveryHttp:
    """Answers discovery requests: ``served`` maps a group/version path to its resource names."""

    def __init__(self, served: dict[str, list[str]]) -> None:
        self.served = served
        self.asked: list[str] = []

    def call(self, method: str, path: str, **_: Any) -> Any:
        self.asked.append(path)

        def send(_timeouts: Timeouts) -> Response:
            if path not in self.served:
                return Response(status=404, data=b'{"kind":"Status","code":404}')
            resources = [{"name": name} for name in self.served[path]]
            return Response(status=200, data=json.dumps({"resources": resources}).encode())

        return send


def test_pod_group_informers_exist_only_for_the_apis_the_server_serves(caplog: pytest.LogCaptureFixture) -> None:
    http = DiscoveryHttp({"/apis/scheduling.k8s.io/v1alpha2": ["workloads", "podgroups", "podgroups/status"]})
    found = optional_informers(http, Policy())
    assert list(found) == [WORKLOAD_POD_GROUP]
    # Each group/version is discovered once, however many of the registry's kinds it serves.
    assert sorted(http.asked) == sorted({k.group_path for k in WATCHED if k.optional})
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_a_server_without_the_gang_apis_gets_no_pod_group_informer_and_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert optional_informers(DiscoveryHttp({}), Policy()) == {}
    # A group served without podgroups (an older version of it) counts as not served either.
    assert optional_informers(DiscoveryHttp({"/apis/scheduling.x-k8s.io/v1alpha1": ["elasticquotas"]}), Policy()) == {}
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


# -- issue 31: no hot loop, relist on 504, bounded dirty keys, no managedFields --------------------


class Sim:
    """Simulated time for an informer's loop: ``run`` sums the pauses ``once`` asks for (and a
    little per request) until ``seconds`` have passed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def run(self, inf: Informer, seconds: float) -> None:
        while self.now < seconds:
            self.now += 0.001  # every request takes a millisecond
            self.now += inf.once()


class Forever(FakeListWatch):
    """Every watch answers the same thing, for ever."""

    def __init__(self, answer: list[Raw] | Exception) -> None:
        super().__init__([[_obj("a", 1)]])
        self.answer = answer

    def watch(self, *, version: str, timeout: int) -> Iterator[Raw]:
        self.watches.append((version, timeout))
        if isinstance(self.answer, Exception):
            raise self.answer
        yield from self.answer


TOO_LARGE = {"type": "ERROR", "object": {"code": 504, "message": "Too large resource version: 99, current: 10"}}


@pytest.mark.parametrize(
    "answer",
    [
        GoneError("410"),  # a watch answered 410 every time: was 19,382 lists/s
        [{"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}],
        [],  # a watch that ends at once with nothing: was 1.1 M watches/s
        [TOO_LARGE],
        RuntimeError("watch error 500"),
    ],
)
def test_a_watch_failing_the_same_way_for_ever_gets_a_few_requests_a_second_at_most(answer: Any) -> None:
    sim = Sim()
    lw = Forever(answer)
    inf = Informer("Pod", lw, watch_timeout=60, clock=sim, rng=lambda: 0.0)
    sim.run(inf, 600.0)
    requests = len(lw.lists) + len(lw.watches)
    assert requests / 600.0 < 1.0, requests  # backed off to tens of seconds between attempts
    assert inf.failing_since is not None and inf.last_error


def test_a_watch_that_delivers_ends_the_back_off() -> None:
    sim = Sim()
    lw = Forever(GoneError("410"))
    inf = Informer("Pod", lw, watch_timeout=60, clock=sim, rng=lambda: 0.0)
    sim.run(inf, 100.0)
    lw.answer = [_event("ADDED", "b", 11)]
    sim.run(inf, 300.0)
    assert inf.failures == 0 and inf.failing_since is None and "b" in _names(inf)


def test_a_watch_answered_504_too_large_lists_again_instead_of_resuming_for_ever() -> None:
    lw = FakeListWatch([[_obj("a", 1)]])
    inf = _informer(lw)
    inf.step()
    lw.script = [[TOO_LARGE]]
    lw.pages, lw.version = [[_obj("c", 5)]], "5"  # the restored etcd's state
    assert inf.step() is False and inf.version is None
    inf.step()
    assert _names(inf) == {"c"} and inf.version == "5"
    body = json.dumps({"kind": "Status", "code": 504, "message": "Too large resource version: 99"}).encode()
    resp = _Stream(504, [])
    resp.data = body
    with pytest.raises(GoneError):  # the same answer as an HTTP status
        list(ApiListWatch(_Http(resp), Policy(), "/api/v1/pods").watch(version="99", timeout=60))


def test_the_changed_keys_of_an_undrained_informer_stay_bounded() -> None:
    lw = FakeListWatch([[]])
    inf = _informer(lw)
    inf.step()
    inf.drain()
    churn = [
        e
        for i in range(5000)
        for e in (_event("ADDED", f"rs-{i}", 2 * i + 11), _event("DELETED", f"rs-{i}", 2 * i + 12))
    ]
    lw.script = [churn]
    inf.step()
    assert len(inf._dirty) <= 1000 + 1
    everything, changed = inf.drain()
    assert everything and changed == {}


def test_cached_objects_carry_no_managed_fields() -> None:
    heavy = _obj("a", 1)
    heavy["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    lw = FakeListWatch([[heavy]])
    inf = _informer(lw)
    inf.step()
    event = _event("MODIFIED", "a", 2)
    event["object"]["metadata"]["managedFields"] = [{"manager": "kube-scheduler"}]
    lw.script = [[event]]
    inf.step()
    assert all("managedFields" not in o["metadata"] for o in inf.items())


def _heavy_pod() -> Raw:
    """A pod as the API server sends it: managedFields, probes, env, a projected token volume,
    every condition, full container statuses; and the fields placer does read, all set."""
    container = {
        "name": "app",
        "image": "registry.example.com/app:1.2",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/app"],
        "args": ["--port=8080"],
        "env": [{"name": "A", "value": "1"}],
        "workingDir": "/",
        "envFrom": [{"configMapRef": {"name": "cfg"}}],
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
        "lifecycle": {"preStop": {}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
        "startupProbe": {"exec": {}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP", "hostIP": "10.0.0.1"}],
    }
    sidecar = {**container, "name": "proxy", "restartPolicy": "Always", "ports": []}
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "web-1", "namespace": "team-a", "uid": "u-1", "resourceVersion": "9",
            "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "web"},
            "annotations": {"placer.io/gang-size": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs",
                                 "controller": True}],
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {"f:phase": {}}}}],
        },
        "spec": {
            "schedulerName": "placer", "priority": 5, "nodeName": "n1", "restartPolicy": "Always",
            "containers": [container], "initContainers": [sidecar, {**container, "name": "init"}],
            "nodeSelector": {"zone": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}],
            "overhead": {"cpu": "100m"},
            "volumes": [
                {"name": "cfg", "configMap": {"name": "cfg"}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            ],
        },
        "status": {
            "phase": "Running", "startTime": "2026-01-01T00:00:01Z", "hostIP": "10.0.0.1",
            "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"},
                {"type": "PodResizePending", "status": "True", "reason": "Infeasible"},
            ],
            "containerStatuses": [
                {"name": "app", "image": "x", "imageID": "y", "containerID": "z", "ready": True, "restartCount": 3,
                 "state": {"running": {}}, "allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "3"}}},
            ],
            "initContainerStatuses": [{"name": "proxy", "image": "x", "state": {"running": {}}}],
        },
    }  # fmt: skip


def _pods_of_every_shape() -> list[Raw]:
    dump = json.loads((Path(__file__).parent.parent / "examples" / "boreas-dump.json").read_text())
    pods = [i for i in dump["items"] if i.get("kind") == "Pod"]
    pending = _heavy_pod()
    del pending["spec"]["nodeName"]
    pending["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    return [_heavy_pod(), pending, *pods]


def test_a_trimmed_pod_parses_exactly_as_the_pod_the_api_sent() -> None:
    """The cache drops what no reader looks at, so the model is the same with or without it."""
    pods = _pods_of_every_shape()
    assert len(pods) > 5
    for raw in pods:
        trimmed = _strip(copy.deepcopy(raw))
        assert parse_pod(trimmed) == parse_pod(raw)
        assert len(json.dumps(trimmed)) <= len(json.dumps(raw))
