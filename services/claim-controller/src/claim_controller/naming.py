"""Names, well-known keys and bodies of the ResourceClaims the controller generates (pure).

The generated name follows upstream's resourceclaim controller: ``generateName = "<pod>-<podClaim>-"``;
the API server appends five random characters. A base longer than 57 characters (63, the DNS label
limit, minus the hyphen and the five characters) is shortened by truncating *both* parts in proportion
to their length, so the pod claim name stays recognisable even for long pod names; the truncated form
has no trailing hyphen (upstream does the same).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from draflow_runtime.kube import RESOURCE_CLAIMS

__all__ = [
    "MAX_GENERATE_NAME_BASE",
    "POD_CLAIM_NAME_ANNOTATION",
    "SHARD_LABEL",
    "claim_body",
    "generate_name",
]

#: Annotation on a generated claim naming the pod claim (``pod.spec.resourceClaims[].name``) it is for.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"

#: Label on a claim generated for a pod when the work is split (``--shards N``, N > 1): ``<i>-of-<N>``, the
#: shard of its owner pod, so that a replica can watch only the claims of its shards (:mod:`.sharding`).
#: The controller's own: a template's value for it is never copied.
SHARD_LABEL = "draflow.dev/claim-controller-shard"

#: Longest ``generateName`` that still leaves room for five random characters in a 63-character name.
MAX_GENERATE_NAME_BASE = 57


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """The ``metadata.generateName`` of the claim generated for ``pod_claim_name`` of pod ``pod_name``.

    ``"my-pod" + "gpu"`` gives ``"my-pod-gpu-"``. When that is longer than 57 characters both parts are
    cut proportionally: ``pod[:len(pod)*57//total] + "-" + claim[:len(claim)*57//total]`` where
    ``total`` is the length of the untruncated base (with both hyphens), exactly as upstream computes it.
    """
    base = f"{pod_name}-{pod_claim_name}-"
    total = len(base)
    if total <= MAX_GENERATE_NAME_BASE:
        return base
    pod_part = pod_name[: len(pod_name) * MAX_GENERATE_NAME_BASE // total]
    claim_part = pod_claim_name[: len(pod_claim_name) * MAX_GENERATE_NAME_BASE // total]
    return f"{pod_part}-{claim_part}"


def claim_body(owner_ref: Mapping[str, Any], namespace: str, pod_claim_name: str,
               template: Mapping[str, Any], *, finalizers: Sequence[str] = ()) -> dict[str, Any]:
    """The ResourceClaim generated from ``template`` for ``pod_claim_name`` of the owner ``owner_ref`` (a
    pod or a PodGroup, in ``namespace``; its ``name`` starts the generated name): the template's labels
    and annotations (but :data:`SHARD_LABEL`) plus the pod-claim-name annotation, the owner as the only
    owner reference, ``finalizers`` (none: no ``metadata.finalizers``, as upstream), the template's claim
    spec. A fresh dict."""
    tmeta = (template.get("spec") or {}).get("metadata") or {}
    annotations = dict(tmeta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = pod_claim_name
    labels = {k: v for k, v in (tmeta.get("labels") or {}).items() if k != SHARD_LABEL}
    return {
        "apiVersion": RESOURCE_CLAIMS.api_version,
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": generate_name(owner_ref["name"], pod_claim_name),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [dict(owner_ref)],
            **({"finalizers": list(finalizers)} if finalizers else {}),
        },
        "spec": (template.get("spec") or {}).get("spec") or {},
    }
