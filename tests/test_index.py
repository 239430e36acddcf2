"""The controller's parsed indexes (placer.kube.index), fed by an informer's real watch and list
code: after any sequence of watch events and lists, the index holds what parsing the whole cache
again would give (the same pods; after a list in the list's order) and the same queue of pods
waiting for this scheduler; and it parses only the objects whose resourceVersion changed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.inputs import kubectl
from placer.inputs.kubectl import parse_pod
from placer.kube.index import PodIndex
from placer.kube.informers import Informer
from placer.kube.policy import Outcome
from placer.models import Pod

Raw = dict[str, Any]
NAMES = [f"p{i}" for i in range(6)]
NAMESPACES = ["team-a", "team-b"]


class ScriptedListWatch:
    """A list of whatever ``listed`` holds; each watch delivers the next scripted events."""

    def __init__(self) -> None:
        self.listed: list[Raw] = []
        self.events: list[Raw] = []

    def list(self, *, limit: int, cont: str | None) -> Outcome:
        body = {"items": self.listed, "metadata": {"resourceVersion": "1"}}
        return Outcome(ok=True, data=json.dumps(body).encode())

    def watch(self, *, version: str, timeout: int) -> Iterator[Raw]:
        events, self.events = self.events, []
        yield from events


# One pod's state: (namespace, name, scheduler, node or None, terminating, gated, cpu, started,
# nominated node, a status field placer does not read). Versions of one pod that differ only in
# node, started or nominated node are the ones a pod goes through on its way to running.
state = st.tuples(
    st.sampled_from(NAMESPACES),
    st.sampled_from(NAMES),
    st.sampled_from(["placer", "default-scheduler"]),
    st.sampled_from([None, "n1", "n2"]),
    st.booleans(),
    st.booleans(),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from([None, "n1"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
)
State = tuple[str, str, str, str | None, bool, bool, int, bool, str | None, str]
# A step: some watch events (a new state of a pod, or its deletion), or a list of the cache.
step = st.one_of(
    st.lists(st.tuples(st.sampled_from(["put", "delete"]), state), min_size=1, max_size=6),
    st.just("relist"),
)


def _raw(s: State, version: int) -> Raw:
    namespace, name, scheduler, node, terminating, gated, cpu, started, nominated, ip = s
    meta: Raw = {
        "name": name,
        "namespace": namespace,
        "uid": f"{namespace}-{name}",
        "resourceVersion": str(version),
        "creationTimestamp": "2024-01-01T00:00:00Z",
    }
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:01:00Z"
    spec: Raw = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
    }
    if node is not None:
        spec["nodeName"] = node
        meta["labels"] = {"app": "x", "topology.kubernetes.io/zone": f"zone-{node}"}  # the API server's, at bind
    else:
        meta["labels"] = {"app": "x"}
    if gated:
        spec["schedulingGates"] = [{"name": "wait"}]
    status: Raw = {"phase": "Running" if started else "Pending", "podIP": ip}
    if started:
        status["startTime"] = "2024-01-01T00:00:05Z"
        status["containerStatuses"] = [{"name": "c", "ready": True, "state": {"running": {}}}]
    if nominated:
        status["nominatedNodeName"] = nominated
    meta["managedFields"] = [{"manager": "test", "time": f"2024-01-01T00:00:{version % 60:02d}Z"}]
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _in_scope(pod: Pod) -> bool:
    return pod.namespace == "team-a"


def _full(informer: Informer) -> tuple[list[Pod], set[str]]:
    """What parsing the whole cache again gives: every pod, and the queue."""
    pods = [parse_pod(raw) for raw in informer.items()]
    return pods, {p.key for p in pods if p.awaits("placer") and _in_scope(p)}


@settings(max_examples=60, deadline=None)
@given(st.lists(step, min_size=1, max_size=12))
def test_an_event_sequence_gives_the_index_and_queue_of_a_full_reparse(steps: list[Any]) -> None:
    lw = ScriptedListWatch()
    informer = Informer("Pod", lw)
    informer.step()  # the first list (empty)
    index = PodIndex("placer", _in_scope)
    version = 1
    for s in steps:
        before = index.parses
        if s == "relist":
            lw.listed = informer.items()
            changed = 0
            informer.version = None
            informer.step()  # lists again: every object handed over, none of them new
        else:
            lw.events = []
            for op, pod in s:
                version += 1
                lw.events.append({"type": "MODIFIED" if op == "put" else "DELETED", "object": _raw(pod, version)})
            changed = len({f"{pod[0]}/{pod[1]}" for op, pod in s if op == "put"})
            informer.watch_once()
        index.update(informer)
        pods, queue = _full(informer)
        if s == "relist":
            assert index.values() == pods
        assert sorted(index.values(), key=lambda p: p.key) == sorted(pods, key=lambda p: p.key)
        assert set(index.waiting) == queue
        assert all(index.waiting[k] == index.get(k) for k in queue)
        assert index.parses - before <= changed  # only changed objects are parsed, each once


def _counted(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], ScriptedListWatch, Informer, PodIndex]:
    """An empty informer and its index, with the resourceVersion of every full parse recorded."""
    full: list[str] = []
    parse = kubectl.parse_pod

    def counting(raw: Any, source: str = "api") -> Pod:
        full.append(raw["metadata"]["resourceVersion"])
        return parse(raw, source)

    monkeypatch.setattr(kubectl, "parse_pod", counting)
    lw = ScriptedListWatch()
    informer = Informer("Pod", lw)
    informer.step()
    return full, lw, informer, PodIndex("placer", _in_scope)


def test_a_pod_bound_and_started_is_parsed_in_full_once(monkeypatch: pytest.MonkeyPatch) -> None:
    full, lw, informer, index = _counted(monkeypatch)
    pending: State = ("team-a", "a", "placer", None, False, False, 1, False, None, "10.0.0.1")
    versions = [
        pending,
        (*pending[:8], "n1", pending[9]),  # nominated (a preemption's pod)
        (*pending[:3], "n1", *pending[4:8], "n1", pending[9]),  # bound
        (*pending[:3], "n1", *pending[4:7], True, "n1", "10.0.0.2"),  # started
        (*pending[:3], "n1", True, *pending[5:7], True, "n1", "10.0.0.2"),  # being deleted
    ]
    for version, s in enumerate(versions, start=2):
        lw.events = [{"type": "MODIFIED", "object": _raw(s, version)}]
        informer.watch_once()
        index.update(informer)
        assert index.values() == [parse_pod(raw) for raw in informer.items()]
    assert full == ["2"] and index.parses == 5 and index.values()[0].terminating
    lw.events = [{"type": "MODIFIED", "object": _raw((*versions[-1][:6], 2, *versions[-1][7:]), 9)}]
    informer.watch_once()
    index.update(informer)  # its requests changed: parsed again, in full
    assert full == ["2", "9"] and index.values()[0].requests["cpu"] == 2000
    assert index.values()[0].labels == {"app": "x", "topology.kubernetes.io/zone": "zone-n1"}


def test_a_label_change_of_the_pods_own_is_parsed_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the topology labels the API server writes at bind count as placement: a change of any
    other label (which gangs, Jobs' completion indexes and selectors read) is parsed in full."""
    full, lw, informer, index = _counted(monkeypatch)
    bound: State = ("team-a", "a", "placer", "n1", False, False, 1, False, None, "10.0.0.1")
    first = _raw(bound, 2)
    relabelled = _raw(bound, 3)
    relabelled["metadata"]["labels"]["placer.io/gang"] = "g"
    zone = _raw(bound, 4)
    zone["metadata"]["labels"] = {**relabelled["metadata"]["labels"], "topology.kubernetes.io/region": "r1"}
    for raw in (first, relabelled, zone):
        lw.events = [{"type": "MODIFIED", "object": raw}]
        informer.watch_once()
        index.update(informer)
        assert index.values() == [parse_pod(raw)]
    assert full == ["2", "3"]  # the region label alone reused the parse


def test_a_list_keeps_the_parse_of_every_unchanged_version_and_drops_what_is_gone() -> None:
    lw = ScriptedListWatch()
    a: State = ("team-a", "a", "placer", None, False, False, 1, False, None, "10.0.0.1")
    b: State = ("team-a", "b", "placer", "n1", False, False, 1, True, None, "10.0.0.1")
    lw.listed = [_raw(a, 2), _raw(b, 3)]
    informer = Informer("Pod", lw)
    informer.step()
    index = PodIndex("placer", _in_scope)
    index.update(informer)
    assert index.parses == 2 and list(index.waiting) == ["team-a/a"]
    first = index.get("team-a/a")
    lw.listed = [_raw(a, 2)]  # b is gone; a is the same version
    informer.version = None
    informer.step()
    assert index.update(informer)
    assert index.parses == 2 and index.get("team-a/a") is first and index.get("team-a/b") is None
    assert not index.update(informer)  # nothing changed since: nothing to do
