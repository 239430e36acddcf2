"""Informers against a fake list/watch: they cannot hang and never relist without a reason.

Aspects: the first list is paged (limit/continue) and replaces the cache at once; a watch resumes
from the last resourceVersion delivered (bookmarks included) after it ends or breaks; only 410
Gone (as an HTTP status or a watch ERROR event) makes it list again, paged; an expired continue
token starts the list over; a watch that goes silent raises its read timeout and is resumed; every
watch asks for bookmarks and a server-side timeout, with a read timeout a little longer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from urllib3.exceptions import ReadTimeoutError

from placer.kube.informers import (
    OPTIONAL,
    PAGE,
    WORKLOAD_POD_GROUP,
    ApiListWatch,
    GoneError,
    Informer,
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
    assert sorted(http.asked) == sorted(gv for gv, _ in OPTIONAL.values())
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_a_server_without_the_gang_apis_gets_no_pod_group_informer_and_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert optional_informers(DiscoveryHttp({}), Policy()) == {}
    # A group served without podgroups (an older version of it) counts as not served either.
    assert optional_informers(DiscoveryHttp({"/apis/scheduling.x-k8s.io/v1alpha1": ["elasticquotas"]}), Policy()) == {}
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
