"""e2e fixtures: one real control plane per test session (testenv/cluster.py).

When the binaries are missing (`make testenv` not run): on a developer machine every e2e test is
skipped with one line saying so; in CI (``CI`` set to a true value) or when
``PLACER_E2E_REQUIRED=1`` (set by ``make e2e``) the tests fail instead. A control plane that is
built but does not start is always an error.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import kube_helpers as kh  # noqa: E402
from kubernetes import client  # noqa: E402

from testenv import cluster as testenv  # noqa: E402

E2E_DIR = Path(__file__).resolve().parent
_STARTED: list[testenv.Cluster] = []


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in {"", "0", "false", "no", "off"}


def e2e_required() -> bool:
    return _truthy(os.environ.get("CI")) or _truthy(os.environ.get("PLACER_E2E_REQUIRED"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e carries the e2e marker, even if a module forgets pytestmark.
    Without a built environment (and outside CI) they carry a skip marker too: pytest then
    folds the skips into one summary line per file instead of one line per test."""
    ours = [item for item in items if E2E_DIR in Path(str(item.path)).parents]
    skip = None
    if ours and not e2e_required() and not testenv.is_built():
        skip = pytest.mark.skip(reason=testenv.not_built_message())
    for item in ours:
        item.add_marker(pytest.mark.e2e)
        if skip is not None:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for c in _STARTED:
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in c.timings.items() if k != "total")
        terminalreporter.write_line(f"e2e control plane: started in {c.timings.get('total', 0):.1f}s ({phases})")


@pytest.fixture(scope="session")
def cluster() -> Iterator[testenv.Cluster]:
    if not testenv.is_built():
        msg = testenv.not_built_message()
        if e2e_required():
            pytest.fail(msg + " (CI: the e2e environment is required)", pytrace=False)
        pytest.skip(msg)
    c = testenv.Cluster(with_scheduler=True, workloads=True)  # 1.37's workload APIs and gates on
    c.start()  # ClusterError (with the failing component's log) -> error, never a skip
    _STARTED.append(c)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def api_client(cluster: testenv.Cluster) -> Iterator[client.ApiClient]:
    with kh.admin_api(cluster.kubeconfig) as api:
        yield api


@pytest.fixture(scope="session")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture(scope="session")
def policy(api_client: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api_client)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace per test (deleted afterwards, without waiting)."""
    ns = kh.create_namespace(core)
    try:
        yield ns
    finally:
        kh.delete_namespace(core, ns)


@pytest.fixture
def make_nodes(core: client.CoreV1Api) -> Iterator[Callable[..., list[str]]]:
    """Factory: ``make_nodes(3, cpu="8", labels={...}, taints=[...])`` creates kwok nodes, waits
    until they are Ready and schedulable, returns their names, and deletes them after the test.
    Each call labels its nodes ``e2e-group=<unique>`` (pass it in node_selector to keep a
    workload on them)."""
    created: list[str] = []

    def make(count: int, prefix: str = "kwok", **kwargs: Any) -> list[str]:
        group = kh.unique(prefix)
        labels = {"e2e-group": group, **kwargs.pop("labels", {})}
        names = [f"{group}-{i}" for i in range(count)]
        for name in names:
            kh.create_node(core, name, labels=labels, **kwargs)
            created.append(name)
        kh.wait_nodes_ready(core, names)
        return names

    try:
        yield make
    finally:
        for name in created:
            kh.delete_node(core, name)


# The controller fixtures, shared by the e2e modules that run `placer run`.
from controller_support import controllers, placer_kubeconfig  # noqa: E402, F401
from workload_support import priority_class  # noqa: E402, F401


@pytest.fixture(scope="session")
def helm() -> str:
    """The helm binary for the chart checks: ``PLACER_HELM`` (``make e2e`` builds it, mk/deploy.mk)
    or PATH; missing, a skip on a developer machine and a failure in CI."""
    found = os.environ.get("PLACER_HELM") or shutil.which("helm")
    if not found or not Path(found).is_file():
        message = "helm not found: `make helm` builds it (then PLACER_HELM=<its path>, or helm on PATH)"
        if e2e_required():
            pytest.fail(message + " (CI: the chart checks are required)", pytrace=False)
        pytest.skip(message)
    return found
