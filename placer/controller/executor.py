"""Executing a global plan step by step against what the cluster really does.

Pure state machine: the caller passes observations (``World``) and the outcomes of the actions
it carried out; the executor answers with the next actions. Rules:

- ``evict`` becomes an ``Evict`` action once its predecessors are done; a refusal (HTTP 429 from
  a PodDisruptionBudget, or any error) fails the step and abandons everything that depends on it;
  404 (already gone) counts as done.
- ``await-gone`` is done when the victim (same UID) is no longer seen; the room it held counts as
  free only then. It times out after ``await_gone`` seconds.
- ``bind`` of a pending pod, or of the replacement of an evicted pod (``Step.replaces``: a pod of
  the victim's owner and namespace, addressed to this scheduler and in its scope (``PodView.ours``),
  not among the owner's pods seen when the eviction was sent, created after the victim (both
  creation times are the API server's: no client clock is compared with them), unbound, not yet
  claimed; replacements are interchangeable), is issued once predecessors are done and the node really has room for it
  (``World.free``, which counts terminating pods and binds not yet observed). An Indexed Job's
  replacement is the new pod with the victim's completion index. Waiting for room or for the
  replacement times out (the replacement's wait is longer by the step's ``wait``: a Job's
  backoff); a bind refused with a conflict is abandoned (the pod is re-queued by the next batch).
- A step kind without effect on the cluster (``Effect.MARK``) is done once its predecessors are.
- When a pod or node the plan relies on disappears, the steps that need it are abandoned.
- A gang's binds go out together, only once every member is ready and has room on its planned
  node (each waits with its nomination until then); a gang that never gets room is abandoned
  whole. A bind the API server refuses after that can still leave members bound: Kubernetes has no
  multi-pod transaction.
- Every deadline counts from when its step became ready (its last predecessor done), not from the
  plan's start.
- One rule on any failure (a refusal, a timeout, a conflict, something gone): the plan is
  abandoned. Nothing more is evicted; a replacement whose victim was already evicted is still
  bound to its planned node if it gets room in time, else it joins normal batching; every other
  step still waiting is abandoned, so the pods the plan was for go back to the queue.

Steps are dispatched on their kind's effect (``placer.models.steps``) through ``_HANDLERS``.
Abandoned pods simply stay Pending and join a later batch, which re-plans on the real state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from placer.models import Effect, Step

__all__ = ["Abandon", "Bind", "Evict", "PlanRun", "PodView", "World"]

State = Literal["waiting", "running", "done", "failed", "abandoned"]


@dataclass(frozen=True)
class PodView:
    key: str
    uid: str
    node: str | None
    owner_uid: str | None
    created: float
    requests: Mapping[str, int] = field(default_factory=dict)
    deleting: bool = False
    completion_index: int | None = None  # an Indexed Job's pod: its replacement keeps the index
    ours: bool = True  # addressed to this scheduler and in its namespaces (a replacement must be)


@dataclass(frozen=True)
class World:
    now: float
    pods: Mapping[str, PodView]
    free: Mapping[str, Mapping[str, int]]  # node -> free room (terminating pods still hold theirs)


@dataclass(frozen=True)
class Evict:
    step: int
    pod: str


@dataclass(frozen=True)
class Bind:
    step: int
    pod: str  # the pod actually bound (a captured replacement's own key)
    node: str
    nominated: bool = False  # True: only mark status.nominatedNodeName, room not yet free


@dataclass(frozen=True)
class Abandon:
    step: int
    pod: str | None  # the pod the step was for (None: a replacement that never appeared)
    reason: str
    replaces: str | None = None

    @property
    def subject(self) -> str:
        return self.pod if self.pod is not None else f"replacement of {self.replaces}"


Action = Evict | Bind | Abandon


@dataclass
class _Step:
    spec: Step
    state: State = "waiting"
    since: float = 0.0
    target: str | None = None  # the pod a replacement bind captured
    done_at: float | None = None  # when it was done: its successors' deadlines count from then


class PlanRun:
    def __init__(
        self,
        steps: list[Step],
        victims: Mapping[str, PodView],
        *,
        started: float,
        await_gone: float,
        await_replacement: float,
        await_room: float,
        gangs: Mapping[str, str] | None = None,
    ) -> None:
        self.steps = {s.id: _Step(s, since=started) for s in steps}
        self.gangs = dict(gangs or {})  # pending pod -> its gang: a gang's binds go out together
        self.victims = dict(victims)
        self.evicted_at: dict[str, float] = {}
        # victim -> UIDs of its owner's pods seen when its eviction was sent: none is its replacement
        self.siblings: dict[str, frozenset[str]] = {}
        self.claimed: set[str] = set()
        self.await_gone = await_gone
        self.await_replacement = await_replacement
        self.await_room = await_room
        self.nominated: set[int] = set()
        self.now = started  # the latest observation's time
        self.failure: str | None = None  # why the plan was abandoned, once it was

    # -- results of actions -----------------------------------------------------------------
    def evicted(self, step: int, now: float, *, ok: bool, reason: str = "") -> list[Action]:
        s = self.steps[step]
        if ok:
            self._done(s, now)
            self.evicted_at[_key(s.spec)] = now
            return []
        s.state = "failed"
        why = f"eviction of {s.spec.subject} refused: {reason}"
        return self._abandon_dependents(step, why) + self._fail(why)

    def bound(self, step: int, *, ok: bool, reason: str = "") -> list[Action]:
        s = self.steps[step]
        if ok:
            self._done(s, self.now)
            return []
        s.state = "failed"
        if s.target:
            self.claimed.discard(s.target)
        why = f"bind of {s.target or s.spec.subject} refused: {reason}"
        return [self._abandoned(s, step, why), *self._fail(why)]

    def _done(self, s: _Step, now: float) -> None:
        s.state = "done"
        s.done_at = now

    def _fail(self, reason: str) -> list[Action]:
        """The one rule when anything fails (a refusal, a timeout, a conflict, something gone):
        nothing more is evicted; a replacement whose victim was already evicted is still bound to
        its planned node if that node gets room in time (else it joins normal batching); every
        other step still waiting is abandoned, so the pods the plan was for go back to the queue."""
        self.failure = self.failure or reason
        out: list[Action] = []
        for sid, s in sorted(self.steps.items()):
            if s.state != "waiting":
                continue
            effect = s.spec.kind.effect
            if effect == Effect.AWAIT_GONE and _key(s.spec) in self.evicted_at:
                continue  # its room is being freed: the replacement's bind still needs to know when
            if effect == Effect.BIND and s.spec.replaces is not None and s.spec.replaces in self.evicted_at:
                continue
            s.state = "abandoned"
            out.append(self._abandoned(s, sid, f"plan abandoned: {reason}"))
        return out

    # -- progress -------------------------------------------------------------------------------
    def open_binds(self) -> list[Step]:
        """The binds still to come (or in flight): the room the plan holds for them, which a
        batch solved meanwhile must not take."""
        return [
            s.spec
            for s in self.steps.values()
            if s.spec.kind.effect == Effect.BIND and s.state in ("waiting", "running")
        ]

    @property
    def finished(self) -> bool:
        return all(s.state in ("done", "failed", "abandoned") for s in self.steps.values())

    def advance(self, world: World) -> list[Action]:
        self.now = world.now
        actions: list[Action] = []
        free = {n: dict(r) for n, r in world.free.items()}
        for sid in sorted(self.steps):
            s = self.steps[sid]
            if s.state != "waiting":
                continue
            preds = [self.steps[a] for a in s.spec.after]
            if any(p.state in ("failed", "abandoned") for p in preds):
                actions += self._abandon(sid, "a step it depends on did not happen")
                continue
            if any(p.state != "done" for p in preds):
                continue
            if s.spec.pod in self.gangs and s.spec.kind.effect == Effect.BIND:
                continue  # below, with the rest of its gang
            actions += self._try(sid, s, world, free)
        for gang in sorted(set(self.gangs.values())):
            actions += self._bind_gang(gang, world, free)
        return actions

    def _bind_gang(self, gang: str, world: World, free: dict[str, dict[str, int]]) -> list[Action]:
        """A gang's binds go out together, only once every member is ready and has room on its
        planned node, so no gang is ever left partly bound by a plan."""
        members = [
            (sid, s)
            for sid, s in sorted(self.steps.items())
            if s.spec.pod is not None and self.gangs.get(s.spec.pod) == gang and s.spec.kind.effect == Effect.BIND
        ]
        waiting = [(sid, s) for sid, s in members if s.state == "waiting"]
        if not waiting or len(waiting) < len(members):
            return []  # nothing to do, or some member already bound / failed (the plan fails then)
        if any(self.steps[a].state != "done" for _, s in waiting for a in s.spec.after):
            return []
        since = max(self._ready_since(s) for _, s in waiting)
        trial = {n: dict(r) for n, r in free.items()}
        fits = True
        for _, s in waiting:
            view = world.pods.get(_key(s.spec))
            if s.spec.node not in trial or view is None or view.node is not None or view.deleting:
                sid = waiting[0][0]
                return self._abandon(sid, f"gang {gang}: {_key(s.spec)} or its node is gone")
            room = trial[s.spec.node]
            if any(room.get(r, 0) < q for r, q in view.requests.items()):
                fits = False
                break
            for r, q in view.requests.items():
                room[r] = room.get(r, 0) - q
        if not fits:
            if world.now - since > self.await_room:
                return self._abandon(waiting[0][0], f"gang {gang} never had room for every member")
            out: list[Action] = []
            for sid, s in waiting:
                if sid not in self.nominated:
                    self.nominated.add(sid)
                    out.append(Bind(sid, _key(s.spec), s.spec.node, nominated=True))
            return out
        free.update(trial)
        binds: list[Action] = []
        for sid, s in waiting:
            s.state = "running"
            binds.append(Bind(sid, _key(s.spec), s.spec.node))
        return binds

    def _try(self, sid: int, s: _Step, world: World, free: dict[str, dict[str, int]]) -> list[Action]:
        return _HANDLERS[s.spec.kind.effect](self, sid, s, world, free)

    def _evict(self, sid: int, s: _Step, world: World, free: dict[str, dict[str, int]]) -> list[Action]:
        pod = _key(s.spec)
        victim = self.victims.get(pod)
        seen = world.pods.get(pod)
        if victim is not None and victim.owner_uid is not None:
            owner = victim.owner_uid
            self.siblings[pod] = frozenset(v.uid for v in world.pods.values() if v.owner_uid == owner)
        if victim is None or seen is None or seen.uid != victim.uid:
            self._done(s, world.now)  # already gone: nothing to evict
            self.evicted_at[pod] = world.now
            return []
        s.state = "running"
        return [Evict(sid, pod)]

    def _await_gone(self, sid: int, s: _Step, world: World, free: dict[str, dict[str, int]]) -> list[Action]:
        pod = _key(s.spec)
        victim = self.victims.get(pod)
        seen = world.pods.get(pod)
        if seen is None or victim is None or seen.uid != victim.uid:
            self._done(s, world.now)
            return []
        if world.now - self._ready_since(s) > self.await_gone:
            return self._abandon(sid, f"{pod} still not gone after {self.await_gone:.0f}s")
        return []

    def _mark(self, sid: int, s: _Step, world: World, free: dict[str, dict[str, int]]) -> list[Action]:
        self._done(s, world.now)
        return []

    def _bind(self, sid: int, s: _Step, world: World, free: dict[str, dict[str, int]]) -> list[Action]:
        node = s.spec.node
        if node not in world.free:
            return self._abandon(sid, f"node {node} disappeared")
        if s.spec.replaces is not None:
            target = s.target or self._capture(s.spec.replaces, world)
            if target is None:
                if world.now - self._ready_since(s) > self.await_replacement + s.spec.wait:
                    return self._abandon(sid, f"no replacement for {s.spec.replaces} appeared")
                return []
            s.target = target
        else:
            target = _key(s.spec)
        view = world.pods.get(target)
        if view is None or view.node is not None or view.deleting:
            return self._abandon(sid, f"{target} is gone or was bound by someone else")
        room = free[node]
        if any(room.get(r, 0) < q for r, q in view.requests.items()):
            if world.now - self._ready_since(s) > self.await_room:
                return self._abandon(sid, f"node {node} never had room for {target}")
            if sid not in self.nominated:
                self.nominated.add(sid)
                return [Bind(sid, target, node, nominated=True)]
            return []
        for r, q in view.requests.items():
            room[r] = room.get(r, 0) - q
        s.state = "running"
        return [Bind(sid, target, node)]

    def _ready_since(self, s: _Step) -> float:
        """When the step became ready: when its last predecessor was done (the plan's start for a
        step that waits for nothing). Every step's deadline counts from then."""
        return max([s.since, *(self.steps[a].done_at or s.since for a in s.spec.after)])

    def _capture(self, victim_key: str, world: World) -> str | None:
        victim = self.victims.get(victim_key)
        if victim is None or victim.owner_uid is None:
            return None
        namespace = victim_key.split("/", 1)[0]
        siblings = self.siblings.get(victim_key, frozenset())
        for view in sorted(world.pods.values(), key=lambda v: (v.created, v.key)):
            if (
                view.owner_uid == victim.owner_uid
                and view.key.split("/", 1)[0] == namespace  # an owner reference is the pod's own claim
                and view.ours
                and view.completion_index == victim.completion_index
                and view.node is None
                and not view.deleting
                and view.key != victim_key
                and view.key not in self.claimed
                and view.uid not in siblings
                and view.created >= victim.created
            ):
                self.claimed.add(view.key)
                return view.key
        return None

    def _abandoned(self, s: _Step, sid: int, reason: str) -> Abandon:
        return Abandon(sid, s.target or s.spec.pod, reason, replaces=s.spec.replaces)

    def _abandon(self, sid: int, reason: str) -> list[Action]:
        s = self.steps[sid]
        s.state = "abandoned"
        out: list[Action] = [self._abandoned(s, sid, reason)]
        return out + self._abandon_dependents(sid, reason) + self._fail(reason)

    def _abandon_dependents(self, sid: int, reason: str) -> list[Action]:
        out: list[Action] = []
        for other_id, other in self.steps.items():
            if sid in other.spec.after and other.state == "waiting":
                out += self._abandon(other_id, reason)
        return out


def _key(spec: Step) -> str:
    """The pod an evict, await-gone or pending bind step names."""
    assert spec.pod is not None, f"step {spec.id} ({spec.op}) names no pod"
    return spec.pod


Handler = Callable[[PlanRun, int, _Step, World, dict[str, dict[str, int]]], list[Action]]
_HANDLERS: dict[Effect, Handler] = {
    Effect.EVICT: PlanRun._evict,
    Effect.AWAIT_GONE: PlanRun._await_gone,
    Effect.BIND: PlanRun._bind,
    Effect.MARK: PlanRun._mark,
}
