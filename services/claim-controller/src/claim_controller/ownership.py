"""Which claims a pod uses and which claims were generated for it (pure functions on plain dicts).

A pod names its claims in ``spec.resourceClaims``: either ``resourceClaimName`` (a claim the user made,
possibly shared) or ``resourceClaimTemplateName`` (a claim this controller generates; its name is
recorded in ``status.resourceClaimStatuses``). A generated claim is recognised by two marks together,
as upstream does: the ``resource.kubernetes.io/pod-claim-name`` annotation and a controller owner
reference to the pod's UID. Both are needed: the annotation says *which* pod claim, the owner says *which
incarnation* of the pod.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .naming import POD_CLAIM_NAME_ANNOTATION

__all__ = [
    "PodClaim",
    "claim_uses",
    "controller_owner",
    "extended_claim_name",
    "is_generated_for",
    "is_owned_by_pod",
    "owner_pod_uid",
    "owning_pod",
    "pod_claims",
    "pod_is_done",
    "pod_is_finished",
    "referenced_claim_names",
    "referenced_template_names",
]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of ``pod.spec.resourceClaims``, resolved against the pod status.

    ``claim_name`` is the ResourceClaim to use, or None when it is not known yet (a template claim with
    no status entry) or not needed (a status entry with no ``resourceClaimName``: ``needed`` is False).
    ``generated`` is True for template claims; their owner must be checked before use.
    """

    name: str
    claim_name: str | None
    template_name: str | None
    generated: bool
    needed: bool = True


def _status_entries(pod: Obj) -> dict[str, str | None]:
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or ()
    return {s["name"]: s.get("resourceClaimName") for s in statuses if s.get("name")}


def pod_claims(pod: Obj) -> list[PodClaim]:
    """Every pod claim of ``pod`` with the claim name it resolves to (see :class:`PodClaim`)."""
    recorded = _status_entries(pod)
    out: list[PodClaim] = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        name = entry.get("name") or ""
        if entry.get("resourceClaimName"):
            out.append(PodClaim(name, entry["resourceClaimName"], None, generated=False))
        elif entry.get("resourceClaimTemplateName"):
            template = entry["resourceClaimTemplateName"]
            if name in recorded and not recorded[name]:
                out.append(PodClaim(name, None, template, generated=True, needed=False))
            else:
                out.append(PodClaim(name, recorded.get(name), template, generated=True))
    return out


def referenced_claim_names(pod: Obj) -> list[str]:
    """Names of every claim the pod uses that are known now (direct references and recorded ones)."""
    return [pc.claim_name for pc in pod_claims(pod) if pc.claim_name]


def referenced_template_names(pod: Obj) -> list[str]:
    """Names of the ResourceClaimTemplates the pod's claims are generated from."""
    return sorted({pc.template_name for pc in pod_claims(pod) if pc.template_name})


def controller_owner(obj: Obj) -> dict[str, Any] | None:
    """The owner reference with ``controller: true``, or None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def owning_pod(claim: Obj) -> tuple[str, str] | None:
    """``(name, uid)`` of the pod that controls ``claim`` (a generated claim), or None."""
    ref = controller_owner(claim)
    if ref and ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
        return ref.get("name", ""), ref.get("uid", "")
    return None


def owner_pod_uid(claim: Obj) -> list[str]:
    """Index function: ``[uid]`` of the controlling pod, ``[]`` when the claim has none."""
    owner = owning_pod(claim)
    return [owner[1]] if owner and owner[1] else []


def is_owned_by_pod(claim: Obj, pod: Obj) -> bool:
    """True when ``pod`` (this incarnation: same UID) is the claim's controller."""
    owner = owning_pod(claim)
    return owner is not None and owner[1] == (pod.get("metadata") or {}).get("uid")


def is_generated_for(claim: Obj, pod: Obj, pod_claim_name: str) -> bool:
    """True when ``claim`` was generated for pod claim ``pod_claim_name`` of this pod incarnation."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return annotations.get(POD_CLAIM_NAME_ANNOTATION) == pod_claim_name and is_owned_by_pod(claim, pod)


def pod_is_finished(pod: Obj) -> bool:
    """The pod reached a terminal phase (``Succeeded`` or ``Failed``)."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_is_done(pod: Obj) -> bool:
    """The pod will never (again) use its claims: it finished, or it is being deleted before it was
    ever bound to a node (upstream's ``isPodDone``). A bound pod being deleted still runs until the
    kubelet confirms, so it keeps its reservations."""
    meta = pod.get("metadata") or {}
    if pod_is_finished(pod):
        return True
    return bool(meta.get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")


def claim_uses(pod: Obj) -> Iterator[str]:
    """Keys ``<namespace>/<claim>`` of every known claim of the pod (for the pod-by-claim index)."""
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    for name in referenced_claim_names(pod):
        yield f"{namespace}/{name}"
    extended = extended_claim_name(pod)
    if extended:
        yield f"{namespace}/{extended}"


def extended_claim_name(pod: Obj) -> str | None:
    """The special claim the scheduler made for the pod's extended resources backed by DRA
    (``status.extendedResourceClaimStatus.resourceClaimName``), or None."""
    return ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
