"""PersistentVolumes, PersistentVolumeClaims and StorageClasses, and what they mean for a pod.

The readers keep only what placement needs. ``resolve_volumes`` turns a pod's claims into the
fields the engine reads (``Pod.volume_terms``, ``Pod.wffc_claims``, ``Pod.volume_problem``),
following kube-scheduler's VolumeBinding plugin:

- a claim that is missing, Lost or being deleted makes the pod wait with upstream's message (the
  first such volume in ``spec.volumes`` order, as PreFilter reports it);
- a bound claim (``spec.volumeName`` and the bind-completed annotation or phase Bound) restricts
  the pod to the node affinity of its PersistentVolume; a bound claim whose volume is missing
  makes every node unavailable;
- an unbound claim of a WaitForFirstConsumer StorageClass lets the scheduler choose: the pod
  lists it in ``wffc_claims`` (the controller sets ``volume.kubernetes.io/selected-node`` on it
  before binding), the class's ``allowedTopologies`` restrict the node, and a node the claim
  already names in that annotation is the only one left;
- any other unbound claim (no class, an Immediate class, a missing class, or pre-bound to a
  volume by ``spec.volumeName`` but not yet bound) makes the pod wait: "pod has unbound
  immediate PersistentVolumeClaims".

placer does not bind claims to pre-created PersistentVolumes (kube-scheduler's static binding):
a WaitForFirstConsumer claim of a class without a provisioner (``kubernetes.io/no-provisioner``,
local volumes) can only be served that way, so its pod is refused as Unsupported.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.inputs.fields import Field, api_object
from placer.inputs.shapes import parse_node_selector_terms
from placer.models import ClaimRef, NodeSelectorRequirement, NodeSelectorTerm, Pod

__all__ = [
    "BIND_COMPLETED",
    "NO_PROVISIONER",
    "SELECTED_NODE",
    "UNBOUND_IMMEDIATE",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Storage",
    "StorageClass",
    "parse_claim",
    "parse_persistent_volume",
    "parse_storage_class",
    "pod_volume_claims",
    "read_claim",
    "read_persistent_volume",
    "read_storage_class",
    "resolve_pod",
    "resolve_volumes",
]

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT = "WaitForFirstConsumer"
BINDING_MODES = ("Immediate", WAIT)
CLAIM_PHASES = ("Pending", "Bound", "Lost")
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


@dataclass(frozen=True)
class PersistentVolume:
    name: str
    # spec.nodeAffinity.required.nodeSelectorTerms (ORed); None: the volume is usable anywhere.
    node_terms: tuple[NodeSelectorTerm, ...] | None = None


@dataclass(frozen=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str = ""
    phase: str = "Pending"
    storage_class: str = ""
    selected_node: str | None = None
    bind_completed: bool = False
    deleting: bool = False
    controller_uid: str = ""  # the controlling owner (a generic ephemeral volume's pod)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """kube-scheduler's "fully bound": a volume name plus the PV controller's bind-completed
        annotation (a dump or a hand-written what-if may say phase Bound instead)."""
        return bool(self.volume_name) and (self.bind_completed or self.phase == "Bound")


@dataclass(frozen=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = "Immediate"
    # allowedTopologies as node selector terms (ORed); None: no restriction.
    allowed_topologies: tuple[NodeSelectorTerm, ...] | None = None


@dataclass(frozen=True)
class Storage:
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)  # "namespace/name"
    classes: Mapping[str, StorageClass] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        volumes: Iterable[PersistentVolume] = (),
        claims: Iterable[PersistentVolumeClaim] = (),
        classes: Iterable[StorageClass] = (),
    ) -> Storage:
        return cls(
            volumes={v.name: v for v in volumes},
            claims={c.key: c for c in claims},
            classes={c.name: c for c in classes},
        )


# -- readers --------------------------------------------------------------------------------------


def pod_volume_claims(spec: Field, pod_name: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """(claim names in ``spec.volumes`` order without repeats, the generic ephemeral ones among
    them). A generic ephemeral volume's claim is named ``<pod name>-<volume name>``."""
    claims: list[str] = []
    ephemeral: set[str] = set()
    for volume in spec.get("volumes").items():
        source = volume.get("persistentVolumeClaim")
        if source.present():
            name = source.get("claimName").required_str()
        elif volume.get("ephemeral").present():
            name = f"{pod_name}-{volume.get('name').required_str()}"
            ephemeral.add(name)
        else:
            continue
        if name not in claims:
            claims.append(name)
    return tuple(claims), frozenset(ephemeral)


def read_persistent_volume(item: Field) -> PersistentVolume:
    name = item.get("metadata").get("name").required_str()
    required = item.get("spec").get("nodeAffinity").get("required")
    terms = parse_node_selector_terms(required.get("nodeSelectorTerms")) if required.present() else None
    return PersistentVolume(name=name, node_terms=terms)


def read_claim(item: Field) -> PersistentVolumeClaim:
    meta, spec = item.get("metadata"), item.get("spec")
    annotations = meta.get("annotations").str_map()
    # GetPersistentVolumeClaimClass: the beta annotation, when present, wins over the field.
    storage_class = annotations[BETA_CLASS] if BETA_CLASS in annotations else spec.get("storageClassName").text()
    phase = item.get("status").get("phase").text("Pending") or "Pending"
    if phase not in CLAIM_PHASES:
        raise item.get("status").get("phase").fail(f"invalid phase {phase!r} (one of {', '.join(CLAIM_PHASES)})")
    refs = list(meta.get("ownerReferences").items())
    controller = next((r for r in refs if r.get("controller").flag()), None)
    return PersistentVolumeClaim(
        namespace=meta.get("namespace").text("default") or "default",
        name=meta.get("name").required_str(),
        volume_name=spec.get("volumeName").text(),
        phase=phase,
        storage_class=storage_class,
        selected_node=annotations.get(SELECTED_NODE) or None,
        bind_completed=BIND_COMPLETED in annotations,
        deleting=meta.get("deletionTimestamp").present(),
        controller_uid=controller.get("uid").text() if controller is not None else "",
    )


def _topology_term(f: Field) -> NodeSelectorTerm:
    """One allowedTopologies term: every expression is "label key In values"."""
    exprs = []
    for e in f.get("matchLabelExpressions").items():
        values = e.get("values").str_list()
        if not values:
            raise e.get("values").fail("needs at least one value")
        exprs.append(NodeSelectorRequirement(key=e.get("key").required_str(), operator="In", values=values))
    if not exprs:
        raise f.get("matchLabelExpressions").fail("a topology term needs at least one expression")
    return NodeSelectorTerm(match_expressions=tuple(exprs))


def read_storage_class(item: Field) -> StorageClass:
    mode = item.get("volumeBindingMode").text("Immediate") or "Immediate"
    if mode not in BINDING_MODES:
        raise item.get("volumeBindingMode").fail(
            f"invalid volumeBindingMode {mode!r} (one of {', '.join(BINDING_MODES)})"
        )
    topologies = tuple(_topology_term(t) for t in item.get("allowedTopologies").items())
    return StorageClass(
        name=item.get("metadata").get("name").required_str(),
        provisioner=item.get("provisioner").text(),
        binding_mode=mode,
        allowed_topologies=topologies or None,
    )


def parse_persistent_volume(raw: Any, source: str = "api") -> PersistentVolume:
    """One PersistentVolume as the API returns it, with errors naming the object."""
    return read_persistent_volume(api_object(raw, "PersistentVolume", source))


def parse_claim(raw: Any, source: str = "api") -> PersistentVolumeClaim:
    return read_claim(api_object(raw, "PersistentVolumeClaim", source))


def parse_storage_class(raw: Any, source: str = "api") -> StorageClass:
    return read_storage_class(api_object(raw, "StorageClass", source))


# -- resolution -----------------------------------------------------------------------------------


def _name_term(node: str) -> tuple[NodeSelectorTerm, ...]:
    req = NodeSelectorRequirement(key="metadata.name", operator="In", values=(node,))
    return (NodeSelectorTerm(match_fields=(req,)),)


def _claim_problem(pod: Pod, storage: Storage, ephemeral: Collection[str]) -> str | None:
    """VolumeBinding's PreFilter checks of each claim, in volume order (the first one reported)."""
    for name in pod.claims:
        claim = storage.claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            if name in ephemeral:
                return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
            return f'persistentvolumeclaim "{name}" not found'
        if claim.phase == "Lost":
            return f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{claim.volume_name}"'
        if claim.deleting:
            return f'persistentvolumeclaim "{name}" is being deleted'
        if name in ephemeral and claim.controller_uid != pod.uid:
            return f"PVC {claim.namespace}/{name} was not created for pod {pod.key} (pod is not owner)"
    return None


def resolve_pod(pod: Pod, storage: Storage, node_count: int) -> Pod:
    """The pod with its volume fields computed from its claims (replaced, so resolving twice is
    harmless). ``node_count`` words the message of a claim bound to a missing volume, which
    kube-scheduler reports per node."""
    update: dict[str, Any] = {"volume_terms": (), "wffc_claims": (), "volume_problem": None}
    problem = _claim_problem(pod, storage, pod.ephemeral_claims)
    if problem is not None:
        return pod.model_copy(update={**update, "volume_problem": problem})
    terms: list[tuple[NodeSelectorTerm, ...]] = []
    wffc: list[ClaimRef] = []
    immediate = missing_volume = False
    unsupported = None
    for name in pod.claims:
        claim = storage.claims[f"{pod.namespace}/{name}"]
        if claim.bound:
            volume = storage.volumes.get(claim.volume_name)
            if volume is None:
                missing_volume = True
            elif volume.node_terms is not None:
                terms.append(volume.node_terms)
            continue
        cls = storage.classes.get(claim.storage_class) if claim.storage_class else None
        if cls is None or cls.binding_mode != WAIT or claim.volume_name:
            immediate = True
            continue
        wffc.append(ClaimRef(namespace=pod.namespace, name=name))
        if claim.selected_node:
            terms.append(_name_term(claim.selected_node))
        if cls.allowed_topologies is not None:
            terms.append(cls.allowed_topologies)
        if cls.provisioner == NO_PROVISIONER and unsupported is None:
            unsupported = (
                f'persistentvolumeclaim "{name}" (StorageClass "{cls.name}", no provisioner) can only be bound to a '
                "pre-created PersistentVolume, which placer does not do"
            )
    if immediate:
        update["volume_problem"] = UNBOUND_IMMEDIATE
    elif missing_volume:
        update["volume_problem"] = f"{node_count} {PV_NOT_EXIST}"
    else:
        update["volume_terms"] = tuple(dict.fromkeys(terms))
        update["wffc_claims"] = tuple(wffc)
        if unsupported is not None and pod.unsupported is None:
            update["unsupported"] = unsupported
    return pod.model_copy(update=update)


def resolve_volumes(pods: Sequence[Pod], storage: Storage, node_count: int) -> list[Pod]:
    """Every pod that mounts claims, resolved (``resolve_pod``); the others as they are."""
    return [resolve_pod(p, storage, node_count) if p.claims else p for p in pods]
