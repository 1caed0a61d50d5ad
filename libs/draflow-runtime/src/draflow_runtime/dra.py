"""DRA facts more than one service needs, as pure functions on plain dicts (no I/O).

**Which ResourceClaims a pod uses** (upstream ``resourceclaim.Name``, k8s.io/dynamic-resource-allocation
v0.37.1). Each entry of ``pod.spec.resourceClaims`` names either

- ``resourceClaimName``: a claim made by the user (possibly shared); used as is, no owner check; or
- ``resourceClaimTemplateName``: a claim the claim-controller generates. Its name is looked up in
  ``pod.status.resourceClaimStatuses`` by pod claim name. No entry yet: the claim is not created yet
  (wait). An entry without ``resourceClaimName``: no claim is needed, skip it (kube-scheduler and the
  kubelet both ``continue`` there). A generated claim must be *controlled* by this pod (owner check).

Besides those, kube-scheduler may make one special claim for the pod's extended resources backed by DRA
(``pod.status.extendedResourceClaimStatus.resourceClaimName``); it is owned by the pod, like a generated
claim. Callers that prepare or clean up claims want it; the allocator, which makes it, handles it itself.

**Claims**: the delete-protection finalizer, the 256-entry ``reservedFor`` limit, "reserved for this pod"
(by UID, as upstream ``IsReservedForPod``), the ``reservedFor`` entry of a pod, the node of a node-local
allocation and the device results of an allocation. Writes that use these facts (deallocation) are in
:mod:`draflow_runtime.claimwrites`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DELETE_PROTECTION_FINALIZER",
    "RESERVED_FOR_MAX",
    "TERMINAL_PHASES",
    "PodClaim",
    "allocation_node",
    "allocation_results",
    "claim_names",
    "claim_results",
    "extended_claim_name",
    "is_controlled_by",
    "is_reserved_for",
    "owning_pod",
    "pod_claims",
    "pod_consumer_ref",
    "pod_is_finished",
    "resolve_claim_entries",
]

Obj = Mapping[str, Any]

#: Finalizer an allocator adds with the allocation (upstream ``resourceapi.Finalizer``); removed by
#: whoever deallocates the claim once nothing is allocated or reserved any more.
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"

#: Most entries ``status.reservedFor`` may hold (upstream ``ResourceClaimReservedForMaxSize``); the API
#: server refuses a 257th.
RESERVED_FOR_MAX = 256

#: Pod phases after which a pod never runs again.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

_NOT_CREATED = "ResourceClaim not generated yet"
_UNSUPPORTED = "neither resourceClaimName nor template set"


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One claim of a pod, resolved against the pod status.

    ``name`` is the pod claim name (``""`` for the extended-resource claim). ``claim_name`` is the
    ResourceClaim to use, or None: not created yet (a template claim without a status entry), not
    needed (``needed`` False: the status entry has no ``resourceClaimName``), or an entry that names
    neither a claim nor a template (the API server refuses those; kept so callers can report it).
    ``generated`` (upstream ``mustCheckOwner``): the claim must be controlled by this pod before use.
    """

    name: str
    claim_name: str | None
    template_name: str | None
    generated: bool
    needed: bool = True

    @property
    def waiting(self) -> str:
        """Why a needed claim has no name yet ("" when it has one or is not needed)."""
        if self.claim_name or not self.needed:
            return ""
        return _NOT_CREATED if self.template_name else _UNSUPPORTED


def _status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


def pod_claims(pod: Obj, *, extended: bool = False) -> list[PodClaim]:
    """Every entry of ``pod.spec.resourceClaims`` in order, resolved (see :class:`PodClaim`); with
    ``extended`` also the extended-resource claim, last, when the pod has one."""
    out = resolve_claim_entries(pod)
    if extended:
        ext = extended_claim_name(pod)
        if ext:
            out.append(PodClaim("", ext, None, generated=True))
    return out


def resolve_claim_entries(obj: Obj) -> list[PodClaim]:
    """``spec.resourceClaims`` of a pod or a PodGroup (the same shape) resolved against its
    ``status.resourceClaimStatuses`` (upstream ``Name`` / ``NameFromPodGroup``)."""
    recorded = {s["name"]: s.get("resourceClaimName") for s in _status(obj).get("resourceClaimStatuses") or ()
                if s.get("name")}
    out: list[PodClaim] = []
    for entry in (obj.get("spec") or {}).get("resourceClaims") or ():
        name = entry.get("name") or ""
        if entry.get("resourceClaimName"):
            out.append(PodClaim(name, entry["resourceClaimName"], None, generated=False))
        elif entry.get("resourceClaimTemplateName"):
            template = entry["resourceClaimTemplateName"]
            if name in recorded and not recorded[name]:
                out.append(PodClaim(name, None, template, generated=True, needed=False))
            else:
                out.append(PodClaim(name, recorded.get(name), template, generated=True))
        else:
            out.append(PodClaim(name, None, None, generated=False))
    return out


def claim_names(pod: Obj, *, extended: bool = False) -> list[str]:
    """Names of the pod's claims that are known now, in :func:`pod_claims` order."""
    return [pc.claim_name for pc in pod_claims(pod, extended=extended) if pc.claim_name]


def extended_claim_name(pod: Obj) -> str | None:
    """The claim kube-scheduler made for the pod's extended resources backed by DRA, or None."""
    return (_status(pod).get("extendedResourceClaimStatus") or {}).get("resourceClaimName") or None


def pod_is_finished(pod: Obj) -> bool:
    """The pod reached a terminal phase (``Succeeded`` or ``Failed``)."""
    return _status(pod).get("phase") in TERMINAL_PHASES


def is_controlled_by(claim: Obj, pod: Obj) -> bool:
    """``claim`` has a controller owner reference to this pod incarnation (kind ``Pod``, same UID): a
    generated or extended-resource claim may be used by the pod (upstream ``IsForPod``)."""
    uid = (pod.get("metadata") or {}).get("uid")
    return bool(uid) and any(
        ref.get("controller") and ref.get("kind") == "Pod" and ref.get("uid") == uid
        for ref in (claim.get("metadata") or {}).get("ownerReferences") or ()
    )


def owning_pod(claim: Obj) -> tuple[str, str] | None:
    """``(name, uid)`` of the core/v1 Pod that controls ``claim`` (a generated or extended-resource claim),
    or None when its controller (an object has at most one) is something else or it has none."""
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            if ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
                return str(ref.get("name", "")), str(ref.get("uid", ""))
            return None
    return None


def is_reserved_for(claim: Obj, pod: Obj) -> bool:
    """This pod incarnation (by UID) is in the claim's ``status.reservedFor``."""
    uid = (pod.get("metadata") or {}).get("uid")
    return bool(uid) and any(r.get("uid") == uid for r in _status(claim).get("reservedFor") or ())


SCHEDULING_GROUP = "scheduling.k8s.io"  # PodGroup's API group (DRAWorkloadResourceClaims)


def pod_group_name(pod: Obj) -> str:
    """The PodGroup the pod belongs to (``spec.schedulingGroup.podGroupName``), else ""."""
    return str(((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or "")


def is_reserved_for_pod_or_group(claim: Obj, pod: Obj, pod_groups: bool) -> bool:
    """Upstream ``IsReservedForPod``: the pod (by UID) is in ``reservedFor``, or, with ``pod_groups``
    (DRAWorkloadResourceClaims), its PodGroup is (by API group, resource and name: a pod does not know
    its PodGroup's UID)."""
    if is_reserved_for(claim, pod):
        return True
    group = pod_group_name(pod) if pod_groups else ""
    return bool(group) and any(
        r.get("apiGroup") == SCHEDULING_GROUP and r.get("resource") == "podgroups" and r.get("name") == group
        for r in _status(claim).get("reservedFor") or ()
    )


def is_for_pod_or_group(claim: Obj, pod: Obj, pod_groups: bool) -> bool:
    """Upstream ``IsForPod``: ``claim`` is controlled by the pod, or, with ``pod_groups``, by the pod's
    PodGroup (controller kind ``PodGroup`` of the ``scheduling.k8s.io`` group, any version, same name)."""
    if is_controlled_by(claim, pod):
        return True
    group = pod_group_name(pod) if pod_groups else ""
    return bool(group) and any(
        ref.get("controller") and ref.get("kind") == "PodGroup" and ref.get("name") == group
        and str(ref.get("apiVersion", "")).startswith(SCHEDULING_GROUP + "/")
        for ref in (claim.get("metadata") or {}).get("ownerReferences") or ()
    )


def pod_consumer_ref(pod: Obj) -> dict[str, str]:
    """The ``status.reservedFor`` entry of ``pod`` (core group: no ``apiGroup``)."""
    meta = pod["metadata"]
    return {"resource": "pods", "name": meta["name"], "uid": meta["uid"]}


def allocation_node(claim: Obj) -> str:
    """The node a node-local allocation selects (``matchFields metadata.name In [node]``), else ""."""
    selector = (_status(claim).get("allocation") or {}).get("nodeSelector") or {}
    for term in selector.get("nodeSelectorTerms") or ():
        for req in term.get("matchFields") or ():
            if req.get("key") == "metadata.name" and req.get("operator") == "In" and req.get("values"):
                return str(req["values"][0])
    return ""


def allocation_results(allocation: Obj | None) -> list[Mapping[str, Any]]:
    """``allocation.devices.results`` (empty for None or no devices)."""
    return list(((allocation or {}).get("devices") or {}).get("results") or ())


def claim_results(claim: Obj) -> list[Mapping[str, Any]]:
    """The device results of the claim's ``status.allocation`` (empty when not allocated)."""
    return allocation_results(_status(claim).get("allocation"))
