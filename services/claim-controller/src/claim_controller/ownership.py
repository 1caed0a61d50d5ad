"""Which claims were generated for a pod, and when a pod is done with its claims (pure, plain dicts).

Which claims a pod uses is :mod:`draflow_runtime.dra` (``pod_claims``, shared with the allocator, the
kubelet shim, the CLI and the testenv). A generated claim is recognised by two marks together, as
upstream does: the ``resource.kubernetes.io/pod-claim-name`` annotation and a controller owner
reference to the pod's UID. Both are needed: the annotation says *which* pod claim, the owner says *which
incarnation* of the pod.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from draflow_runtime.dra import claim_names, is_controlled_by, owning_pod, pod_claims, pod_is_finished
from draflow_runtime.podgroups import owning_pod_group

from .naming import POD_CLAIM_NAME_ANNOTATION

__all__ = [
    "claim_uses",
    "is_generated_for",
    "owner_pod_uid",
    "owner_uid",
    "pod_is_done",
    "referenced_template_names",
]

Obj = Mapping[str, Any]


def referenced_template_names(pod: Obj) -> list[str]:
    """Names of the ResourceClaimTemplates the pod's claims are generated from."""
    return sorted({pc.template_name for pc in pod_claims(pod) if pc.template_name})


def owner_pod_uid(claim: Obj) -> list[str]:
    """Index function: ``[uid]`` of the controlling pod, ``[]`` when the claim has none."""
    owner = owning_pod(claim)
    return [owner[1]] if owner and owner[1] else []


def owner_uid(claim: Obj) -> list[str]:
    """Index function: ``[uid]`` of the controlling pod or PodGroup, ``[]`` when the claim has neither."""
    owner = owning_pod(claim) or owning_pod_group(claim)
    return [owner[1]] if owner and owner[1] else []


def is_generated_for(claim: Obj, pod: Obj, pod_claim_name: str) -> bool:
    """True when ``claim`` was generated for pod claim ``pod_claim_name`` of this pod incarnation."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return annotations.get(POD_CLAIM_NAME_ANNOTATION) == pod_claim_name and is_controlled_by(claim, pod)


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
    for name in claim_names(pod, extended=True):
        yield f"{namespace}/{name}"
