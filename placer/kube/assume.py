"""The assume cache: pods this replica bound (or is binding) that the watch has not shown bound yet.

As kube-scheduler assumes a pod on its node the moment it decides, so that the next batch does not
book the same room twice while the bind is in flight. Keyed by UID, so a pod deleted and recreated
under the same name is a new pod, not an assumed one. An assumption is released only by evidence:

- the watch shows the pod bound (anywhere) or shows it gone (its UID no longer listed);
- the bind failed definitely (refused, conflict, never sent);
- a read of the pod, after a bind whose answer was lost, shows it still unbound.

Never by a timeout alone: a watch that lags behind a bind that landed would otherwise let the
room be booked twice. An assumption whose bind outcome is unknown is marked so; the runner reads
the pod back until it knows.
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.models import Pod

__all__ = ["AssumeCache", "Assumption"]


@dataclass
class Assumption:
    key: str
    uid: str
    node: str
    since: float
    unknown: int = 0  # reads owed since the bind's answer was lost (0: the outcome is known)


def _id(pod: Pod) -> str:
    return pod.uid or pod.key  # pods from hand-written fixtures may lack a UID


class AssumeCache:
    def __init__(self) -> None:
        self._by_uid: dict[str, Assumption] = {}
        self.version = 0  # bumped whenever an assumption is made or dropped (what ``apply`` gives changes)

    def assume(self, pod: Pod, node: str, now: float) -> None:
        self._by_uid[_id(pod)] = Assumption(pod.key, _id(pod), node, now)
        self.version += 1

    def release(self, pod: Pod) -> None:
        if self._by_uid.pop(_id(pod), None) is not None:
            self.version += 1

    def get(self, pod: Pod) -> Assumption | None:
        return self._by_uid.get(_id(pod))

    def mark_unknown(self, pod: Pod) -> int:
        """The bind's outcome is (still) unknown; how many times in a row it has been."""
        found = self._by_uid.get(_id(pod))
        if found is None:
            return 0
        found.unknown += 1
        return found.unknown

    def clear(self) -> None:
        self._by_uid.clear()
        self.version += 1

    def __len__(self) -> int:
        return len(self._by_uid)

    def __contains__(self, item: object) -> bool:
        """A pod (by UID) or a ``namespace/name`` key (any assumption of that name)."""
        if isinstance(item, Pod):
            return _id(item) in self._by_uid
        return any(a.key == item for a in self._by_uid.values())

    def apply(self, pods: list[Pod]) -> list[Pod]:
        """``pods`` as this replica believes them: an assumed pod still unbound in the cache sits on
        its assumed node. Releases what the watch confirms (bound, or gone)."""
        listed = {_id(p) for p in pods}
        for uid in [u for u in self._by_uid if u not in listed]:
            del self._by_uid[uid]
            self.version += 1
        out = []
        for pod in pods:
            found = self._by_uid.get(_id(pod))
            if found is None:
                out.append(pod)
            elif pod.node_name is None:
                out.append(pod.model_copy(update={"node_name": found.node, "phase": "Running"}))
            else:
                del self._by_uid[_id(pod)]  # the bind is observed
                self.version += 1
                out.append(pod)
        return out
