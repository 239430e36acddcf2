"""Connecting to the API server: in-cluster config by default, a kubeconfig file when given.

``Http`` sends raw JSON requests on the client's own connection pool (its TLS settings, its auth
and its user agent) with the timeouts the call policy gives each attempt, and with urllib3's own
retries off: every retry is decided by ``placer.kube.policy``, where it is bounded and visible.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any
from urllib.parse import urlencode

import urllib3
from kubernetes import client, config

from placer import __version__
from placer.errors import InputError
from placer.kube.policy import Call, Response, Timeouts

__all__ = ["Http", "api_client", "connect", "own_client", "user_agent"]


def user_agent(identity: str) -> str:
    """What the apiserver's audit log records for every request of this replica."""
    return f"placer/{__version__} ({identity})"


def api_client(kubeconfig: str | None = None, identity: str = "", *, context: str | None = None) -> client.ApiClient:
    """An ApiClient for the cluster placer runs in (or the one ``kubeconfig`` and ``context``
    point at; KUBECONFIG and ~/.kube/config as kubectl reads them when neither is given)."""
    cfg = client.Configuration()
    if kubeconfig or context:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
    else:
        config.load_kube_config(client_configuration=cfg)
    cfg.retries = False  # no hidden retries (they retried writes blindly and hid failures)
    api = client.ApiClient(cfg)
    api.user_agent = user_agent(identity or "unknown")
    return api


def own_client(api: client.ApiClient, *, connections: int | None = None) -> client.ApiClient:
    """A client on the same configuration (server, credentials, user agent) with a connection
    pool of its own, keeping up to ``connections`` connections (default: the client's)."""
    configuration = api.configuration
    if connections is not None:
        configuration = copy.copy(configuration)  # shares the credentials (and their refreshes)
        configuration.connection_pool_maxsize = connections
    own = client.ApiClient(configuration)
    own.user_agent = api.user_agent
    return own


def connect(kubeconfig: str | None = None, identity: str = "", *, context: str | None = None) -> client.ApiClient:
    """``api_client``, or an ``InputError`` in one line when the configuration cannot be loaded
    (a missing or unusable kubeconfig, no in-cluster service account): ``placer solve`` and
    ``placer run`` both answer it with exit code 2, never a traceback."""
    try:
        return api_client(kubeconfig, identity, context=context)
    except Exception as exc:  # (the kubernetes config loader raises several unrelated types)
        raise InputError(kubeconfig or "kubeconfig", "", f"cannot load: {exc}") from None


class Http:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        headers.update({k: str(v) for k, v in self.api.default_headers.items()})  # the user agent
        for auth in self.api.configuration.auth_settings().values():
            headers[auth["key"]] = str(auth["value"])
        return headers

    def _url(self, path: str, query: dict[str, Any] | None) -> str:
        url = f"{self.api.configuration.host}{path}"
        return f"{url}?{urlencode(query)}" if query else url

    def request(
        self,
        method: str,
        path: str,
        timeouts: Timeouts,
        *,
        body: object | None = None,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Response:
        """One exchange; connection trouble raises urllib3's exception (the policy classifies it)."""
        resp = self.api.rest_client.pool_manager.request(
            method,
            self._url(path, query),
            body=None if body is None else json.dumps(body).encode(),
            headers=self._headers(content_type),
            timeout=urllib3.Timeout(connect=timeouts.connect, read=timeouts.read),
            retries=False,
            preload_content=True,
        )
        return Response(status=resp.status, data=resp.data or b"", headers=dict(resp.headers))

    def call(self, method: str, path: str, **kwargs: Any) -> Call:
        """The exchange as a ``Call`` for ``Policy.call``."""
        return lambda timeouts: self.request(method, path, timeouts, **kwargs)

    def stream(self, path: str, timeouts: Timeouts, *, query: dict[str, Any]) -> Any:
        """A watch: the open response, read line by line by the caller. The read timeout applies to
        every read, so a watch that goes silent raises instead of hanging."""
        return self.api.rest_client.pool_manager.request(
            "GET",
            self._url(path, query),
            headers=self._headers("application/json"),
            timeout=urllib3.Timeout(connect=timeouts.connect, read=timeouts.read),
            retries=False,
            preload_content=False,
        )
