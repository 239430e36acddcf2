"""Leader election on a coordination.k8s.io Lease (the client library's LeaderElection/LeaseLock).

Only the leader binds or evicts. Losing the lease ends the process (like kube-scheduler), so the
Deployment restarts it as a follower; it never keeps acting on a lease it no longer holds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from placer.models import LeaderElection

__all__ = ["Leadership"]

log = logging.getLogger("placer.kube.leader")


class Leadership:
    def __init__(
        self, api: client.ApiClient, settings: LeaderElection, identity: str, on_lost: Callable[[], None]
    ) -> None:
        self.api = api
        self.leading = threading.Event()
        self._settings = settings
        self._identity = identity
        self._on_lost = on_lost
        if not settings.enabled:
            self.leading.set()

    def start(self) -> None:
        if not self._settings.enabled:
            return
        s = self._settings
        lock = LeaseLock(s.lease_name, s.namespace, self._identity)
        lock.api_instance = client.CoordinationV1Api(self.api)  # not the library's global default client
        config = electionconfig.Config(
            lock,
            lease_duration=s.lease_duration,
            renew_deadline=s.renew_deadline,
            retry_period=s.retry_period,
            onstarted_leading=self._started,
            onstopped_leading=self._stopped,
        )
        election = leaderelection.LeaderElection(config)

        def run() -> None:
            try:
                election.run()
            except Exception:
                log.exception("leader election failed")
            self.leading.clear()
            self._on_lost()

        threading.Thread(target=run, name="leader", daemon=True).start()

    def _started(self) -> None:
        log.info("%s leads", self._identity)
        self.leading.set()

    def _stopped(self) -> None:
        log.warning("%s lost the lease", self._identity)
        self.leading.clear()
        self._on_lost()
