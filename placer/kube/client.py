"""Connecting to the API server: in-cluster config by default, a kubeconfig file when given."""

from __future__ import annotations

import os

from kubernetes import client, config

__all__ = ["api_client"]


def api_client(kubeconfig: str | None = None, *, context: str | None = None) -> client.ApiClient:
    """An ApiClient for the cluster placer runs in (or the one ``kubeconfig`` and ``context``
    point at; KUBECONFIG and ~/.kube/config as kubectl reads them when neither is given)."""
    cfg = client.Configuration()
    if kubeconfig or context:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
    else:
        config.load_kube_config(client_configuration=cfg)
    cfg.retries = 3
    return client.ApiClient(cfg)
