"""PodGroup facts for claims shared by a group of pods (DRAWorkloadResourceClaims, beta in v1.37; pure).

A PodGroup (``scheduling.k8s.io/v1beta1``, GenericWorkload) lists ``spec.resourceClaims`` in the pod's
shape: a claim by name, or a template the claim-controller makes one claim of *for the whole group*
(owned by the PodGroup, recorded in the PodGroup's ``status.resourceClaimStatuses``). A member pod
(``spec.schedulingGroup.podGroupName``) whose own claim entry has the same name and the same source is
**bound to the group** for that claim (upstream ``resourceclaim.BindTo``): its ``reservedFor`` entry is
the PodGroup, written once for all members, and the claim-controller records the group's claim in the
pod's status instead of generating one per pod. Any other claim of the pod is the pod's own.

Upstream (k8s.io/dynamic-resource-allocation v0.37.1 ``resourceclaim``): ``BindTo``,
``NameFromPodGroup``, ``IsForPodGroup``; ``IsForPod`` / ``IsReservedForPod`` with PodGroups are
:func:`draflow_runtime.dra.is_for_pod_or_group` / :func:`~draflow_runtime.dra.is_reserved_for_pod_or_group`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .dra import SCHEDULING_GROUP, PodClaim, pod_consumer_ref, pod_group_name, resolve_claim_entries

__all__ = [
    "bind_to",
    "is_for_pod_group",
    "is_pod_group_reference",
    "owning_pod_group",
    "pod_group_claims",
    "pod_group_consumer_ref",
]

Obj = Mapping[str, Any]


def pod_group_claims(pod_group: Obj) -> list[PodClaim]:
    """The PodGroup's ``spec.resourceClaims`` resolved against its status (upstream ``NameFromPodGroup``;
    ``generated``: a template claim, to be controlled by the PodGroup)."""
    return resolve_claim_entries(pod_group)


def pod_group_consumer_ref(pod_group: Obj) -> dict[str, str]:
    """The ``status.reservedFor`` entry of a PodGroup."""
    meta = pod_group["metadata"]
    return {"apiGroup": SCHEDULING_GROUP, "resource": "podgroups", "name": meta["name"], "uid": meta["uid"]}


def is_pod_group_reference(ref: Obj) -> bool:
    """A ``reservedFor`` entry that names a PodGroup."""
    return ref.get("apiGroup") == SCHEDULING_GROUP and ref.get("resource") == "podgroups"


def is_for_pod_group(claim: Obj, pod_group: Obj) -> bool:
    """``claim`` is controlled by this PodGroup incarnation (same namespace, controller UID)."""
    meta, cmeta = pod_group.get("metadata") or {}, claim.get("metadata") or {}
    uid = meta.get("uid")
    return bool(uid) and cmeta.get("namespace") == meta.get("namespace") and any(
        ref.get("controller") and ref.get("kind") == "PodGroup" and ref.get("uid") == uid
        for ref in cmeta.get("ownerReferences") or ())


def owning_pod_group(claim: Obj) -> tuple[str, str] | None:
    """``(name, uid)`` of the PodGroup (any ``scheduling.k8s.io`` version) that controls ``claim``."""
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            version = str(ref.get("apiVersion", ""))
            if ref.get("kind") == "PodGroup" and version.startswith(SCHEDULING_GROUP + "/"):
                return str(ref.get("name", "")), str(ref.get("uid", ""))
            return None
    return None


def bind_to(pod: Obj, pod_group: Obj | None, pc: PodClaim) -> dict[str, str]:
    """The ``reservedFor`` entry pod claim ``pc`` of ``pod`` binds its claim to (upstream ``BindTo``): the
    pod's PodGroup when that group lists a claim of the same name and the same source (the same
    ``resourceClaimName``, or the same ``resourceClaimTemplateName``), else the pod itself.
    ``pod_group`` must be the pod's own group (None: not in one, or the gate is off)."""
    if pod_group is not None and pod_group_name(pod) == pod_group["metadata"]["name"]:
        own_name = None if pc.generated else pc.claim_name
        for entry in (pod_group.get("spec") or {}).get("resourceClaims") or ():
            if (entry.get("name") == pc.name and entry.get("resourceClaimName") == own_name
                    and entry.get("resourceClaimTemplateName") == pc.template_name):
                return pod_group_consumer_ref(pod_group)
    return pod_consumer_ref(pod)
